"""Registers the ``onnxref`` backend. Imports nothing from onnx.reference: that happens in the worker."""

from cmpx import BackendOption, hookimpl


@hookimpl
def register_backends(registry):
    registry.add(
        "onnxref", "cmpx_onnxref.backend:OnnxrefBackend",
        description="onnx.reference.ReferenceEvaluator: slow, exact CPU reference in numpy",
        supports_marking=True, runs_subgraphs=True, frameworks=("onnx",),
        forkable=True,
        options=[BackendOption(
            "opset", type=int,
            help="run the model converted to this opset (ONNX's version converter), e.g. to avoid the reference "
                 "evaluator's mistakes on old opsets [default: the model's own]")],
    )
