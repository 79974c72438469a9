"""fp64: the model's float graph computed in float64, as an oracle to measure other backends' rounding against.

Every float tensor (float32, float16, bfloat16) of the graph becomes float64: initializers, constants, the ``to``
of casts and the ``dtype`` of ops that make tensors, value types, subgraphs included; integer and bool paths are
left as they are. What must stay float stays float32, with exact casts around it:

- the model's float inputs keep their names and types (the run feeds the same float32 values to every backend):
  each is widened once by a Cast (exact) that every node reads instead;
- quantized Q/DQ pairs are kept as they are (QuantizeLinear, DequantizeLinear, QLinear* and the integer ops
  read and make float32): what they read is cast to float32, and a DequantizeLinear's output keeps its name for
  its value widened, so per-layer comparison lines up the same tensors; likewise ops of other domains (ONNX
  Runtime's contrib ops have no double kernels), Resize's and Upsample's scales and Dropout's ratio;
- the model's float outputs are float64 under their own names: compared against float32 outputs in float64.

The model is raised to opset ``ORACLE_OPSET`` first where ONNX's version converter can (otherwise it keeps its
own): the reference evaluator computes some ops of old opsets wrongly (BatchNormalization and Softmax at opset 9,
onnx 1.23), and the oracle should be the backend least likely to be wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cmpx.transforms.options import TransformOptions
from cmpx.transforms.saving import read_external, save_model
from cmpx.transforms.streamed import detach

FLOAT, FLOAT16, DOUBLE, BFLOAT16 = 1, 10, 11, 16
WIDENED = (FLOAT, FLOAT16, BFLOAT16)
ORACLE_OPSET = 19
KEPT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"}
KEPT_INPUTS = {"Resize": (2,), "Upsample": (1,), "Dropout": (1,)}  # float32 whatever the data's type
WIDENED_SUFFIX, KEPT_SUFFIX = "__fp64", "__fp32"


class DoublePrecision:
    def __init__(self, options: TransformOptions, kind: str = "fp64"):
        self.options = options
        self.kind = kind

    def apply(self, model_path: str, output_path: str, calibration: Callable[[int], Iterator[Any]]) -> None:
        from cmpx.model.graph import load_structure

        # raised with its weights unread; then external float32 weights are widened as they are written
        # (cmpx.transforms.streamed: placeholders meanwhile), other float weights read in
        model = raised(load_structure(model_path), ORACLE_OPSET)
        detached = detach(model, model_path, double_chunk)
        read_external(model, model_path, loads=lambda tensor: tensor.data_type in WIDENED)
        widen_model(model)
        save_model(model, output_path, model_path, detached)


def double_chunk(chunk: Any, to: int, scratch: Any) -> Any:
    """A float32 chunk in float64 (exact), or as it is where it stays float32 (read only by kept nodes)."""
    import numpy as np

    if to == FLOAT:
        return chunk
    if to != DOUBLE:
        raise ValueError(f"a float32 weight cannot become ONNX type {to} in the fp64 transform")
    wide = scratch[: 8 * chunk.size].view(np.float64)
    np.copyto(wide, chunk)
    return wide


def raised(model: Any, opset: int) -> Any:
    """``model`` at ``opset`` of the default domain, where the version converter can take it there (and it is
    older); otherwise the model unchanged."""
    from onnx import version_converter

    own = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), None)
    if own is None or own >= opset:
        return model
    from onnx import shape_inference

    try:
        converted = version_converter.convert_version(model, opset)
        return shape_inference.infer_shapes(converted)  # types of what the converter added, for widen_model
    except Exception:  # the converter raises several types; the model runs at its own opset then
        return model


def widen_model(model: Any) -> None:
    """Rewrite ``model`` in place: its float graph in float64, its float inputs kept (cast on entry)."""
    graph = model.graph
    initializers = {tensor.name for tensor in graph.initializer}
    entries = [value.name for value in graph.input
               if value.name not in initializers and _elem_type(value) in WIDENED]
    renames = {name: name + WIDENED_SUFFIX for name in entries}
    casts = [_cast(name, renames[name], DOUBLE) for name in entries]
    _widen_graph(graph, renames, outer_scope=True)
    nodes = list(graph.node)
    del graph.node[:]
    graph.node.extend(casts + nodes)
    for value in graph.input:
        if value.name in renames:
            continue  # the fed input keeps its type
        _retype(value)


def _widen_graph(graph: Any, renames: dict[str, str], outer_scope: bool = False,
                 outer_floats: frozenset[str] = frozenset()) -> None:
    """Widen one graph (and its subgraphs): ``renames`` maps a name read from the scope to the name of its
    float64 value (the widened inputs); ``outer_floats``: the float tensors of the scopes around it."""
    from onnx import numpy_helper

    kept_reads = _kept_reads(graph)
    for index, tensor in enumerate(graph.initializer):
        if tensor.data_type in WIDENED and not kept_reads.get(tensor.name) == "only":
            graph.initializer[index].CopyFrom(_widened_tensor(tensor, numpy_helper))
    widened_initializers = {t.name for t in graph.initializer if t.data_type == DOUBLE}
    float_names = _float_names(graph) | set(renames) | outer_floats
    nodes: list[Any] = []
    for node in graph.node:
        kept = _kept_node(node)
        positions = range(len(node.input)) if kept else KEPT_INPUTS.get(node.op_type, ())
        for position, name in enumerate(node.input):
            if position in positions and name:
                if name in renames:  # a fed float32 input: read as it is
                    continue
                if name in widened_initializers or name in float_names:
                    narrow = f"{name}{KEPT_SUFFIX}_{len(nodes)}"
                    nodes.append(_cast(name, narrow, FLOAT))
                    node.input[position] = narrow
            elif name in renames:
                node.input[position] = renames[name]
        for attribute in node.attribute:
            _widen_attribute(node, attribute, renames, frozenset(float_names), numpy_helper)
        nodes.append(node)
        if kept:
            for position, name in enumerate(node.output):
                if name and name in float_names:
                    node.output[position] = name + KEPT_SUFFIX
                    nodes.append(_cast(node.output[position], name, DOUBLE))
    del graph.node[:]
    graph.node.extend(nodes)
    for value in [*graph.value_info, *graph.output, *([] if outer_scope else graph.input)]:
        if not (outer_scope and value.name in renames):
            _retype(value)


def _kept_reads(graph: Any) -> dict[str, str]:
    """For each tensor a kept position reads: "only" when nothing else reads it, else "also"."""
    kept: set[str] = set()
    other: set[str] = set()
    for node in graph.node:
        positions = range(len(node.input)) if _kept_node(node) else KEPT_INPUTS.get(node.op_type, ())
        for position, name in enumerate(node.input):
            (kept if position in positions else other).add(name)
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                other.update(name for sub in subgraph.node for name in sub.input)
    return {name: "also" if name in other else "only" for name in kept}


def _kept_node(node: Any) -> bool:
    return node.domain not in ("", "ai.onnx") or node.op_type in KEPT_OPS or node.op_type.startswith("QLinear")


def _float_names(graph: Any) -> set[str]:
    """Names of the graph's float tensors, as far as its types say (value infos, outputs, initializers)."""
    names = {v.name for v in [*graph.value_info, *graph.output, *graph.input] if _elem_type(v) in WIDENED}
    return names | {t.name for t in graph.initializer if t.data_type in WIDENED}


