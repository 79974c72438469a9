"""``cmpx sweep diff OLD NEW``: what changed between two sweeps' results (say, before and after an onnxruntime
upgrade), cell by cell, matched by model and run name, read from each directory's summary.json.

    new failure     passed before, not now (mismatch, backend failed, ...)          worse
    fixed           did not pass before, passes now
    verdict changed from one failure to another: worse if the new one is graver (mismatch < backend failed)
    error grew      the worst abs or rel error is more than FACTOR times what it was  worse
    error shrank    ... less than 1/FACTOR of what it was (and no error grew)
    no result       ran before, not run now (an interrupted sweep)                    worse
    only in OLD / only in NEW   a model or run one of the sweeps did not have

NaN counts as the largest error; an error that was 0 and is not now grew.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from typing import Any

from cmpx.errors import UsageError
from cmpx.reports.json_report import strict
from cmpx.sweep.summary import CLEAN, NOT_COMPARED, NOT_RUN, CellEntry, SweepSummary
from cmpx.sweep.tables import error_number

# Lower is graver; a change to a lower rank is worse.
RANKS = {"internal error": 0, "usage error": 0, "backend failed": 0, "infrastructure failure": 0, "mismatch": 1,
         "passed": 2, NOT_COMPARED: 2}
KINDS = ("new failure", "verdict changed", "error grew", "no result", "fixed", "error shrank", "only in OLD",
         "only in NEW")


@dataclass(frozen=True)
class Change:
    """One cell that changed: ``old`` or ``new`` None where it is in one sweep only."""

    kind: str
    old: CellEntry | None
    new: CellEntry | None
    worse: bool
    inputs: tuple[str, ...] = ()  # what differs between the two cells' fingerprints: args, model, frameworks...

    @property
    def cell(self) -> CellEntry:
        found = self.new or self.old
        assert found is not None
        return found

    def describe(self) -> str:
        """``passed -> mismatch (abs 0.00246, rel 0.128)``, or what the one side had."""
        sides = [_state(side) for side in (self.old, self.new) if side is not None]
        return " -> ".join(sides) + (f" [{', '.join(self.inputs)} changed]" if self.inputs else "")

    def to_dict(self) -> dict[str, Any]:
        def side(entry: CellEntry | None) -> dict[str, Any] | None:
            return None if entry is None else {"verdict": entry.verdict, "worst_abs": entry.worst_abs,
                                               "worst_rel": entry.worst_rel, "report": entry.report}

        return {"model": self.cell.model, "run": self.cell.run, "kind": self.kind, "worse": self.worse,
                "inputs_changed": list(self.inputs), "old": side(self.old), "new": side(self.new)}


@dataclass(frozen=True)
class SweepDiff:
    old_dir: str
    new_dir: str
    factor: float
    changes: tuple[Change, ...]
    compared: int  # cells in both sweeps

    @property
    def worse(self) -> bool:
        return any(change.worse for change in self.changes)

    def counts(self) -> dict[str, int]:
        found = {kind: sum(c.kind == kind for c in self.changes) for kind in KINDS}
        return {kind: n for kind, n in found.items() if n}

    def lines(self) -> list[str]:
        """The text report: a head line, then each kind's cells."""
        counts = ", ".join(f"{n} {kind}" for kind, n in self.counts().items()) or "no change"
        lines = [f"cmpx sweep diff | {self.old_dir} -> {self.new_dir} | {self.compared} cell(s) in both | {counts} | "
                 f"{'worse: exit 1' if self.worse else 'nothing worse: exit 0'} (error factor {self.factor:g})"]
        for kind in KINDS:
            mine = [c for c in self.changes if c.kind == kind]
            if mine:
                lines.append(f"{kind.replace('OLD', self.old_dir).replace('NEW', self.new_dir)} ({len(mine)}):")
                lines += [f"  {c.cell.model} | {c.cell.run}: {c.describe()}" for c in mine]
        return lines

    def to_document(self) -> dict[str, Any]:
        return strict({"format": "cmpx-sweep-diff", "format_version": 1, "old": self.old_dir, "new": self.new_dir,
                       "factor": self.factor, "worse": self.worse, "compared": self.compared,
                       "counts": self.counts(), "changes": [c.to_dict() for c in self.changes]})


