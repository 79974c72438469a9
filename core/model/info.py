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
    """A model input or output: name, numpy dtype name, and shape (None when even the rank is unknown).

    ``value_type`` is set for an output that is not a tensor: a sequence, a map or an optional, written as ONNX
    writes types with numpy's dtype names (``seq(map(int64,tensor(float32)))``); ``dtype`` is then that of the
    tensors it holds and ``shape`` None. Such outputs are compared structurally (cmpx.structured).
    """

    name: str
    dtype: str
    shape: tuple[Dim, ...] | None
    value_type: str | None = None
    # the --input-shapes words that set the sizes cmpx chose for its dynamic dimensions (synthetic data), such as
    # ``sequence=16`` or ``X:[1,3,1]``; empty when nothing was chosen
    chosen: tuple[str, ...] = ()

    @property
    def is_tensor(self) -> bool:
        return self.value_type is None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def sizes(self) -> tuple[int, ...] | None:
        """The shape when every dimension has a size (concrete: dynamic ones set), else None."""
        if self.shape is None or not all(isinstance(d, int) for d in self.shape):
            return None
        return tuple(d for d in self.shape if isinstance(d, int))

    def shape_text(self) -> str:
        return "[?]" if self.shape is None else format_shape(self.shape)


@dataclass(frozen=True)
class ModelInfo:
    """A model's inputs and outputs; ``unsupported``: (name, why) of the outputs cmpx cannot compare (string or
    sparse tensors), which a run must leave out (--onnx-exclude-outputs NAME)."""

    path: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    unsupported: tuple[tuple[str, str], ...] = ()
    external_data: tuple[str, ...] = ()  # the files (relative to the model) its initializers keep their data in


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
    if path.endswith(".py"):  # Polygraphy runs network scripts (define_network.py); cmpx runs models
        raise ModelError(f"{path} is a Python script (a Polygraphy TensorRT network script builds its network in "
                         "code); cmpx runs models: export the network to ONNX, or build a TensorRT engine and run "
                         "it with --backend trt")
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
    inputs = tuple(_spec(value, path, "input") for value in graph.inputs if value.name not in graph.initialized)
    outputs, unsupported = [], []
    for value in graph.outputs:
        try:
            outputs.append(_spec(value, path, "output"))
        except _Unsupported as exc:
            unsupported.append((value.name, str(exc)))
    return ModelInfo(path, inputs, tuple(outputs), tuple(unsupported), tuple(graph.external))


# Field numbers from onnx/onnx.proto.
_MODEL_IR_VERSION, _MODEL_GRAPH = 1, 7
_GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_SPARSE_INITIALIZER = 5, 11, 12, 15
_TENSOR_NAME, _SPARSE_TENSOR_VALUES = 8, 1
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION, _EXTERNAL, _ENTRY_KEY, _ENTRY_VALUE = 13, 14, 1, 1, 2
_VALUE_NAME, _VALUE_TYPE = 1, 2
_TYPE_TENSOR, _TYPE_SEQUENCE, _TYPE_MAP, _TYPE_OPTIONAL = 1, 4, 5, 9
_TYPE_KINDS = {1: "tensor", 4: "sequence", 5: "map", 8: "sparse tensor", 9: "optional"}  # the TypeProto oneof
_TENSOR_TYPE_ELEM, _TENSOR_TYPE_SHAPE, _SHAPE_DIM, _DIM_VALUE, _DIM_PARAM = 1, 2, 1, 1, 2
_INNER_TYPE, _MAP_KEY, _MAP_VALUE = 1, 1, 2  # Sequence/Optional.elem_type, Map.key_type, Map.value_type


@dataclass
class _ValueInfo:
    """What a ValueInfoProto says about a tensor, decoded with protobuf's rules (last value of a field wins;
    a message field given twice is merged, so repeated dims add up)."""

    name: str = ""
    kind: str | None = None  # which member of TypeProto's oneof is set
    elem_type: int = 0  # a tensor's; for a sequence, map or optional, that of the tensors it holds
    has_shape: bool = False
    dims: list[Dim] = field(default_factory=list)
    text: str = ""  # a sequence's, map's or optional's type, e.g. seq(map(int64,tensor(float32)))
    problem: str = ""  # why such a type cannot be compared (a sparse tensor inside it, unknown element types)


@dataclass
class _Graph:
    inputs: list[_ValueInfo] = field(default_factory=list)
    outputs: list[_ValueInfo] = field(default_factory=list)
    initialized: set[str] = field(default_factory=set)
    external: dict[str, None] = field(default_factory=dict)  # the files initializers keep their data in, in order


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
            _add_initializer(message(value, "GraphProto.initializer"), graph)
        elif number == _GRAPH_SPARSE_INITIALIZER:
            for inner, _, values in fields(message(value, "GraphProto.sparse_initializer")):
                if inner == _SPARSE_TENSOR_VALUES:
                    _add_initializer(message(values, "SparseTensorProto.values"), graph)


