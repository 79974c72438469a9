"""Helpers for testing cmpx plugins: small ONNX models and a pytest plugin (fixtures ``cmpx_cli``,
``cmpx_models``), registered through the ``pytest11`` entry point when cmpx is installed."""
