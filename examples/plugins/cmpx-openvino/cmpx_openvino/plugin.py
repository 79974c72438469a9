"""Registers the ``openvino`` backend; OpenVINO itself is imported only in the backend's worker."""

import cmpx


@cmpx.hookimpl
def register_backends(registry):
    registry.add(
        "openvino", "cmpx_openvino.backend:OpenvinoBackend",
        description="OpenVINO runtime (CPU by default; reads ONNX directly)",
        model_formats=(".xml",), frameworks=("openvino",), supports_marking=True, runs_subgraphs=True,
        options=[
            cmpx.BackendOption("precision", help="inference precision: f32, bf16 or f16 (where the device has it)",
                               default="f32", choices=("f32", "bf16", "f16")),
            cmpx.BackendOption("device", help="OpenVINO device [default: CPU]", default="CPU"),
        ],
    )
