"""Ranges for synthetic integer inputs, read from how the graph uses each input, so that default data is valid data.

An integer input is followed through the ops that pass its values on unchanged (Cast to a number, Reshape,
Unsqueeze, Squeeze, Expand, Flatten, Identity, Slice, Transpose, Concat, Tile...) to the ops that use them:

- an index into a table of known size (Gather, GatherElements, GatherND, Scatter*, OneHot's depth): the values
  must lie in [0, size - 1], and the smallest table wins (``token_type_ids`` index a 2-row embedding);
- a mask: compared to zero, cast to bool, or ``1 - mask`` (``attention_mask``): {0, 1}, when every use is one;
- a product with another tensor of the model's (``hidden * mask``) neither bounds nor makes a mask: it is a mask
  only if another use says so; a product with a constant is a scale (``position_ids * inv_freq`` before a Cos), so
  no bound;
- anything else (arithmetic, a shape, a graph output): no bound, so cmpx's default range.

Uses that read only the input's shape (Shape, Size) say nothing about its values and are skipped. Imports onnx;
used by the coordinator before data is made, only for models with integer inputs that need a range.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cmpx.options.argtypes import ValueRange
from cmpx.model.info import TensorSpec

PASS_THROUGH = {  # op type -> the inputs whose values reach the output unchanged (None: every input)
    "Identity": (0,), "Reshape": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Expand": (0,), "Flatten": (0,),
    "Slice": (0,), "Transpose": (0,), "Tile": (0,), "Split": (0,), "Concat": None, "Gather": (0,),
    "GatherElements": (0,), "GatherND": (0,), "Compress": (0,), "Where": (1, 2), "CastLike": (0,),
    "DepthToSpace": (0,), "SpaceToDepth": (0,), "ReduceMax": (0,), "ReduceMin": (0,), "Max": None, "Min": None,
}
SHAPE_ONLY = {"Shape", "Size"}
COMPARISONS = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}
INDEXING = {  # op type -> (the index input, the data input, how the data's dimension is chosen)
    "Gather": (1, 0, "axis"), "GatherElements": (1, 0, "axis"), "ScatterElements": (1, 0, "axis"),
    "Scatter": (1, 0, "axis"), "GatherND": (1, 0, "leading"), "ScatterND": (1, 0, "leading"),
}
BOOL = 9  # ONNX element type


@dataclass(frozen=True)
class InputRange:
    """The range of one integer input's synthetic values, and why it was chosen."""

    input: str
    low: int
    high: int
    reason: str

    def __str__(self) -> str:
        return f"{self.input}: [{self.low}, {self.high}] ({self.reason})"

    def to_dict(self) -> dict[str, object]:
        return {"input": self.input, "low": self.low, "high": self.high, "reason": self.reason}


@dataclass(frozen=True)
class _Use:
    kind: str  # "index", "mask", "other", or "neutral" (says nothing either way)
    reason: str
    size: int = 0  # an index's table size


def data_ranges(model_path: str, inputs: Sequence[TensorSpec], default_range: ValueRange | None,
                given: Mapping[str, ValueRange], default: ValueRange) -> list[InputRange]:
    """The range of every integer input of the model at ``model_path``: the one given with --val-range (per input,
    or the default ``default_range`` for all), else the one its uses in the graph call for, else ``default``."""
    from cmpx.dtypes import numpy_dtype
    from cmpx.loaders.synthetic import int_limits

    integers = [spec for spec in inputs if spec.dtype.startswith(("int", "uint"))]  # int64... and int4, uint2
    chosen = {}
    for spec in integers:
        value_range = given.get(spec.name, default_range)
        if value_range is not None:
            word = f"{spec.name}:" if spec.name in given else ""
            chosen[spec.name] = InputRange(spec.name, int(value_range.low), int(value_range.high),
                                           f"given: --val-range {word}[{value_range.low:g},{value_range.high:g}]")
    derive = [spec for spec in integers if spec.name not in chosen]
    if derive:
        from cmpx.model.graph import load_structure

        limits = {spec.name: int_limits(numpy_dtype(spec.dtype)) for spec in derive}
        try:
            model = load_structure(model_path)
        except Exception as exc:  # noqa: BLE001 - onnx refuses what the wire reader took: the data can still be made
            model, why = None, f"the default: onnx cannot read the graph ({type(exc).__name__})"
        if model is not None:
            found = integer_ranges(model, derive, default, limits)
        else:
            found = [InputRange(spec.name, max(int(default.low), limits[spec.name][0]),
                                min(int(default.high), limits[spec.name][1]), why) for spec in derive]
        chosen.update((r.input, r) for r in found)
    return [chosen[spec.name] for spec in integers]