def _add_initializer(tensor: memoryview, graph: _Graph) -> None:
    """An initializer's name, and the file its data is in when it is external (its raw data is skipped)."""
    name, location, external = "", None, False
    for number, _, value in fields(tensor):
        if number == _TENSOR_NAME:
            name = text(value, "TensorProto.name")
        elif number == _TENSOR_DATA_LOCATION:
            external = value == _EXTERNAL
        elif number == _TENSOR_EXTERNAL_DATA:
            entry = {key: text(item, "StringStringEntryProto") for key, _, item in fields(message(value, "entry"))
                     if key in (_ENTRY_KEY, _ENTRY_VALUE)}
            if entry.get(_ENTRY_KEY) == "location" and _ENTRY_VALUE in entry:
                location = entry[_ENTRY_VALUE]
    graph.initialized.add(name)
    if external and location:
        graph.external[location] = None


def _decode_value(data: memoryview) -> _ValueInfo:
    info = _ValueInfo()
    for number, _, value in fields(data):
        if number == _VALUE_NAME:
            info.name = text(value, "ValueInfoProto.name")
        elif number == _VALUE_TYPE:
            _decode_type(message(value, "ValueInfoProto.type"), info, top=True)
    return info


def _decode_type(data: memoryview, info: _ValueInfo, top: bool) -> str:
    """Decode a TypeProto into ``info`` (its kind at the top; the element type of the tensors it holds) and
    return its text."""
    text = "?"
    for kind, _, member in fields(data):
        if kind not in _TYPE_KINDS:
            continue
        if top:
            info.kind = _TYPE_KINDS[kind]
        if kind == _TYPE_TENSOR:
            inner = _ValueInfo()
            _decode_tensor_type(message(member, "TypeProto.tensor_type"), inner if not top else info)
            elem = (info if top else inner).elem_type
            if not top:
                info.elem_type = info.elem_type or elem
                if info.elem_type != elem:
                    info.problem = "it holds tensors of different element types"
            text = f"tensor({_element_name(elem)})"
        elif kind in (_TYPE_SEQUENCE, _TYPE_OPTIONAL):
            inner_text = "?"
            for number, _, value in fields(message(member, "TypeProto.sequence_type")):
                if number == _INNER_TYPE:
                    inner_text = _decode_type(message(value, "TypeProto elem_type"), info, top=False)
            text = f"{'seq' if kind == _TYPE_SEQUENCE else 'optional'}({inner_text})"
        elif kind == _TYPE_MAP:
            key, value_text = 0, "?"
            for number, _, value in fields(message(member, "TypeProto.map_type")):
                if number == _MAP_KEY:
                    key = as_int64(integer(value, "TypeProto.Map.key_type"))
                elif number == _MAP_VALUE:
                    value_text = _decode_type(message(value, "TypeProto.Map.value_type"), info, top=False)
            text = f"map({_element_name(key)},{value_text})"
        else:
            info.problem = "it holds sparse tensors"
            text = "sparse_tensor"
    if top and info.kind != "tensor":
        info.text = text
    return text


def _element_name(elem: int) -> str:
    return "string" if elem == ONNX_STRING else ONNX_TO_NUMPY.get(elem, f"type {elem}")


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


def _spec(value: _ValueInfo, path: str, role: str) -> TensorSpec:
    """The TensorSpec of an input or output; raises ModelError for what cmpx cannot feed or read, and
    _Unsupported (with why) for an output it cannot compare, which the user may leave out."""
    if value.kind in ("sequence", "map", "optional"):
        if role == "input":
            raise ModelError(f"input {value.name!r} in {path} is {'an' if value.kind == 'optional' else 'a'} "
                             f"{value.kind} ({value.text}); cmpx feeds tensors "
                             "only (outputs may be sequences, maps and optionals)")
        if value.problem or value.elem_type not in ONNX_TO_NUMPY:
            raise _Unsupported(f"is of type {value.text}, and " + (
                value.problem or f"its values are {_element_name(value.elem_type)}s, which cmpx cannot compare"))
        return TensorSpec(value.name, ONNX_TO_NUMPY[value.elem_type], None, value.text)
    if value.kind == "sparse tensor" and role == "output":
        raise _Unsupported("is a sparse tensor, which cmpx cannot compare")
    if value.kind != "tensor":
        raise ModelError(f"{value.name!r} in {path} is a {value.kind or 'value of no type'}; cmpx compares "
                         "tensors, sequences, maps and optionals")
    elem = value.elem_type
    if elem == ONNX_STRING:
        if role == "output":
            raise _Unsupported("is a string tensor, and cmpx compares numbers")
        raise ModelError(f"{value.name!r} in {path} is a string tensor; cmpx feeds numeric tensors only")
    if elem not in ONNX_TO_NUMPY:
        raise ModelError(f"{value.name!r} in {path} has ONNX element type {elem}, which cmpx does not know")
    return TensorSpec(value.name, ONNX_TO_NUMPY[elem], tuple(value.dims) if value.has_shape else None)


class _Unsupported(Exception):
    """An output cmpx cannot compare (strings, sparse tensors): why, to finish "output X of M ..."."""
