"""--report-json: the whole run as strict JSON (NaN and infinities written as the strings "NaN", "Infinity")."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cmpx import __version__
from cmpx.errors import BackendCrashed, BackendFailed, BackendTimeout
from cmpx.results import PairResult, PairTally, RunResult

if TYPE_CHECKING:
    from cmpx.plan import RunPlan
    from cmpx.registry import BackendSpec
    from cmpx.report import Report
    from cmpx.request import RunRequest


def run_document(report: Report) -> dict[str, Any]:
    """The report as a JSON-able dict (non-finite floats still floats: see ``strict``)."""
    plan, result = report.plan, report.result
    backends: list[dict[str, Any]] = []
    for b in plan.backends:
        timing = result.infer_seconds.get(b.name)
        backends.append({"name": b.name, "kind": "live", "backend": b.spec.name, "options": dict(b.options),
                         "framework": framework(b.spec), "transform": b.transform,
                         "load_seconds": result.load_seconds.get(b.name),
                         "infer_seconds": None if timing is None else {
                             "count": timing.count, "mean": timing.mean, "min": timing.fastest,
                             "max": timing.slowest},
                         "failure": failure_record(result.failures.get(b.name))})
    backends += [{"name": b.name, "kind": "saved", "path": b.path, "iterations": len(b.source)}
                 for b in plan.saved_backends]
    code = report.exit_code
    request = report.request
    return {
        "cmpx_version": __version__, "model": plan.model.path if plan.model else None,
        "model_outputs": [spec.name for spec in plan.model.outputs] if plan.model else [], "exit_code": int(code),
        "passed": report.passed, "interrupted": report.interrupted, "iterations": result.iterations,
        "seed": request.seed if request else None, "options": given_options(request),
        "stopped_early": result.stopped_early, "backends": backends, "tensors": compared_tensors(plan, result),
        "pairs": [pair_summary(tally, [p for p in result.pairs if (p.backend, p.reference) == key])
                  for key, tally in result.tallies.items()],
        "results_dropped": result.pairs_dropped,
        "non_finite": [vars(finding) | {"first_index": list(finding.first_index)} for finding in result.non_finite],
        "warnings": list(report.warnings),
    }


def framework(spec: BackendSpec) -> str | None:
    """"onnxruntime 1.23.2": the first of the backend's framework distributions that is installed."""
    from cmpx import installed

    for name in spec.frameworks:
        version = installed.version([name])
        if version:
            return f"{name} {version}"
    return None


def given_options(request: RunRequest | None) -> dict[str, Any]:
    """The run options given other values than their defaults (the model and backends are reported apart)."""
    from cmpx.request import request_defaults

    if request is None:
        return {}
    given = {name: list(value) if isinstance(value, tuple) else value
             for name, default in request_defaults().items() if name not in ("model", "backends")
             and (value := getattr(request, name)) != default}
    if request.thresholds:
        given["thresholds"] = {metric: list(words) for metric, words in request.thresholds.items()}
    return given


def compared_tensors(plan: RunPlan, result: RunResult) -> list[dict[str, str]]:
    """For a run that compares intermediate tensors (marked, or in saved runs): the model's tensors it compares
    or marks, outputs included, in graph order, with the node that computes each and its op type; else empty."""
    if plan.graph is None:
        return []
    wanted = set(plan.mark) | {o.output for pair in result.pairs for o in pair.outputs}
    if not wanted - plan.required_outputs:
        return []
    wanted |= plan.required_outputs
    return [{"name": t.name, "node": t.node, "op_type": t.op_type} for t in plan.graph.tensors if t.name in wanted]


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


def write_json_document(path: str, document: Mapping[str, Any]) -> None:
    """Write ``document`` (``Report.to_dict()``: strict already) as --report-json does."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(document, indent=1, allow_nan=False))
        f.write("\n")
