"""Registers the ``onnxrt`` backend. Imports nothing from onnxruntime: that happens in the worker."""

from cmpx import BackendOption, hookimpl

# Polygraphy's --graph-optimization-level takes ONNX Runtime's enum names.
POLYGRAPHY_LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")


@hookimpl
def register_backends(registry):
    registry.add(
        "onnxrt", "cmpx_onnxrt.backend:OnnxrtBackend",
        description="ONNX Runtime (CPU by default)",
        options=[
            BackendOption(
                "providers", multiple=True, default=("cpu",), aliases=("--providers", "--execution-providers"),
                help="execution providers in priority order: short names (cpu, cuda, tensorrt, openvino, dml, "
                     "coreml, rocm, migraphx) or full names such as CUDAExecutionProvider [default: cpu]"),
            BackendOption(
                "optimization", choices=("disable", "basic", "extended", "all", *POLYGRAPHY_LEVELS), default=None,
                aliases=("--graph-optimization-level",),
                help="graph optimization level; lower it to find out whether a difference comes from ONNX Runtime's "
                     "graph rewrites (Polygraphy's ORT_ENABLE_BASIC... spellings work too) [default: all, ONNX "
                     "Runtime's own default]"),
        ],
        supports_marking=True, runs_subgraphs=True, marking_changes_qdq_fusion=True,
        forkable=True,
        transform_notes={"fp16": "ONNX Runtime's CPU provider has float16 kernels for few ops: it casts around the "
                                 "others and computes chains of them in float32, so this is not true float16 "
                                 "arithmetic (onnxref:fp16 computes in float16, as TensorRT does)"},
        frameworks=("onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino", "onnxruntime-directml"),
    )
