"""Cutting subgraphs out of an ONNX model: which nodes a tensor needs, what a set of nodes reads and produces, and
a model made of just those nodes (``--local-error`` runs each node this way; ``cmpx reduce`` runs candidates).

Works on the model's structure (``cmpx.model.graph.load_structure``: external weights not loaded). Writing a
subgraph reads only the weights its nodes use: inline where they are small, else copied, streamed, into a data
file beside it (a backend refuses external data outside the model's own directory, and follows no link there).
Nodes keep their names, attributes (subgraphs of If/Loop/Scan included) and the model's opsets and functions.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

INLINE_LIMIT = 1 << 30  # a subgraph whose external weights exceed this keeps them external (copied beside it)
COPY_CHUNK = 16 << 20


@dataclass
class GraphIndex:
    """The main graph of a model, indexed: nodes in order, who produces and who reads each tensor."""

    model: Any  # the ModelProto (structure only)
    nodes: list[Any]
    reads: list[tuple[str, ...]]  # per node: its inputs, with the outer-scope names its subgraphs use
    producer: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, list[int]] = field(default_factory=dict)
    initializers: dict[str, Any] = field(default_factory=dict)
    graph_inputs: tuple[str, ...] = ()
    graph_outputs: tuple[str, ...] = ()
    types: dict[str, Any] = field(default_factory=dict)  # tensor name -> its TypeProto, where known

    def elem_type(self, name: str) -> int | None:
        value = self.types.get(name)
        if value is None or not value.HasField("tensor_type") or not value.tensor_type.elem_type:
            return None
        return int(value.tensor_type.elem_type)

    def is_structured(self, name: str) -> bool:
        """Whether the tensor is typed as a sequence, map or optional (or a sparse tensor): no plain tensor."""
        value = self.types.get(name)
        return value is not None and value.WhichOneof("value") not in (None, "tensor_type")

    def node_label(self, index: int) -> str:
        node = self.nodes[index]
        return f"{node.name or '(unnamed)'} ({node.op_type})"


def index_graph(model) -> GraphIndex:
    graph = model.graph
    nodes = list(graph.node)
    index = GraphIndex(model, nodes, [tuple(n for n in node.input if n) + _outer_names(node) for node in nodes])
    for position, node in enumerate(nodes):
        for name in node.output:
            if name:
                index.producer[name] = position
        for name in dict.fromkeys(index.reads[position]):
            index.consumers.setdefault(name, []).append(position)
    index.initializers = {tensor.name: tensor for tensor in graph.initializer}
    index.initializers.update({sparse.values.name: sparse for sparse in graph.sparse_initializer})
    index.graph_inputs = tuple(i.name for i in graph.input if i.name not in index.initializers)
    index.graph_outputs = tuple(o.name for o in graph.output)
    for value in [*graph.value_info, *graph.output, *graph.input]:
        if value.HasField("type"):
            index.types[value.name] = value.type
    return index


def _outer_names(node) -> tuple[str, ...]:
    """Names a node's subgraphs (If branches, Loop and Scan bodies) read from the enclosing scope."""
    from onnx import AttributeProto

    found: dict[str, None] = {}
    for attribute in node.attribute:
        bodies = [attribute.g] if attribute.type == AttributeProto.GRAPH else \
            list(attribute.graphs) if attribute.type == AttributeProto.GRAPHS else []
        for body in bodies:
            defined = {i.name for i in body.input} | {t.name for t in body.initializer}
            for inner in body.node:
                for name in [*inner.input, *_outer_names(inner)]:
                    if name and name not in defined:
                        found[name] = None
                defined.update(inner.output)
    return tuple(found)


def closure(index: GraphIndex, targets: Iterable[int], available: Container[str]) -> list[int]:
    """The nodes that compute the ``targets``' outputs from ``available`` tensors and the weights: the targets,
    and walking back, the producer of every tensor read that is not available (Constant nodes among them). In
    graph order. A tensor that is neither available nor produced by a node (a graph input left out) stays an
    input of the subgraph."""
    wanted: set[int] = set()
    stack = list(targets)
    while stack:
        position = stack.pop()
        if position in wanted:
            continue
        wanted.add(position)
        for name in index.reads[position]:
            if name in available or name in index.initializers:
                continue
            producer = index.producer.get(name)
            if producer is not None and producer not in wanted:
                stack.append(producer)
    return sorted(wanted)


def boundary(index: GraphIndex, nodes: Collection[int]) -> tuple[list[str], list[str]]:
    """(inputs, outputs) of the subgraph of ``nodes``: the tensors its nodes read that none of them produces
    (weights excepted), in order of first use; the tensors they produce that a node outside reads or that are
    model outputs, in graph order."""
    members = set(nodes)
    produced = {name for position in members for name in index.nodes[position].output if name}
    inputs: dict[str, None] = {}
    for position in sorted(members):
        for name in index.reads[position]:
            if name not in produced and name not in index.initializers:
                inputs[name] = None
    model_outputs = set(index.graph_outputs)
    outputs = [name for position in sorted(members) for name in index.nodes[position].output if name and (
        name in model_outputs or any(c not in members for c in index.consumers.get(name, ())))]
    return list(inputs), outputs


