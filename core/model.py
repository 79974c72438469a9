"""What the coordinator needs to know about an ONNX model: its inputs and outputs. Imports onnx lazily."""

from __future__ import annotations

import os
from dataclasses import dataclass

from cmpx.dtypes import ONNX_STRING, ONNX_TO_NUMPY
from cmpx.errors import ModelError

Dim = int | str | None  # a fixed size, a named dynamic dimension, or an unknown one


def format_shape(shape: tuple[Dim, ...] | None) -> str:
    """``[N,3,?]``: sizes, named dynamic dimensions, ``?`` for unknown ones; ``?`` when even the rank is unknown."""
    return "?" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output: name, numpy dtype name, and shape (None when even the rank is unknown)."""

    name: str
    dtype: str
    shape: tuple[Dim, ...] | None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    def shape_text(self) -> str:
        return "[?]" if self.shape is None else format_shape(self.shape)


@dataclass(frozen=True)
class ModelInfo:
    path: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def input(self, name: str) -> TensorSpec | None:
        return next((spec for spec in self.inputs if spec.name == name), None)


def read_model(path: str) -> ModelInfo:
    """Read the graph inputs and outputs of the ONNX model at ``path`` (external weights are not loaded)."""
    if not os.path.exists(path):
        raise ModelError(f"model file not found: {path} (check the path)")
    if os.path.isdir(path):
        raise ModelError(f"model path is a directory, not a file: {path} (give the .onnx file inside it)")
    if os.path.getsize(path) == 0:
        raise ModelError(f"model file is empty: {path} (re-export the model)")
    import onnx  # the coordinator needs onnx only once it reads a model
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(path, load_external_data=False)
    except (DecodeError, RuntimeError, ValueError, OSError) as exc:
        raise ModelError(f"not a valid ONNX model: {path} ({type(exc).__name__}: {exc}); "
                         "check that the file is a complete .onnx export") from exc
    graph = model.graph
    if model.ir_version <= 0 or not graph.output:
        raise ModelError(f"not a valid ONNX model: {path} (no IR version or no graph outputs); "
                         "check that the file is a complete .onnx export")
    initialized = {init.name for init in graph.initializer}
    inputs = tuple(_spec(value, path) for value in graph.input if value.name not in initialized)
    outputs = tuple(_spec(value, path) for value in graph.output)
    return ModelInfo(path, inputs, outputs)


def _spec(value, path: str) -> TensorSpec:  # value: onnx.ValueInfoProto
    if not value.type.HasField("tensor_type"):
        raise ModelError(f"{value.name!r} in {path} is not a tensor (sequences, maps and optionals are not "
                         "supported yet)")
    tensor_type = value.type.tensor_type
    elem = tensor_type.elem_type
    if elem == ONNX_STRING:
        raise ModelError(f"{value.name!r} in {path} is a string tensor; cmpx compares numeric tensors only")
    if elem not in ONNX_TO_NUMPY:
        raise ModelError(f"{value.name!r} in {path} has ONNX element type {elem}, which cmpx does not know")
    shape = None
    if tensor_type.HasField("shape"):
        shape = tuple(dim_value(d) for d in tensor_type.shape.dim)
    return TensorSpec(value.name, ONNX_TO_NUMPY[elem], shape)


def dim_value(dim) -> Dim:
    if dim.HasField("dim_value"):
        return int(dim.dim_value) if dim.dim_value >= 0 else None
    if dim.HasField("dim_param"):
        return dim.dim_param
    return None
