"""What the coordinator needs to know about an ONNX model: its inputs and outputs. Never imports onnx."""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field

from cmpx.dtypes import ONNX_STRING, ONNX_TO_NUMPY
from cmpx.errors import ModelError
from cmpx.userfiles import check_regular, open_regular
from cmpx.model.wire import WireError, as_int64, fields, integer, message, text

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


def read_model(path: str) -> ModelInfo:
    """Read the graph inputs and outputs of the ONNX model at ``path``. Only the model's structure is decoded
    (straight from the protobuf wire format, without importing onnx): weights are skipped unread."""
    if not os.path.exists(path):
        raise ModelError(f"model file not found: {path} (check the path)")
    if os.path.isdir(path):
        raise ModelError(f"model path is a directory, not a file: {path} (give the .onnx file inside it)")
    check_regular(path, "model file")
    if os.path.getsize(path) == 0:
        raise ModelError(f"model file is empty: {path} (re-export the model)")
    try:
        with open_regular(path, "model file") as file:
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        ir_version, graph = _decode(memoryview(mapped))
    except (WireError, OSError) as exc:
        raise ModelError(f"not a valid ONNX model: {path} ({exc}); "
                         "check that the file is a complete .onnx export") from exc
    if ir_version <= 0 or not graph.outputs:
        raise ModelError(f"not a valid ONNX model: {path} (no IR version or no graph outputs); "
                         "check that the file is a complete .onnx export")
    inputs = tuple(_spec(value, path) for value in graph.inputs if value.name not in graph.initialized)
    outputs = tuple(_spec(value, path) for value in graph.outputs)
    return ModelInfo(path, inputs, outputs)


# Field numbers from onnx/onnx.proto.
_MODEL_IR_VERSION, _MODEL_GRAPH = 1, 7
_GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_SPARSE_INITIALIZER = 5, 11, 12, 15
_TENSOR_NAME, _SPARSE_TENSOR_VALUES = 8, 1
_VALUE_NAME, _VALUE_TYPE = 1, 2
_TYPE_TENSOR = 1
_TYPE_KINDS = {1: "tensor", 4: "sequence", 5: "map", 8: "sparse tensor", 9: "optional"}  # the TypeProto oneof
_TENSOR_TYPE_ELEM, _TENSOR_TYPE_SHAPE, _SHAPE_DIM, _DIM_VALUE, _DIM_PARAM = 1, 2, 1, 1, 2


@dataclass
class _ValueInfo:
    """What a ValueInfoProto says about a tensor, decoded with protobuf's rules (last value of a field wins;
    a message field given twice is merged, so repeated dims add up)."""

    name: str = ""
    kind: str | None = None  # which member of TypeProto's oneof is set
    elem_type: int = 0
    has_shape: bool = False
    dims: list[Dim] = field(default_factory=list)


@dataclass
class _Graph:
    inputs: list[_ValueInfo] = field(default_factory=list)
    outputs: list[_ValueInfo] = field(default_factory=list)
    initialized: set[str] = field(default_factory=set)


def _decode(model: memoryview) -> tuple[int, _Graph]:
    ir_version, graph = 0, _Graph()
    for number, _, value in fields(model):
        if number == _MODEL_IR_VERSION:
            ir_version = as_int64(integer(value, "ModelProto.ir_version"))
        elif number == _MODEL_GRAPH:
            _decode_graph(message(value, "ModelProto.graph"), graph)
    return ir_version, graph


def _decode_graph(data: memoryview, graph: _Graph) -> None:
    for number, _, value in fields(data):
        if number == _GRAPH_INPUT:
            graph.inputs.append(_decode_value(message(value, "GraphProto.input")))
        elif number == _GRAPH_OUTPUT:
            graph.outputs.append(_decode_value(message(value, "GraphProto.output")))
        elif number == _GRAPH_INITIALIZER:
            graph.initialized.add(_tensor_name(message(value, "GraphProto.initializer")))
        elif number == _GRAPH_SPARSE_INITIALIZER:
            for inner, _, values in fields(message(value, "GraphProto.sparse_initializer")):
                if inner == _SPARSE_TENSOR_VALUES:
                    graph.initialized.add(_tensor_name(message(values, "SparseTensorProto.values")))


def _tensor_name(tensor: memoryview) -> str:
    name = ""
    for number, _, value in fields(tensor):
        if number == _TENSOR_NAME:
            name = text(value, "TensorProto.name")
    return name


def _decode_value(data: memoryview) -> _ValueInfo:
    info = _ValueInfo()
    for number, _, value in fields(data):
        if number == _VALUE_NAME:
            info.name = text(value, "ValueInfoProto.name")
        elif number == _VALUE_TYPE:
            for kind, _, member in fields(message(value, "ValueInfoProto.type")):
                if kind in _TYPE_KINDS:
                    info.kind = _TYPE_KINDS[kind]
                    if kind == _TYPE_TENSOR:
                        _decode_tensor_type(message(member, "TypeProto.tensor_type"), info)
    return info


def _decode_tensor_type(data: memoryview, info: _ValueInfo) -> None:
    for number, _, value in fields(data):
        if number == _TENSOR_TYPE_ELEM:
            info.elem_type = as_int64(integer(value, "TypeProto.Tensor.elem_type"))
        elif number == _TENSOR_TYPE_SHAPE:
            info.has_shape = True
            for dim_field, _, dim in fields(message(value, "TypeProto.Tensor.shape")):
                if dim_field == _SHAPE_DIM:
                    info.dims.append(_decode_dim(message(dim, "TensorShapeProto.dim")))


def _decode_dim(data: memoryview) -> Dim:
    """A dimension: its size (None if negative), its name, or None when it has neither (the oneof's last wins)."""
    dim: Dim = None
    for number, _, value in fields(data):
        if number == _DIM_VALUE:
            size = as_int64(integer(value, "Dimension.dim_value"))
            dim = size if size >= 0 else None
        elif number == _DIM_PARAM:
            dim = text(value, "Dimension.dim_param")
    return dim


def _spec(value: _ValueInfo, path: str) -> TensorSpec:
    if value.kind != "tensor":
        raise ModelError(f"{value.name!r} in {path} is not a tensor (sequences, maps and optionals are not "
                         "supported yet)")
    elem = value.elem_type
    if elem == ONNX_STRING:
        raise ModelError(f"{value.name!r} in {path} is a string tensor; cmpx compares numeric tensors only")
    if elem not in ONNX_TO_NUMPY:
        raise ModelError(f"{value.name!r} in {path} has ONNX element type {elem}, which cmpx does not know")
    return TensorSpec(value.name, ONNX_TO_NUMPY[elem], tuple(value.dims) if value.has_shape else None)
