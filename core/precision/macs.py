"""How much of a model's arithmetic the nodes ``cmpx precision`` keeps hold: the multiply-accumulates of its MatMul,
Gemm and Conv nodes (where nearly all of a network's arithmetic is), counted from the static shapes ONNX shape
inference gives, the model's dynamic input dimensions first set to the sizes the run feeds (``fed_index``). A
node whose shapes are still not all known has no count, and then neither has the model's total: the share is
unknown, never guessed.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmpx.lifecycle.preflight import Preflight
    from cmpx.options.request import RunRequest

COUNTED = ("MatMul", "Gemm", "Conv")


def mac_share(index: Any, kept: Sequence[str]) -> tuple[int, int] | None:
    """(multiply-accumulates of the kept nodes, of the model) over its MatMul, Gemm and Conv nodes; None when one
    of them has a shape that is not static. ``index``: cmpx.model.subgraph.GraphIndex of a shape-inferred model."""
    names = set(kept)
    kept_macs = total = 0
    for node in index.nodes:
        if node.op_type not in COUNTED:
            continue
        macs = node_macs(index, node)
        if macs is None:
            return None
        total += macs
        kept_macs += macs if node.name in names else 0
    return kept_macs, total


def node_macs(index: Any, node: Any) -> int | None:
    """One MatMul's, Gemm's or Conv's multiply-accumulates: each output element sums K products, K being the
    reduced dimension (MatMul, Gemm) or a filter's size (Conv: input channels per group times the kernel)."""
    output = _shape(index, node.output[0]) if node.output else None
    first = _shape(index, node.input[0]) if node.input else None
    if output is None or first is None:
        return None
    if node.op_type == "MatMul":
        reduced: int | None = first[-1] if first else None
    elif node.op_type == "Gemm":
        transposed = any(a.name == "transA" and a.i for a in node.attribute)
        reduced = first[0 if transposed else 1] if len(first) == 2 else None
    else:
        weight = _shape(index, node.input[1]) if len(node.input) > 1 else None
        reduced = _product(weight[1:]) if weight else None
    return None if reduced is None else _product(output) * reduced


def fed_index(index: Any, shapes: Mapping[str, Sequence[int]]) -> Any:
    """``index`` (a GraphIndex of the shape-inferred model) with its graph inputs' dynamic dimensions set to
    ``shapes`` (what the run feeds each input) and shapes inferred again; ``index`` itself when none is dynamic."""
    import onnx

    from cmpx.model.subgraph import index_graph

    model = onnx.ModelProto()
    model.CopyFrom(index.model)
    changed = False
    for value in model.graph.input:
        fed = shapes.get(value.name)
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else []
        if fed is None or len(fed) != len(dims):
            continue
        for dim, size in zip(dims, fed):
            if not dim.HasField("dim_value"):
                dim.dim_value = int(size)  # clears dim_param
                changed = True
    if not changed:
        return index
    del model.graph.value_info[:]  # inferred with the dynamic dimensions
    try:
        return index_graph(onnx.shape_inference.infer_shapes(model, strict_mode=False))
    except Exception:  # inference is best effort: the share is then unknown where it was
        return index


def fed_shapes(request: RunRequest, checked: Preflight) -> dict[str, tuple[int, ...]]:
    """The shape each input is fed (synthetic data: --input-shapes, else cmpx's sizes for dynamic dimensions), to
    count multiply-accumulates with; none for data from files or scripts (their shapes are the data's)."""
    from cmpx.model.info import read_model
    from cmpx.model.shapes import resolve_input_shapes

    if not checked.loader.generates:
        return {}
    inputs = resolve_input_shapes(read_model(str(request.model)).inputs, checked.shapes, lambda _: None,
                                  dims=checked.dims)
    return {spec.name: sizes for spec in inputs if (sizes := spec.sizes) is not None}


def _shape(index: Any, name: str) -> list[int] | None:
    """A tensor's static shape (an initializer's dims, else the inferred type's), None where a dimension is not a
    known number."""
    if name in index.initializers:
        return [int(d) for d in getattr(index.initializers[name], "dims", ())]
    value = index.types.get(name)
    if value is None or not value.HasField("tensor_type") or not value.tensor_type.HasField("shape"):
        return None
    dims = value.tensor_type.shape.dim
    return None if any(not d.HasField("dim_value") for d in dims) else [int(d.dim_value) for d in dims]


def _product(values: Sequence[int]) -> int:
    count = 1
    for value in values:
        count *= value
    return count


def mac_words(share: tuple[int, int] | None) -> str:
    """The share in words: ``1024 of 3072 multiply-accumulates of MatMul, Gemm and Conv (33.3%)``."""
    if share is None:
        return "multiply-accumulates unknown (a MatMul, Gemm or Conv has a dynamic shape)"
    kept, total = share
    if not total:
        return "no multiply-accumulates (no MatMul, Gemm or Conv)"
    return f"{kept} of {total} multiply-accumulates of MatMul, Gemm and Conv ({100 * kept / total:.1f}%)"
