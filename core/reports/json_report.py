"""--report-json: the whole run as strict JSON (NaN and infinities written as the strings "NaN", "Infinity")."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cmpx import __version__
from cmpx.errors import BackendCrashed, BackendFailed, BackendTimeout
from cmpx.results import PairResult, PairTally
from cmpx.runtimes import labels

if TYPE_CHECKING:
    from cmpx.report import Report


def run_document(report: Report) -> dict[str, Any]:
    """The report as a JSON-able dict (non-finite floats still floats: see ``strict``)."""
    plan, result = report.plan, report.result
    shown = labels(plan.backends, result.runtimes)
    backends: list[dict[str, Any]] = []
    for b in plan.backends:
        timing = result.infer_seconds.get(b.name)
        runtime = result.runtimes.get(b.name)
        backends.append({"name": b.name, "label": shown[b.name], "kind": "live", "backend": b.spec.name,
                         "options": dict(b.options), "transform": b.transform,
                         "framework_version": runtime.framework_version if runtime else None,
                         "python_given": b.python_given, "runtime": runtime.to_dict() if runtime else None,
                         "load_seconds": result.load_seconds.get(b.name),
                         "infer_seconds": None if timing is None else {
                             "count": timing.count, "mean": timing.mean, "min": timing.fastest,
                             "max": timing.slowest},
                         "failure": failure_record(result.failures.get(b.name))})
    backends += [{"name": b.name, "kind": "saved", "path": b.path, "iterations": len(b.source),
                  "saved_by": getattr(b.source, "about", None)} for b in plan.saved_backends]
    code = report.exit_code
    return {
        "cmpx_version": __version__, "model": plan.model.path if plan.model else None, "exit_code": int(code),
        "passed": report.passed, "interrupted": report.interrupted, "iterations": result.iterations,
        "stopped_early": result.stopped_early, "backends": backends,
        "pairs": [pair_summary(tally, [p for p in result.pairs if (p.backend, p.reference) == key])
                  for key, tally in result.tallies.items()],
        "results_dropped": result.pairs_dropped,
        "non_finite": [vars(finding) | {"first_index": list(finding.first_index)} for finding in result.non_finite],
        "warnings": list(report.warnings),
    }


def failure_record(error: BackendFailed | None) -> dict[str, Any] | None:
    if error is None:
        return None
    record: dict[str, Any] = {"phase": error.phase, "message": error.detail, "kind": "error"}
    if isinstance(error, BackendCrashed):
        record |= {"kind": "crash", "exit_code": error.worker_exit_code, "signal": error.signal_name,
                   "stderr_tail": error.stderr_tail}
    elif isinstance(error, BackendTimeout):
        record |= {"kind": "timeout", "seconds": error.seconds}
    elif error.detail.startswith("protocol error"):
        record["kind"] = "protocol"
    if error.__cause__ is not None:
        record["remote_traceback"] = str(error.__cause__)
    return record


def pair_summary(tally: PairTally, pairs: list[PairResult]) -> dict[str, Any]:
    divergence = tally.first_divergence
    return {"backend": tally.backend, "reference": tally.reference, "iterations": tally.iterations,
            "iterations_passed": tally.iterations_passed, "pass_rate": tally.pass_rate,
            "outputs": tally.outputs, "outputs_passed": tally.outputs_passed, "elements": tally.elements,
            "worst_abs": tally.worst_abs, "worst_rel": tally.worst_rel, "failing_iterations": tally.failing_iterations,
            "first_divergence": None if divergence is None else dict(iteration=divergence[0],
                                                                     **_divergence(divergence[1])),
            "results": [pair_record(p) for p in pairs]}


def _divergence(divergence: Any) -> dict[str, Any]:
    return {"tensor": divergence.tensor, "node": divergence.node, "op_type": divergence.op_type,
            "metrics": [{"metric": m.metric, "summary": m.summary, "data": dict(m.data)}
                        for m in divergence.result.metrics]}


def pair_record(pair: PairResult) -> dict[str, Any]:
    """One pair in one iteration: every output with its metrics."""
    divergence = pair.first_divergence
    return {"iteration": pair.iteration, "passed": pair.passed,
            "first_divergence": None if divergence is None else _divergence(divergence),
            "unmatched": [{"tensor": tensor, "only_in": side} for tensor, side in pair.unmatched],
            "outputs": [
                {"name": o.output, "passed": o.passed, "note": o.note or None, "elements": o.elements, "metrics": [
                    {"metric": m.metric, "passed": m.passed, "criterion": m.criterion, "summary": m.summary,
                     "value": m.value, "data": dict(m.data)} for m in o.metrics]} for o in pair.outputs]}


def strict(value: Any) -> Any:
    """``value`` with non-finite floats as strings, so that the output is standard JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return strict(value.item())
    return value


def to_json(report: Report, indent: int | None = 1) -> str:
    return json.dumps(strict(run_document(report)), indent=indent, allow_nan=False)


def write_json_report(path: str, report: Report) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(to_json(report))
        f.write("\n")
