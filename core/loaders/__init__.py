"""Data loaders: where the input feeds come from."""
