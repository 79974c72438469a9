"""Registers the ``trt`` backend. Imports nothing from TensorRT: the installed version is read from package
metadata, and TensorRT itself is imported only inside the backend's worker."""

from cmpx import BackendOption, hookimpl

from cmpx.plugin import installed

# What ``import tensorrt`` comes from. Not the lean runtime (tensorrt-lean-cu12): it is ``tensorrt_lean``, which the
# backend does not import (tests install it to check the backend's names against).
DISTRIBUTIONS = ("tensorrt", "tensorrt-cu13", "tensorrt-cu12")


def installed_version() -> str | None:
    return installed.version(DISTRIBUTIONS)


def describe() -> str:
    version = installed_version()
    if version is None:
        return "NVIDIA TensorRT on the GPU (not installed: pip install 'cmpx[trt]')"
    major = version.split(".", 1)[0]
    path = "strongly typed; precision from the ONNX graph" if major.isdigit() and int(major) >= 11 else \
        "precision from the ONNX graph (legacy builder flags left unused)"
    return f"NVIDIA TensorRT {version} on the GPU ({path})"


@hookimpl
def register_backends(registry):
    registry.add(
        "trt", "cmpx_trt.backend:TrtBackend", description=describe(), supports_marking=True,
        model_formats=(".engine", ".plan"), precision_flags=("fp16", "bf16", "int8", "fp8"),
        marking_changes_fusion=True, frameworks=DISTRIBUTIONS,
        runs_subgraphs=False,  # a slice would build an engine per slice and per iteration: runs whole
        options=[
            BackendOption("min_shapes", multiple=True, help="profile minimum shapes NAME:[D0,...]; the k-th shape "
                          "given for an input belongs to profile k"),
            BackendOption("opt_shapes", multiple=True, help="profile optimum shapes, same form"),
            BackendOption("max_shapes", multiple=True, help="profile maximum shapes, same form"),
            BackendOption("outputs", multiple=True, marks=True, help="TensorRT layer outputs to mark: names or "
                          "patterns (mark all: '*'); shape layers, constants and loop bodies are skipped"),
            BackendOption("exclude_outputs", multiple=True, help="layer outputs not to mark"),
            BackendOption("save_engine", flag="--save-engine", help="write the built engine to this file"),
            BackendOption("load_timing_cache", flag="--load-timing-cache", help="timing cache to start from"),
            BackendOption("save_timing_cache", flag="--save-timing-cache", help="write the timing cache here"),
            BackendOption("builder_optimization_level", flag="--builder-optimization-level",
                          help="0 (fast build) to 5 (most tactics) [TensorRT's default: 3]"),
            BackendOption("pool_limit", flag="--pool-limit", multiple=True, aliases=("--memory-pool-limit",),
                          help="memory pool limits, e.g. workspace:1G"),
            BackendOption("plugins", flag="--plugins", multiple=True, help="TensorRT plugin libraries (.so) to load"),
            BackendOption("tf32", flag="--tf32", is_flag=True,
                          help="allow TF32 math (cleared by default, as Polygraphy does)"),
            BackendOption("strongly_typed", flag="--strongly-typed", is_flag=True,
                          help="TensorRT 10: build a strongly typed network, honouring the graph's types exactly "
                               "(TensorRT 11 always does)"),
        ],
    )
