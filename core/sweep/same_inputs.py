"""Cells of the same inputs: a run of two model paths whose files have the same content (a model copied into two
folders of a zoo). Their fingerprints are equal (the path is not part of one, cmpx.sweep.matrix.Cell.fingerprint),
so the first runs and the others take its result, each reported under its own path and saying whose result it is
(``same_as`` in cell.json and summary.json)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.sweep.matrix import Cell


def same_inputs(matrix: Sequence[Cell], fingerprints: Mapping[str, Mapping[str, Any]]) -> list[list[Cell]]:
    """The cells grouped by run and fingerprint, each group in the matrix's order (the first is the one to run)."""
    groups: dict[str, list[Cell]] = {}
    for cell in matrix:
        groups.setdefault(json.dumps([cell.run_name, fingerprints[cell.key]], sort_keys=True), []).append(cell)
    return list(groups.values())
