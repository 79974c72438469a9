"""The tensors of an ONNX graph that can be exposed as outputs ("marked"), and how they depend on each other.

Only the model's structure is read: external weights stay on disk, so this works for models over 2 GB.
Imports onnx; used by the coordinator once it has a model, and by ONNX-based backends in their workers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cmpx.dtypes import ONNX_TO_NUMPY
from cmpx.model.info import Dim

if TYPE_CHECKING:
    from onnx import ModelProto


@dataclass(frozen=True)
class TensorInfo:
    """A tensor computed by a node of the main graph."""

    name: str
    node: str  # the producing node's name ("" if it has none)
    op_type: str
    inputs: tuple[str, ...]  # the producing node's inputs
    dtype: str | None  # numpy dtype name; None if shape inference could not tell
    shape: tuple[Dim, ...] | None


@dataclass(frozen=True)
class TensorGraph:
    """Every node output of the main graph, in topological order, plus the graph inputs and outputs."""

    tensors: tuple[TensorInfo, ...]
    graph_inputs: tuple[str, ...]
    graph_outputs: tuple[str, ...]

    def by_name(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}

    def markable(self) -> list[str]:
        """Tensors that can be exposed: typed, not produced by Constant nodes (nothing to compare there)."""
        return [t.name for t in self.tensors if t.dtype is not None and t.op_type != "Constant"]

    def unmarkable(self) -> dict[str, str]:
        """The other tensors, each with why it cannot be marked."""
        return {t.name: (f"it is the output of a Constant node ({t.node or 'unnamed'})" if t.op_type == "Constant"
                         else f"shape inference gives no tensor type for it ({t.op_type} {t.node or 'unnamed'}: "
                         "not a tensor, or an op that onnx cannot infer)")
                for t in self.tensors if t.dtype is None or t.op_type == "Constant"}


def load_structure(model_path: str) -> ModelProto:
    """The ModelProto without external weights, with inferred shapes and types where possible."""
    try:
        import onnx
    except ModuleNotFoundError as exc:  # a worker under another Python (--backend NAME@PYTHON) may lack it
        import sys

        raise ModuleNotFoundError(f"marking tensors (--mark-all, --onnx-outputs) needs the onnx package, and "
                                  f"{sys.executable} (in {sys.prefix}) has none; install it there",
                                  name=exc.name) from None

    model = onnx.load(model_path, load_external_data=False)
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # inference is best effort: an untyped tensor is reported as such, not fatal
        return model


def tensor_graph(model: ModelProto) -> TensorGraph:
    """The TensorGraph of a ModelProto (ideally one from ``load_structure``)."""
    graph = model.graph
    types = {}
    for value in list(graph.value_info) + list(graph.output) + list(graph.input):
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type in ONNX_TO_NUMPY:
            tensor_type = value.type.tensor_type
            shape = tuple(dim_value(d) for d in tensor_type.shape.dim) if tensor_type.HasField("shape") else None
            types[value.name] = (ONNX_TO_NUMPY[tensor_type.elem_type], shape)
    tensors = []
    for node in graph.node:
        for output in node.output:
            if output:
                dtype, shape = types.get(output, (None, None))
                tensors.append(TensorInfo(output, node.name, node.op_type, tuple(i for i in node.input if i),
                                          dtype, shape))
    initialized = {i.name for i in graph.initializer}
    return TensorGraph(tuple(tensors), tuple(i.name for i in graph.input if i.name not in initialized),
                       tuple(o.name for o in graph.output))


def expose(model: ModelProto, names: Iterable[str]) -> ModelProto:
    """Add ``names`` as graph outputs where a node of ``model`` computes them with a known type (a transformed
    graph may lack some: a quantizer fuses Conv and Relu, yet keeps the old tensors' types in value_info); returns
    the same ModelProto. Tensors left out are simply absent from the backend's results."""
    from onnx import helper

    graph = model.graph
    existing = {o.name for o in graph.output}
    typed = {value.name: value for value in graph.value_info}
    computed = produced(model)
    for name in names:
        value = typed.get(name)
        if name in existing or value is None or name not in computed:
            continue
        graph.output.append(helper.make_value_info(name, value.type))
        existing.add(name)
    return model


def produced(model: ModelProto) -> set[str]:
    """The names of the tensors the main graph's nodes compute."""
    return {name for node in model.graph.node for name in node.output if name}


def check_external_data(model_path: str) -> None:
    """Raise ModelError if an initializer of the model keeps its data outside the model's directory (ONNX Runtime
    refuses such models; a transform reading the weights must refuse them too, not follow the path)."""
    import onnx

    from cmpx.errors import ModelError, UsageError
    from cmpx.userfiles import inside

    model = onnx.load(model_path, load_external_data=False)
    tensors = list(model.graph.initializer) + [sparse.values for sparse in model.graph.sparse_initializer]
    for tensor in tensors:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = next((entry.value for entry in tensor.external_data if entry.key == "location"), None)
            try:
                inside(model_directory(model_path), location, f"{model_path}: initializer {tensor.name!r}")
            except UsageError as exc:
                raise ModelError(str(exc)) from None


def model_directory(model_path: str) -> str:
    """Where the model's external data files are looked up."""
    return os.path.dirname(os.path.abspath(model_path))


def exposed_model(model_path: str, names: Sequence[str]) -> ModelProto:
    """The model at ``model_path`` with ``names`` exposed as outputs (external weights not loaded)."""
    return expose(load_structure(model_path), names)


def dim_value(dim) -> Dim:
    """A TensorShapeProto.Dimension's size (None if negative or unset), or its name."""
    if dim.HasField("dim_value"):
        return int(dim.dim_value) if dim.dim_value >= 0 else None
    if dim.HasField("dim_param"):
        return dim.dim_param
    return None
