"""Names in an ONNX graph that a transform rewrites: a fresh name, and the uses of a name moved to another."""

from __future__ import annotations

from typing import Any


def unused_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... the first not in ``taken``; added to ``taken``."""
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}_{number}"
    taken.add(candidate)
    return candidate


def rename_uses(names: Any, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in ``names`` (a node's inputs or outputs), in place."""
    for position, name in enumerate(names):
        if name == old:
            names[position] = new
