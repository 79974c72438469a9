"""A prebuilt engine (.engine / .plan) as the model, checked without TensorRT: which options only apply to a
build, the numpy dtype of each TensorRT DataType, and the optimization profiles the engine was built with."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cmpx_trt.profiles import Profile, Shape

ENGINE_SUFFIXES = (".engine", ".plan")

# TensorRT DataType name -> numpy dtype name (ml_dtypes names for bfloat16, float8 and int4).
TRT_TO_NUMPY = {"FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16", "INT8": "int8", "UINT8": "uint8",
                "INT32": "int32", "INT64": "int64", "BOOL": "bool", "FP8": "float8_e4m3fn", "INT4": "int4"}

# Options that steer building an engine from ONNX: meaningless for a prebuilt engine (flag, default).
BUILD_ONLY = {"min_shapes": ("--trt-min-shapes", ()), "opt_shapes": ("--trt-opt-shapes", ()),
              "max_shapes": ("--trt-max-shapes", ()), "outputs": ("--trt-outputs", ()),
              "exclude_outputs": ("--trt-exclude-outputs", ()), "save_engine": ("--save-engine", None),
              "load_timing_cache": ("--load-timing-cache", None), "save_timing_cache": ("--save-timing-cache", None),
              "builder_optimization_level": ("--builder-optimization-level", None),
              "pool_limit": ("--pool-limit", ()), "tf32": ("--tf32", False),
              "strongly_typed": ("--strongly-typed", False)}


class EngineOptionError(ValueError):
    pass


def is_engine(model_path: str) -> bool:
    return model_path.lower().endswith(ENGINE_SUFFIXES)


def check_engine_options(options: Mapping[str, Any]) -> None:
    """Refuse build options given with a prebuilt engine, naming them, rather than ignore them silently."""
    given = [flag for name, (flag, default) in BUILD_ONLY.items() if options.get(name) not in (None, default, (), [])]
    if given:
        raise EngineOptionError(f"{', '.join(given)} apply when TensorRT builds an engine from ONNX; this model is "
                                "a prebuilt engine (leave them out, or give the ONNX model)")


def numpy_name(data_type: Any) -> str:
    """The numpy dtype name of a TensorRT DataType (its enum member)."""
    name = getattr(data_type, "name", str(data_type)).rsplit(".", 1)[-1]
    if name not in TRT_TO_NUMPY:
        raise TypeError(f"TensorRT data type {name} has no numpy equivalent cmpx can compare")
    return TRT_TO_NUMPY[name]


def engine_profiles(inputs: Sequence[str], count: int,
                    profile_shape: Callable[[str, int], Sequence[Sequence[int]]]) -> list[Profile]:
    """The engine's optimization profiles: ``profile_shape(input, k)`` gives (min, opt, max) of profile k."""
    def shapes(name: str, index: int) -> tuple[Shape, Shape, Shape]:
        low, opt, high = (tuple(int(d) for d in shape) for shape in profile_shape(name, index))
        return low, opt, high

    return [Profile({name: shapes(name, index) for name in inputs}) for index in range(count)]
