"""Model transforms: graph rewrites (reduced precision) that any ONNX backend can run."""
