"""Built-in comparison metrics for cmpx."""
