"""ONNX reference backend (onnx.reference.ReferenceEvaluator) for cmpx."""