def integer_ranges(model, inputs: Sequence[TensorSpec], default: ValueRange,
                   limits: Mapping[str, tuple[int, int]]) -> list[InputRange]:
    """The range of each of ``inputs`` (integer inputs) from its uses in ``model`` (a ModelProto, ideally with
    inferred shapes), within ``limits`` (each input's dtype bounds); ``default`` where no use bounds it."""
    graph = model.graph
    consumers: dict[str, list[tuple[object, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name:
                consumers.setdefault(name, []).append((node, index))
    in_subgraphs = set(_subgraph_inputs(graph.node))
    sizes = _static_shapes(graph)
    constants = _constant_values(graph)
    fixed = _constant_names(graph)
    found = []
    for spec in inputs:
        low_limit, high_limit = limits[spec.name]
        uses = _uses(spec.name, consumers, in_subgraphs, sizes, constants, {o.name for o in graph.output}, fixed)
        found.append(_choose(spec.name, uses, default, low_limit, high_limit))
    return found


def _choose(name: str, uses: list[_Use], default: ValueRange, low_limit: int, high_limit: int) -> InputRange:
    def clamp(low: int, high: int, reason: str) -> InputRange:
        low, high = max(low, low_limit), min(high, high_limit)
        return InputRange(name, low, max(low, high), reason)

    indices = [use for use in uses if use.kind == "index"]
    masks = [use for use in uses if use.kind == "mask"]
    others = [use for use in uses if use.kind == "other"]
    neutral = [use for use in uses if use.kind == "neutral"]
    if indices:
        smallest = min(indices, key=lambda use: use.size)
        if smallest.size < 1:
            return clamp(int(default.low), int(default.high), f"the default: it indexes an empty table "
                                                               f"({smallest.reason})")
        high = smallest.size - 1
        if masks and not others:
            return clamp(0, min(high, 1), f"{smallest.reason}, and {masks[0].reason}")
        return clamp(0, high, smallest.reason)
    if masks and not others:
        reasons = list(dict.fromkeys(use.reason for use in masks))
        return clamp(0, 1, " and ".join(reasons))
    first = next(iter(others or neutral), None)
    why = "the default: no use in the graph bounds it" if first is None else \
        f"the default: {first.reason}, which does not bound it"
    return clamp(int(default.low), int(default.high), why)


def _uses(name: str, consumers, in_subgraphs: set[str], sizes: Mapping[str, tuple[int, ...]],
          constants: Mapping[str, list[float]], outputs: set[str], fixed: set[str]) -> list[_Use]:
    """Where the values of ``name`` end up, following pass-through ops (each value name once)."""
    uses: list[_Use] = []
    pending, seen = [name], {name}
    while pending:
        value = pending.pop()
        if value in outputs:
            uses.append(_Use("other", "a model output"))
        if value in in_subgraphs:
            uses.append(_Use("other", "a use inside a subgraph"))
        for node, index in consumers.get(value, ()):
            use = _classify(node, index, sizes, constants, fixed)
            if use is not None:
                uses.append(use)
                continue
            if node.op_type in SHAPE_ONLY:
                continue
            for output in node.output:  # a pass-through op: follow its outputs
                if output and output not in seen:
                    seen.add(output)
                    pending.append(output)
    return uses


def _classify(node, index: int, sizes: Mapping[str, tuple[int, ...]], constants: Mapping[str, list[float]],
              fixed: set[str]) -> _Use | None:
    """What ``node`` does with its input ``index``: a use, or None when it passes the values on (or reads only
    their shape). ``fixed``: the values computed from constants alone."""
    op = node.op_type
    if op in INDEXING and INDEXING[op][0] == index:
        return _index_use(node, sizes)
    if op == "OneHot" and index == 0:
        depth = constants.get(node.input[1]) if len(node.input) > 1 else None
        if depth is not None and len(depth) == 1:
            return _Use("index", f"OneHot index of depth {int(depth[0])}", int(depth[0]))
        return _Use("other", "a OneHot of unknown depth")
    if op == "Cast":
        to = _attribute(node, "to", 0)
        return _Use("mask", "cast to bool") if to == BOOL else None  # to a number: the values go on
    if op in COMPARISONS:
        other = node.input[1 - index] if len(node.input) == 2 else ""
        value = constants.get(other)
        if value is not None and len(value) == 1 and float(value[0]) == 0:
            return _Use("mask", "compared to zero")
        return _Use("other", f"compared by {op} to something other than zero")
    if op == "Mul":
        other = node.input[1 - index] if len(node.input) == 2 else ""
        if other in fixed:
            return _Use("other", "multiplied by a constant (a scale, not a mask)")
        return _Use("neutral", "multiplied by another tensor")
    if op == "Sub" and index == 1:
        value = constants.get(node.input[0])
        if value is not None and len(value) == 1 and float(value[0]) == 1:
            return _Use("mask", "a 0/1 multiplier (1 - mask)")
    if op in SHAPE_ONLY:
        return None
    passes = PASS_THROUGH.get(op, ())
    if passes is None or index in passes:
        return None
    return _Use("other", f"an input of {op}")


def _index_use(node, sizes: Mapping[str, tuple[int, ...]]) -> _Use:
    op = node.op_type
    _, data_input, how = INDEXING[op]
    shape = sizes.get(node.input[data_input])
    if shape is None:
        return _Use("other", f"an index of {op} into a table of unknown size")
    if how == "axis":
        axis = _attribute(node, "axis", 0)
        axis = axis + len(shape) if axis < 0 else axis
        if not 0 <= axis < len(shape):
            return _Use("other", f"an index of {op} with an axis outside its table")
        size = shape[axis]
        where = f"a {size}-row table" if axis == 0 else f"a table of {size} along axis {axis}"
        return _Use("index", f"{op} index into {where}", size)
    batch = _attribute(node, "batch_dims", 0)
    leading = shape[batch:]
    if not leading:
        return _Use("other", f"an index of {op} into a scalar")
    size = min(leading)
    return _Use("index", f"{op} index into a table of shape {list(shape)}", size)


def _attribute(node, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _static_shapes(graph) -> dict[str, tuple[int, ...]]:
    """Every value whose shape is fully known: initializers (their data is never read), Constant nodes, and
    values with an inferred static shape."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in list(graph.value_info) + list(graph.input) + list(graph.output):
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            dims = value.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                shapes[value.name] = tuple(int(d.dim_value) for d in dims)
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    shapes[node.output[0]] = tuple(int(d) for d in attribute.t.dims)
    for initializer in graph.initializer:
        shapes[initializer.name] = tuple(int(d) for d in initializer.dims)
    return shapes


def _constant_values(graph, largest: int = 16) -> dict[str, list[float]]:
    """The values of small constants (initializers and Constant nodes of up to ``largest`` elements) stored in
    the model itself (external data is never read)."""
    from onnx import numpy_helper

    values: dict[str, list[float]] = {}
    tensors = [(t.name, t) for t in graph.initializer]
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    tensors.append((node.output[0], attribute.t))
                elif attribute.name in ("value_int", "value_float"):
                    values[node.output[0]] = [attribute.i if attribute.name == "value_int" else attribute.f]
    for name, tensor in tensors:
        count = 1
        for dim in tensor.dims:
            count *= int(dim)
        if count > largest or tensor.data_location == tensor.EXTERNAL:
            continue
        try:
            values[name] = [float(v) for v in numpy_helper.to_array(tensor).reshape(-1)]
        except (ValueError, TypeError):  # a string or otherwise unreadable constant says nothing here
            continue
    return values


def _constant_names(graph) -> set[str]:
    """The values computed from initializers and Constant nodes alone (``inv_freq`` expanded and reshaped)."""
    fixed = {t.name for t in graph.initializer} | {""}
    inputs = {value.name for value in graph.input}
    fixed -= inputs  # an initializer that is also an input can be fed
    for node in graph.node:  # the graph is topologically sorted, as ONNX requires
        reads_outer = any(attribute.HasField("g") or attribute.graphs for attribute in node.attribute)
        if not reads_outer and all(name in fixed for name in node.input):
            fixed.update(name for name in node.output if name)
    return fixed - {""}


def _subgraph_inputs(nodes: Iterable) -> Iterable[str]:
    """Names read inside the subgraphs of ``nodes`` (If, Loop, Scan bodies), recursively."""
    for node in nodes:
        for attribute in node.attribute:
            graphs = list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else [])
            for graph in graphs:
                for inner in graph.node:
                    yield from (name for name in inner.input if name)
                yield from _subgraph_inputs(graph.node)
