"""ONNX Runtime backend for cmpx."""
