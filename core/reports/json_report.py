"""--report-json: the whole run as strict JSON (NaN and infinities written as the strings "NaN", "Infinity")."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from cmpx import __version__
from cmpx.comparison.compare import PairResult, group_by_pair
from cmpx.errors import BackendCrashed, BackendError, BackendTimeout
from cmpx.execution import RunResult
from cmpx.plan import RunPlan


def run_document(plan: RunPlan, result: RunResult, code: int) -> dict[str, Any]:
    backends = [{"name": b.name, "kind": "live", "backend": b.spec.name, "options": dict(b.options),
                 "load_seconds": result.load_seconds.get(b.name), "infer_seconds": result.infer_seconds.get(b.name, []),
                 "failure": failure_record(result.failures.get(b.name))} for b in plan.backends]
    backends += [{"name": b.name, "kind": "saved", "path": b.path, "iterations": len(b.source)}
                 for b in plan.saved_backends]
    return {
        "cmpx_version": __version__, "model": plan.model.path if plan.model else None, "exit_code": code,
        "passed": code == 0, "iterations": result.iterations, "stopped_early": result.stopped_early,
        "backends": backends, "pairs": pair_summaries(result),
        "non_finite": [vars(finding) | {"first_index": list(finding.first_index)} for finding in result.non_finite],
    }


def failure_record(error: BackendError | None) -> dict[str, Any] | None:
    if error is None:
        return None
    record = {"phase": error.phase, "message": error.detail, "kind": "error"}
    if isinstance(error, BackendCrashed):
        record |= {"kind": "crash", "exit_code": error.exit_code, "signal": error.signal_name,
                   "stderr_tail": error.stderr_tail}
    elif isinstance(error, BackendTimeout):
        record |= {"kind": "timeout", "seconds": error.seconds}
    elif error.detail.startswith("protocol error"):
        record["kind"] = "protocol"
    if error.__cause__ is not None:
        record["remote_traceback"] = str(error.__cause__)
    return record


def pair_summaries(result: RunResult) -> list[dict[str, Any]]:
    summaries = []
    for (backend, reference), pairs in group_by_pair(result.pairs).items():
        passed = sum(p.passed for p in pairs)
        summaries.append({"backend": backend, "reference": reference, "iterations": len(pairs),
                          "iterations_passed": passed, "pass_rate": passed / len(pairs),
                          "results": [_pair(p) for p in pairs]})
    return summaries


def _pair(pair: PairResult) -> dict[str, Any]:
    divergence = pair.first_divergence
    return {"iteration": pair.iteration, "passed": pair.passed,
            "first_divergence": None if divergence is None else {
                "tensor": divergence.tensor, "node": divergence.node, "op_type": divergence.op_type,
                "metrics": [{"metric": m.metric, "summary": m.summary, "data": dict(m.data)}
                            for m in divergence.result.metrics]},
            "unmatched": [{"tensor": tensor, "only_in": side} for tensor, side in pair.unmatched],
            "outputs": [
        {"name": o.output, "passed": o.passed, "note": o.note or None, "metrics": [
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


def write_json_report(path: str, plan: RunPlan, result: RunResult, code: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(strict(run_document(plan, result, code)), f, indent=1, allow_nan=False)
        f.write("\n")
