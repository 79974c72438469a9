"""The nodes ``cmpx precision`` may keep, the file it writes them to, and how much of the model they hold.

A node may be kept when it has a name (``--keep-fp32`` and the quantizer's nodes to exclude name nodes), computes
on floating-point values (an input or output of a float type: a Shape or an integer Gather changes nothing), and
the transform would otherwise change it: for fp16/bf16 every such node outside the converter's own float32 list
and what --keep-fp32 keeps already; for int8/fp8 the op types ONNX Runtime's quantizer quantizes, less what
--no-quantize leaves out already.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

FLOATS = {1, 10, 11, 16}  # float, float16, double, bfloat16
HALF = ("fp16", "bf16")  # the transforms --keep-fp32 applies to; int8 and fp8 take --no-quantize


def kept_option(kind: str) -> str:
    """The run option a node list of this transform is given to: keep_fp32 or no_quantize."""
    return "keep_fp32" if kind in HALF else "no_quantize"


@dataclass(frozen=True)
class Eligible:
    names: list[str]  # in graph order
    unnamed: int  # float nodes the transform changes that have no name, so cannot be kept


def eligible_nodes(index: Any, kind: str, given: Sequence[str]) -> Eligible:
    """The nodes of ``index`` (cmpx.model.subgraph.GraphIndex) that ``kind`` changes and a list could keep, less
    ``given`` (node names or op types the user keeps already)."""
    names = {node.name for node in index.nodes if node.name}
    given_ops = set(given) - names  # a word naming a node is that node, not its op type (as the transforms take it)
    if kind in HALF:
        from cmpx.transforms.half import blocked_ops

        left = set(blocked_ops()) | given_ops
        changed = [node for node in index.nodes if node.op_type not in left and node.name not in given]
    else:
        from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

        quantized = set(QDQRegistry) | set(QLinearOpsRegistry)  # what quantize_static quantizes by default
        changed = [node for node in index.nodes if node.op_type in quantized and node.op_type not in given_ops
                   and node.name not in given]
    floating = [node for node in changed if any(index.elem_type(name) in FLOATS for name in [*node.input,
                                                                                             *node.output] if name)]
    return Eligible([node.name for node in floating if node.name], sum(1 for node in floating if not node.name))


def weight_share(index: Any, kept: Sequence[str]) -> tuple[int, int]:
    """(float weight elements the kept nodes read, float weight elements of the model), each weight counted once."""
    def size(tensor: Any) -> int:
        if getattr(tensor, "data_type", None) not in FLOATS:  # a sparse initializer counts as not float here
            return 0
        count = 1
        for dim in tensor.dims:
            count *= int(dim)
        return count

    names = set(kept)
    read = {name for node in index.nodes if node.name in names for name in node.input if name in index.initializers}
    return (sum(size(index.initializers[name]) for name in read),
            sum(size(tensor) for tensor in index.initializers.values()))


def write_node_list(path: str, names: Sequence[str], header: Sequence[str]) -> None:
    """One node name per line after ``#`` comment lines: what ``--keep-fp32 @FILE`` and ``--no-quantize @FILE``
    read (a name those would misread, such as '#3' or ' x ', written as a JSON string). Written whole or not at
    all (a temporary file renamed)."""
    from cmpx.userfiles import list_line

    temporary = f"{path}.partial"
    with open(temporary, "w", encoding="utf-8") as f:
        f.writelines(f"# {line}\n" for line in header)
        f.writelines(f"{list_line(name)}\n" for name in names)
    os.replace(temporary, path)
