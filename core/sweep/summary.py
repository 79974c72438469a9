"""``summary.json``: every cell of the sweep with its verdict, worst errors, first divergence, timings and failure,
and the sweep's exit code: 3 if any cell's backend failed (or a cell could not run: bad input for that model, an
internal error), else 1 if any cell mismatched, else 0; 130 when interrupted."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any

from cmpx._version import __version__
from cmpx.errors import ExitCode
from cmpx.outputs import write_whole

VERDICTS: dict[int | None, str] = {
    ExitCode.PASSED: "passed", ExitCode.MISMATCH: "mismatch", ExitCode.USAGE: "usage error",
    ExitCode.BACKEND_FAILED: "backend failed", ExitCode.INTERNAL: "internal error",
    ExitCode.INTERRUPTED: "interrupted", None: "not run"}
NOT_RUN = "not run"


def verdict(exit_code: int | None) -> str:
    return VERDICTS.get(exit_code, f"exit {exit_code}")


def cell_entry(model: str, run: str, record: dict[str, Any] | None, report: dict[str, Any] | None,
               key: str, reused: bool = False) -> dict[str, Any]:
    """One cell as summary.json lists it; ``record`` None for a cell that did not run."""
    if record is None:
        return {"model": model, "run": run, "exit_code": None, "verdict": NOT_RUN, "reused": False, "pairs": [],
                "worst_abs": None, "worst_rel": None, "first_divergence": None, "timings": None, "failure": None,
                "report": None, "log": None}
    report = report or {}
    pairs = [{key_: pair.get(key_) for key_ in ("backend", "reference", "iterations", "iterations_passed",
                                                 "outputs", "outputs_passed", "worst_abs", "worst_rel")}
             | {"passed": bool(pair.get("iterations")) and pair.get("iterations") == pair.get("iterations_passed")}
             for pair in report.get("pairs", [])]
    folder = f"cells/{key}"
    return {"model": model, "run": run, "exit_code": record["exit_code"], "verdict": verdict(record["exit_code"]),
            "reused": reused, "pairs": pairs,
            "worst_abs": _worst(p["worst_abs"] for p in pairs), "worst_rel": _worst(p["worst_rel"] for p in pairs),
            "first_divergence": _first_divergence(report),
            "timings": {"seconds": record.get("seconds"), "backends": {
                b["name"]: {"load_seconds": b.get("load_seconds"),
                            "mean_infer_seconds": (b.get("infer_seconds") or {}).get("mean")}
                for b in report.get("backends", []) if b.get("kind") == "live"}},
            "failure": _failure(record, report),
            "report": f"{folder}/{record['report']}" if record.get("report") else None,
            "log": f"{folder}/{record.get('log', 'log.txt')}", "host": record.get("host")}


def _number(value: Any) -> float | None:
    """A JSON number, or the strings the reports use for non-finite ones."""
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value)
    return value if isinstance(value, (int, float)) else None


def _worst(values: Any) -> Any:
    numbers = [n for n in map(_number, values) if n is not None]
    if not numbers:
        return None
    worst = math.nan if any(math.isnan(n) for n in numbers) else max(numbers)
    return worst if math.isfinite(worst) else ("NaN" if math.isnan(worst) else "Infinity")


def _first_divergence(report: dict[str, Any]) -> dict[str, Any] | None:
    for pair in report.get("pairs", []):
        found = pair.get("first_divergence")
        if found:
            return {"pair": f"{pair['backend']} vs {pair['reference']}", "iteration": found.get("iteration"),
                    "tensor": found.get("tensor"), "node": found.get("node"), "op_type": found.get("op_type")}
    return None


def _failure(record: dict[str, Any], report: dict[str, Any]) -> dict[str, Any] | None:
    backends = [{"backend": b["name"], **{k: b["failure"].get(k) for k in ("phase", "kind", "message")}}
                for b in report.get("backends", []) if b.get("failure")]
    if not backends and not record.get("failure"):
        return None
    message = record.get("failure") or "; ".join(f"{b['backend']} failed during {b['phase']}: {b['message']}"
                                                 for b in backends)
    return {"message": message, "backends": backends}


def sweep_exit_code(entries: Sequence[dict[str, Any]], interrupted: bool) -> int:
    if interrupted:
        return ExitCode.INTERRUPTED
    codes = {entry["exit_code"] for entry in entries}
    if codes & {ExitCode.USAGE, ExitCode.BACKEND_FAILED, ExitCode.INTERNAL, None}:
        return ExitCode.BACKEND_FAILED
    return ExitCode.MISMATCH if ExitCode.MISMATCH in codes else ExitCode.PASSED


def summary_document(entries: Sequence[dict[str, Any]], *, sweep_file: str, models: Sequence[str],
                     runs: Sequence[str], executor: str, seconds: float, interrupted: bool) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    return {"format": "cmpx-sweep-summary", "format_version": 1, "cmpx_version": __version__,
            "sweep_file": sweep_file, "executor": executor, "exit_code": sweep_exit_code(entries, interrupted),
            "interrupted": interrupted, "seconds": seconds, "counts": counts, "models": list(models),
            "runs": list(runs), "cells": list(entries)}


def write_summary(out: str, document: dict[str, Any]) -> None:
    write_whole("--out", os.path.join(out, "summary.json"), json.dumps(document, indent=1, allow_nan=False) + "\n")
