"""Cells of the same inputs: a run of two model paths whose files have the same content (a model copied into two
folders of a zoo). Their fingerprints are equal (the path is not part of one, cmpx.sweep.matrix.Cell.fingerprint),
so the first runs and the others take its result, each reported under its own path and saying whose result it is
(``same_as`` in cell.json and summary.json).

A model that keeps its weights in external files is never taken for another: two checkpoints of one architecture
exported that way can be the same ``.onnx`` bytes with other weights beside them. Only models of the same content at
two paths are read for that (their structure, not their weights)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.errors import CmpxError
from cmpx.sweep.matrix import Cell


def same_inputs(matrix: Sequence[Cell], fingerprints: Mapping[str, Mapping[str, Any]]) -> list[list[Cell]]:
    """The cells grouped by run and fingerprint, each group in the matrix's order (the first is the one to run); a
    model with external weights is a group of its own."""
    groups: dict[str, list[Cell]] = {}
    for cell in matrix:
        groups.setdefault(json.dumps([cell.run_name, fingerprints[cell.key]], sort_keys=True), []).append(cell)
    found: list[list[Cell]] = []
    self_contained: dict[str, bool] = {}
    for group in groups.values():
        if len(group) > 1 and not all(self_contained.setdefault(c.model, _self_contained(c.model)) for c in group):
            found.extend([cell] for cell in group)
        else:
            found.append(group)
    return found


def _self_contained(model: str) -> bool:
    """The model file holds all its weights (not a model in a backend's own format, or an unreadable one)."""
    from cmpx.model.external import external_locations

    try:
        return not external_locations(model)
    except (CmpxError, OSError):
        return False
