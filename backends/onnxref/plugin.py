"""Registers the ``onnxref`` backend. Imports nothing from onnx.reference: that happens in the worker."""

from cmpx import hookimpl


@hookimpl
def register_backends(registry):
    registry.add(
        "onnxref", "cmpx_onnxref.backend:OnnxrefBackend",
        description="onnx.reference.ReferenceEvaluator: slow, exact CPU reference in numpy",
        supports_marking=True,
    )
