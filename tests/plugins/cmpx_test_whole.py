"""A plugin registering ONNX Runtime again as ``wholert``, a marking backend that declares it cannot run
subgraphs: a sliced run must run it on the whole model."""

import cmpx


@cmpx.hookimpl
def register_backends(registry):
    registry.add("wholert", "cmpx_onnxrt.backend:OnnxrtBackend", description="ONNX Runtime, never sliced",
                 supports_marking=True, runs_subgraphs=False)
