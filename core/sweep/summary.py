"""``summary.json``: every cell of the sweep with its verdict, worst errors, first divergence, timings and failure,
and the sweep's exit code: 3 if any cell's backend failed (or a cell could not run: bad input for that model, an
internal error), else 1 if any cell mismatched, else 0; 130 when interrupted; 6 when the Ray cluster was lost or a
cell failed for a reason of the cluster (an infrastructure failure: its node, process or memory, past its retries).

``CellEntry`` is one cell as the summaries, the progress lines and the tables see it, made from the cell's record
(cmpx.sweep.store) and its report read back (cmpx.reports.json_report.RunSummary); ``SweepSummary`` is the
whole sweep. ``to_dict`` and ``to_document`` write summary.json; ``from_dict`` and ``from_document`` read it
back (``cmpx sweep diff``), as far as it holds the cell: its pairs' totals, the first divergence, its timings."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cmpx._version import __version__
from cmpx.errors import ExitCode
from cmpx.outputs import write_whole
from cmpx.reports.json_report import BackendSummary, FailureSummary, FirstDivergence, PairSummary, RunSummary, \
    read_number, strict

if TYPE_CHECKING:
    from cmpx.sweep.store import CellRecord

VERDICTS: dict[int | None, str] = {
    ExitCode.PASSED: "passed", ExitCode.MISMATCH: "mismatch", ExitCode.USAGE: "usage error",
    ExitCode.BACKEND_FAILED: "backend failed", ExitCode.INTERNAL: "internal error",
    ExitCode.INTERRUPTED: "interrupted", ExitCode.INFRASTRUCTURE: "infrastructure failure", None: "not run"}
NOT_RUN = "not run"
NOT_COMPARED = "not compared"  # exit 0 of one backend alone (a golden run): described, nothing compared
CLEAN = ("passed", NOT_COMPARED)  # the verdicts of exit 0


def verdict(exit_code: int | None) -> str:
    return VERDICTS.get(exit_code, f"exit {exit_code}")


@dataclass(frozen=True)
class CellFailure:
    """Why a cell gave no verdict, or which of its backends failed: ``message`` in full, ``backends`` each."""

    message: str
    backends: tuple[FailureSummary, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "backends": [
            {"backend": b.backend, "phase": b.phase, "kind": b.kind, "message": b.message} for b in self.backends]}


@dataclass(frozen=True)
class CellEntry:
    """One cell of the sweep; ``exit_code`` None for a cell that did not run. ``report`` and ``log`` are its
    files, relative to the results directory."""

    model: str
    run: str
    exit_code: int | None = None
    reused: bool = False
    run_summary: RunSummary | None = None
    seconds: float | None = None
    failure: CellFailure | None = None
    report: str | None = None
    log: str | None = None
    host: str | None = None
    threads: int | None = None  # what its backends computed with (cmpx.sweep.threads)
    same_as: str | None = None  # the model whose cell ran for this one: a file of the same content

    @classmethod
    def of(cls, model: str, run: str, record: CellRecord | None, summary: RunSummary | None, key: str,
           reused: bool = False) -> CellEntry:
        """The entry of a cell with ``record`` (None: it did not run) and its report ``summary``."""
        if record is None:
            return cls(model, run)
        folder = f"cells/{key}"
        return cls(model, run, record.exit_code, reused, summary, record.seconds, _failure(record, summary),
                   f"{folder}/{record.report}" if record.report else None, f"{folder}/{record.log}", record.host,
                   record.threads, record.same_as)

    @property
    def verdict(self) -> str:
        if self.exit_code == ExitCode.PASSED and self.run_summary is not None and not self.run_summary.compared:
            return NOT_COMPARED
        return verdict(self.exit_code)

    @property
    def pairs(self) -> tuple[PairSummary, ...]:
        return self.run_summary.pairs if self.run_summary is not None else ()

    @property
    def worst_abs(self) -> float | None:
        return _worst(p.worst_abs for p in self.pairs)

    @property
    def worst_rel(self) -> float | None:
        return _worst(p.worst_rel for p in self.pairs)

    @property
    def first_divergence(self) -> tuple[PairSummary, FirstDivergence] | None:
        """The first pair's first divergence, with that pair."""
        return next(((p, p.first_divergence) for p in self.pairs if p.first_divergence), None)

    def to_dict(self) -> dict[str, Any]:
        """The cell as summary.json lists it (non-finite numbers as the strings JSON needs)."""
        ran = self.exit_code is not None
        divergence = self.first_divergence
        entry = {
            "model": self.model, "run": self.run, "exit_code": self.exit_code, "verdict": self.verdict,
            "reused": self.reused, "pairs": [
                {"backend": p.backend, "reference": p.reference, "iterations": p.iterations,
                 "iterations_passed": p.iterations_passed, "outputs": p.outputs, "outputs_passed": p.outputs_passed,
                 "worst_abs": p.worst_abs, "worst_rel": p.worst_rel, "passed": p.passed} for p in self.pairs],
            "worst_abs": self.worst_abs, "worst_rel": self.worst_rel,
            "first_divergence": None if divergence is None else {
                "pair": f"{divergence[0].backend} vs {divergence[0].reference}", "iteration": divergence[1].iteration,
                "tensor": divergence[1].tensor, "node": divergence[1].node, "op_type": divergence[1].op_type},
            "timings": None if not ran else {"seconds": self.seconds, "backends": {
                b.name: {"load_seconds": b.load_seconds, "mean_infer_seconds": b.mean_infer_seconds}
                for b in (self.run_summary.backends if self.run_summary is not None else ())}},
            "failure": self.failure.to_dict() if self.failure is not None else None,
            "report": self.report, "log": self.log}
        if ran:
            entry.update(host=self.host, threads=self.threads, same_as=self.same_as)
        return strict(entry)

    @classmethod
    def from_dict(cls, data: Any) -> CellEntry:
        """The cell summary.json lists (``to_dict``; what an older cmpx left out is None); KeyError, TypeError or
        ValueError if it is not one."""
        divergence = data.get("first_divergence")
        pairs = tuple(PairSummary(
            p["backend"], p["reference"], int(p["iterations"]), int(p["iterations_passed"]), int(p["outputs"]),
            int(p["outputs_passed"]), read_number(p["worst_abs"]), read_number(p["worst_rel"]),
            FirstDivergence(divergence["iteration"], divergence["tensor"], divergence["node"], divergence["op_type"])
            if divergence and divergence["pair"] == f"{p['backend']} vs {p['reference']}" else None)
            for p in data["pairs"])
        timings = data.get("timings") or {}
        backends = tuple(BackendSummary(name, t["load_seconds"], t["mean_infer_seconds"])
                         for name, t in (timings.get("backends") or {}).items())
        failure = data.get("failure")
        failure = None if failure is None else CellFailure(str(failure["message"]), tuple(
            FailureSummary(b["backend"], b["phase"], b["kind"], b["message"]) for b in failure.get("backends", ())))
        code = data["exit_code"]
        summary = RunSummary(int(code), pairs, backends, failure.backends if failure else (),
                             data.get("verdict") != NOT_COMPARED) if (pairs or backends) else None
        return cls(str(data["model"]), str(data["run"]), None if code is None else int(code),
                   bool(data.get("reused")), summary, timings.get("seconds"), failure, data.get("report"),
                   data.get("log"), data.get("host"))