def read_results(path: str, role: str) -> SweepSummary:
    """The summary of the sweep whose results are in ``path`` (OLD or NEW); UsageError if it is none."""
    summary = os.path.join(path, "summary.json")
    hint = "give a directory that 'cmpx sweep FILE --out DIR' wrote"
    if not os.path.isdir(path):
        raise UsageError(f"{role} {path}: not a directory; {hint}")
    try:
        with open(summary, encoding="utf-8") as f:
            return SweepSummary.from_document(json.load(f))
    except FileNotFoundError:
        raise UsageError(f"{role} {path}: no summary.json, so not a cmpx sweep's results; {hint} (a sweep "
                         "interrupted before its end writes one too)") from None
    except OSError as exc:
        raise UsageError(f"{role} {summary}: cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"{role} {summary}: {exc}; {hint}") from None


def compare(old: SweepSummary, new: SweepSummary, old_dir: str, new_dir: str, factor: float = 2.0) -> SweepDiff:
    """Every cell that changed by more than ``factor`` (> 1), new ones first, in NEW's order, then OLD's."""
    before = {(e.model, e.run): e for e in old.cells}
    after = {(e.model, e.run): e for e in new.cells}
    changes = []
    for key, entry in after.items():
        earlier = before.get(key)
        change = Change("only in NEW", None, entry, False) if earlier is None else _change(earlier, entry, factor)
        if change is not None and earlier is not None:
            change = replace(change, inputs=_inputs_changed(old_dir, earlier, new_dir, entry))
        if change is not None:
            changes.append(change)
    changes += [Change("only in OLD", entry, None, False) for key, entry in before.items() if key not in after]
    order = {kind: i for i, kind in enumerate(KINDS)}
    changes.sort(key=lambda c: order[c.kind])  # stable: within a kind, in the sweeps' order
    return SweepDiff(old_dir, new_dir, factor, tuple(changes), sum(key in before for key in after))


def _change(old: CellEntry, new: CellEntry, factor: float) -> Change | None:
    if old.verdict == NOT_RUN:
        return None  # nothing to compare with
    if new.verdict == NOT_RUN:
        return Change("no result", old, new, True)
    if old.verdict != new.verdict:
        if new.verdict in CLEAN and old.verdict not in CLEAN:
            return Change("fixed", old, new, False)
        if old.verdict in CLEAN and new.verdict not in CLEAN:
            return Change("new failure", old, new, True)
        return Change("verdict changed", old, new, RANKS.get(new.verdict, 0) < RANKS.get(old.verdict, 0))
    pairs = [(old.worst_abs, new.worst_abs), (old.worst_rel, new.worst_rel)]
    if any(_grew(a, b, factor) for a, b in pairs):
        return Change("error grew", old, new, True)
    if any(_grew(b, a, factor) for a, b in pairs):
        return Change("error shrank", old, new, False)
    return None


# A fingerprint's keys (cmpx.sweep.matrix.Cell.fingerprint) as the diff names them.
INPUTS = {"model_sha256": "model", "args": "args", "lists": "@FILE lists", "plugins": "plugins",
          "threads": "threads", "frameworks": "frameworks", "cmpx_version": "cmpx version"}


def _inputs_changed(old_dir: str, old: CellEntry, new_dir: str, new: CellEntry) -> tuple[str, ...]:
    """Which of a cell's inputs differ between the two sweeps (a verdict that changed with the args, say tighter
    tolerances, is not the backends' doing), read from each cell's cell.json; nothing if either cannot be read."""
    old_inputs, new_inputs = _fingerprint(old_dir, old), _fingerprint(new_dir, new)
    if old_inputs is None or new_inputs is None:
        return ()
    return tuple(name for key, name in INPUTS.items() if old_inputs.get(key) != new_inputs.get(key))


def _fingerprint(directory: str, entry: CellEntry) -> dict[str, Any] | None:
    from cmpx.userfiles import open_regular

    beside = entry.report or entry.log  # a cell that never compared anything has only its log
    if not beside:
        return None
    try:
        with open_regular(os.path.join(directory, os.path.dirname(beside), "cell.json"), "cell record",
                          "r", encoding="utf-8") as f:
            found = json.load(f).get("fingerprint")
    except (OSError, ValueError, UsageError, AttributeError):
        return None
    return found if isinstance(found, dict) else None


def _grew(before: float | None, after: float | None, factor: float) -> bool:
    """Whether ``after`` is more than ``factor`` times ``before`` (NaN the largest error)."""
    if before is None or after is None or (math.isnan(before) and math.isnan(after)):
        return False
    if math.isnan(after):
        return True
    return not math.isnan(before) and after > before * factor and after > 0


def _state(entry: CellEntry) -> str:
    if entry.worst_abs is None:
        return entry.verdict
    return f"{entry.verdict} (abs {error_number(entry.worst_abs)}, rel {error_number(entry.worst_rel)})"
