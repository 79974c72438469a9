"""ONNX element types and their numpy dtypes (ml_dtypes supplies bfloat16, float8, int4...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# ONNX TensorProto.DataType value -> numpy dtype name. Names resolve with np.dtype() once ml_dtypes is imported.
ONNX_TO_NUMPY = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
    10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2",
}
ONNX_STRING = 8
# Element types a TensorProto packs below a byte (its raw_data: two 4-bit or four 2-bit values a byte), by their bits
PACKED_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype for a dtype name, including the ml_dtypes extension types."""
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # registers nothing globally; look the type up by name

        return np.dtype(getattr(ml_dtypes, name))


def largest_finite(dtype: np.dtype) -> float:
    """The largest finite value of a float dtype: numpy's (a complex one's parts), or ml_dtypes' bfloat16,
    float8... (imported only for those)."""
    import numpy as np

    if not is_extension(dtype):
        return float(np.finfo(dtype).max)
    import ml_dtypes

    return float(ml_dtypes.finfo(dtype).max)


def is_extension(dtype: np.dtype) -> bool:
    """True for types numpy itself lacks (ml_dtypes' bfloat16, float8, int4...): .npy cannot describe them."""
    return dtype.isbuiltin == 2


def is_floating(dtype: np.dtype) -> bool:
    """True for IEEE floats and the ml_dtypes float types (bfloat16, float8...)."""
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.name.startswith(("bfloat", "float")))
