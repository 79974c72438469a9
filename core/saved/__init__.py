"""Saved inputs and outputs: cmpx's own format, and read-only interop with Polygraphy JSON and ONNX test data."""