def _worst(values: Any) -> float | None:
    numbers = [n for n in values if n is not None]
    if not numbers:
        return None
    return math.nan if any(math.isnan(n) for n in numbers) else max(numbers)


def _failure(record: CellRecord, summary: RunSummary | None) -> CellFailure | None:
    backends = summary.failures if summary is not None else ()
    if not backends and not record.failure:
        return None
    message = record.failure or "; ".join(f"{b.backend} failed during {b.phase}: {b.message}" for b in backends)
    return CellFailure(message, backends)


@dataclass(frozen=True)
class SweepSummary:
    """The whole sweep: every cell's entry, in the matrix's order, and what the sweep was."""

    cells: Sequence[CellEntry]
    sweep_file: str
    models: Sequence[str]
    runs: Sequence[str]
    executor: str
    seconds: float
    interrupted: bool
    cluster_failure: str | None = None  # why the sweep stopped when it lost its Ray cluster

    @property
    def exit_code(self) -> ExitCode:
        if self.interrupted:
            return ExitCode.INTERRUPTED
        codes = {entry.exit_code for entry in self.cells}
        if self.cluster_failure is not None or ExitCode.INFRASTRUCTURE in codes:
            return ExitCode.INFRASTRUCTURE  # incomplete for the cluster's sake: never a verdict
        if codes & {ExitCode.USAGE, ExitCode.BACKEND_FAILED, ExitCode.INTERNAL, None}:
            return ExitCode.BACKEND_FAILED
        return ExitCode.MISMATCH if ExitCode.MISMATCH in codes else ExitCode.PASSED

    @property
    def counts(self) -> dict[str, int]:
        """How many cells have each verdict, in the order first seen."""
        counts: dict[str, int] = {}
        for entry in self.cells:
            counts[entry.verdict] = counts.get(entry.verdict, 0) + 1
        return counts

    def to_document(self) -> dict[str, Any]:
        return {"format": "cmpx-sweep-summary", "format_version": 1, "cmpx_version": __version__,
                "sweep_file": self.sweep_file, "executor": self.executor, "exit_code": int(self.exit_code),
                "interrupted": self.interrupted, "cluster_failure": self.cluster_failure, "seconds": self.seconds,
                "counts": self.counts,
                "models": list(self.models), "runs": list(self.runs), "cells": [e.to_dict() for e in self.cells]}


    @classmethod
    def from_document(cls, document: Any) -> SweepSummary:
        """summary.json read back; ValueError if it is not a cmpx sweep's summary."""
        if not isinstance(document, dict) or document.get("format") != "cmpx-sweep-summary":
            raise ValueError("not a cmpx sweep summary")
        try:
            return cls([CellEntry.from_dict(cell) for cell in document["cells"]], str(document["sweep_file"]),
                       list(document["models"]), list(document["runs"]), str(document["executor"]),
                       float(document["seconds"]), bool(document["interrupted"]))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a cmpx sweep summary: {type(exc).__name__} {exc}") from None


def write_summary(out: str, summary: SweepSummary) -> None:
    write_whole("--out", os.path.join(out, "summary.json"),
                json.dumps(summary.to_document(), indent=1, allow_nan=False) + "\n")