def _widen_attribute(node: Any, attribute: Any, renames: dict[str, str], floats: frozenset[str],
                     numpy_helper: Any) -> None:
    from onnx import helper

    if attribute.name == "to" and node.op_type == "Cast" and attribute.i in WIDENED:
        attribute.i = DOUBLE
    elif attribute.name == "dtype" and attribute.i in WIDENED:
        attribute.i = DOUBLE
    elif attribute.HasField("t") and attribute.t.data_type in WIDENED and not _kept_node(node):
        attribute.t.CopyFrom(_widened_tensor(attribute.t, numpy_helper))
    elif node.op_type == "Constant" and attribute.name in ("value_float", "value_floats"):
        import numpy as np

        values = attribute.f if attribute.name == "value_float" else list(attribute.floats)
        tensor = numpy_helper.from_array(np.asarray(values, np.float64))
        attribute.CopyFrom(helper.make_attribute("value", tensor))
    if attribute.HasField("g"):
        _widen_graph(attribute.g, renames, outer_floats=floats)
    for subgraph in attribute.graphs:
        _widen_graph(subgraph, renames, outer_floats=floats)


def _widened_tensor(tensor: Any, numpy_helper: Any) -> Any:
    import numpy as np

    widened = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name)
    return widened


def _retype(value: Any) -> None:
    tensor_type = value.type.tensor_type if value.type.HasField("tensor_type") else None
    if tensor_type is not None and tensor_type.elem_type in WIDENED:
        tensor_type.elem_type = DOUBLE


def _elem_type(value: Any) -> int | None:
    return value.type.tensor_type.elem_type if value.type.HasField("tensor_type") else None


def _cast(source: str, target: str, to: int) -> Any:
    from onnx import helper

    return helper.make_node("Cast", [source], [target], to=to, name=f"cmpx_fp64_{target}")