def write_subgraph(index: GraphIndex, model_path: str, nodes: Sequence[int], inputs: Mapping[str, Any],
                   outputs: Sequence[str], path: str, output_types: Mapping[str, Any] | None = None,
                   inline_limit: int = INLINE_LIMIT) -> None:
    """Write the model made of ``nodes`` (positions in ``index``) to ``path``. ``inputs``: name -> (numpy dtype,
    shape) of each graph input, as it will be fed; ``outputs``: the values to return, typed as the model and its
    shape inference type them (sequences, maps and optionals as they are), else as tensors of ``output_types``
    (name -> numpy dtype). Weights come from ``model_path``'s directory: see the module docstring."""
    import onnx
    from onnx import helper

    model = index.model
    chosen = [index.nodes[position] for position in sorted(nodes)]
    reads = {name for position in nodes for name in index.reads[position]}
    weights = [index.initializers[name] for name in index.initializers if name in reads]
    graph = helper.make_graph(
        chosen, f"{model.graph.name or 'model'} (subgraph)",
        [helper.make_tensor_value_info(name, _elem_type(dtype), list(shape)) for name, (dtype, shape) in
         inputs.items()],
        [_output_info(index, name, (output_types or {}).get(name)) for name in outputs])
    produced = {name for node in chosen for name in node.output}
    graph.value_info.extend(value for value in model.graph.value_info if value.name in produced
                            and value.name not in outputs)
    dense = [w for w in weights if isinstance(w, onnx.TensorProto)]
    graph.sparse_initializer.extend(w for w in weights if not isinstance(w, onnx.TensorProto))
    subgraph = helper.make_model(graph, opset_imports=list(model.opset_import), producer_name="cmpx")
    subgraph.ir_version = model.ir_version
    subgraph.functions.extend(model.functions)
    _add_weights(subgraph, dense, os.path.dirname(os.path.abspath(model_path)), path, inline_limit)
    onnx.save(subgraph, path)


def _elem_type(dtype: Any) -> int:
    from onnx import helper

    from cmpx.dtypes import ONNX_TO_NUMPY

    name = getattr(dtype, "name", str(dtype))
    for elem, numpy_name in ONNX_TO_NUMPY.items():
        if numpy_name == name:
            return elem
    return int(helper.np_dtype_to_tensor_dtype(dtype))


def _output_info(index: GraphIndex, name: str, fallback: Any):
    """The output typed as the model (or shape inference) types it, its shape too: a tensor of a known element
    type, or a sequence, map or optional as it is (a ZipMap's seq(map(int64,tensor(float)))); else a tensor of
    ``fallback`` (a numpy dtype)."""
    from onnx import ValueInfoProto, helper

    if index.elem_type(name) is not None or index.is_structured(name):
        value = ValueInfoProto(name=name)
        value.type.CopyFrom(index.types[name])
        return value
    return helper.make_tensor_value_info(name, _elem_type(fallback) if fallback is not None else 0, None)


def _add_weights(model, weights: list[Any], base: str, path: str, inline_limit: int) -> None:
    """Put ``weights`` into ``model``: inline ones as they are; external ones read from ``base`` (only these
    bytes), inline if they total at most ``inline_limit``, else copied into ``path``.data."""
    import onnx
    from onnx.external_data_helper import load_external_data_for_tensor

    external = [w for w in weights if w.data_location == onnx.TensorProto.EXTERNAL]
    size = sum(int(_entry(w).get("length") or 0) or _file_size(base, w) for w in external)
    data_path = path + ".data"
    if size > inline_limit and os.path.exists(data_path):
        os.unlink(data_path)
    for weight in weights:
        copy = onnx.TensorProto()
        copy.CopyFrom(weight)
        if weight.data_location == onnx.TensorProto.EXTERNAL:
            if size <= inline_limit:
                load_external_data_for_tensor(copy, base)
                copy.data_location = onnx.TensorProto.DEFAULT
                del copy.external_data[:]
            else:
                _copy_external(copy, base, data_path)
        model.graph.initializer.append(copy)


def _entry(tensor) -> dict[str, str]:
    return {item.key: item.value for item in tensor.external_data}


def _file_size(base: str, tensor) -> int:
    from cmpx.userfiles import inside

    return os.path.getsize(inside(base, _entry(tensor)["location"], f"initializer {tensor.name!r}"))


def _copy_external(tensor, base: str, data_path: str) -> None:
    """Append ``tensor``'s bytes (read from its file under ``base``) to ``data_path``, and point it there."""
    from cmpx.userfiles import inside

    entry = _entry(tensor)
    source = inside(base, entry["location"], f"initializer {tensor.name!r}")
    offset, length = int(entry.get("offset") or 0), entry.get("length")
    with open(source, "rb") as reader, open(data_path, "ab") as writer:
        start = writer.seek(0, os.SEEK_END)
        reader.seek(offset)
        left = int(length) if length is not None else os.path.getsize(source) - offset
        written = 0
        while left > 0:
            chunk = reader.read(min(COPY_CHUNK, left))
            if not chunk:
                break
            writer.write(chunk)
            left -= len(chunk)
            written += len(chunk)
    del tensor.external_data[:]
    for key, value in (("location", os.path.basename(data_path)), ("offset", str(start)), ("length", str(written))):
        item = tensor.external_data.add()
        item.key, item.value = key, value
