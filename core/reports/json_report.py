"""--report-json: the whole run as strict JSON (NaN and infinities written as the strings "NaN", "Infinity").

The document: ``format``, ``cmpx_version``, ``model``; ``results``, one record per pair and iteration (backend,
reference, iteration, passed, every output with its metrics and statistics, unmatched tensors, first divergence;
with an oracle, ``oracle``: each failing output's two sides against it); then ``exit_code``, ``verdict`` (its words,
as the text report ends: ``NOT COMPARED`` for one backend alone), ``passed``, ``compared`` (false for one backend
alone), ``interrupted``, ``iterations``, ``backends`` (options, timings, failures),
``command`` (the shell command line that runs it again), ``pairs`` (one summary per pair, with
``worst_rel_beyond_atol``, the worst relative error where |reference| > atol; with --local-error its
``local_errors``, largest first), ``oracle`` (None, or every backend's largest errors against the fp64 oracle and
where they first jump: docs/oracle.md), ``non_finite``, ``output_failures`` and ``warnings``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cmpx._version import __version__
from cmpx.errors import OutputFailed
from cmpx.outputs import AtomicFile
from cmpx.reports.reporter import SilentReporter
from cmpx.options.words import command_line, request_words
from cmpx.outcome.results import PairResult, PairTally, RunResult
from cmpx.outcome.runtimes import labels

if TYPE_CHECKING:
    from cmpx.plan import RunPlan
    from cmpx.plugin.registry import BackendSpec
    from cmpx.outcome.report_data import ReportData
    from cmpx.options.request import RunRequest


def run_document(report: ReportData) -> dict[str, Any]:
    """The report as a JSON-able dict (non-finite floats still floats: see ``strict``), from the results kept in
    memory; the --report-json file holds the same document with every iteration (see JsonReportWriter)."""
    values = [values_record(*entry) for entry in report.result.values]
    return {**document_head(report.plan), "results": [*values, *(pair_record(p) for p in report.result.pairs)],
            **document_tail(report)}


def document_head(plan: RunPlan) -> dict[str, Any]:
    return {"format": "cmpx-report", "cmpx_version": __version__, "model": plan.model.path if plan.model else None,
            "model_outputs": [spec.name for spec in plan.model.outputs] if plan.model else [],
            "data_ranges": [value_range.to_dict() for value_range in plan.data_ranges],
            "slicing": plan.slicing.describe() if plan.slicing is not None else None}


def results_of(document: Mapping[str, Any], pair: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The per-iteration records of one of the document's pairs (``document["pairs"][i]``), in iteration order."""
    return [r for r in document.get("results", ()) if r.get("kind", "pair") == "pair"
            and (r.get("backend"), r.get("reference")) == (pair.get("backend"), pair.get("reference"))]


def document_tail(report: ReportData) -> dict[str, Any]:
    plan, result = report.plan, report.result
    shown = labels(plan.backends, result.runtimes)
    backends: list[dict[str, Any]] = []
    for b in [*plan.backends, *(backend for backend, _ in plan.dropped)]:
        timing = result.infer_seconds.get(b.name)
        runtime = result.runtimes.get(b.name)
        backends.append({"name": b.name, "label": shown.get(b.name, b.name), "kind": "live", "backend": b.spec.name,
                         "options": dict(b.options), "transform": b.transform, "framework": framework(b.spec),
                         "framework_version": runtime.framework_version if runtime else None,
                         "python_given": b.python_given, "runtime": runtime.to_dict() if runtime else None,
                         "load_seconds": result.load_seconds.get(b.name),
                         "infer_seconds": None if timing is None else {
                             "count": timing.count, "mean": timing.mean, "min": timing.fastest,
                             "max": timing.slowest},
                         "failure": failure.record() if (failure := result.failures.get(b.name)) else None})
    backends += [{"name": b.name, "kind": "saved", "path": b.path, "iterations": len(b.source),
                  "saved_by": getattr(b.source, "about", None)} for b in plan.saved_backends]
    request = report.request
    return {
        "exit_code": int(report.exit_code), "verdict": report.verdict, "passed": report.passed,
        "compared": report.compared, "interrupted": report.interrupted, "stopped": report.stopped,
        "iterations": result.iterations, "seed": request.seed if request else None,
        "options": given_options(request), "command": run_command(plan, request), "stopped_early": result.stopped_early, "backends": backends,
        "tensors": compared_tensors(plan, result),
        "pairs": [pair_summary(tally) for tally in result.tallies.values()],
        "oracle": result.oracle.to_dict() if result.oracle is not None else None,
        "results_dropped": result.pairs_dropped,
        "non_finite": [vars(finding) | {"first_index": list(finding.first_index)} for finding in result.non_finite],
        "output_failures": list(report.output_failures), "warnings": list(report.warnings),
        "slices": list(result.slices),
    }


class JsonReportWriter(SilentReporter):
    """--report-json, streamed: each pair's results of each iteration are written as they come (memory stays
    independent of the iteration count), into a temporary file renamed to PATH once the run is done. A write
    error stops the writing; ``finish`` then raises it as an OutputFailed."""

    def __init__(self, path: str, plan: RunPlan):
        self.path = path
        self.plan = plan
        self._target: AtomicFile | None = None
        self._count = 0
        self._error: OutputFailed | None = None

    def started(self, runtimes: Any = None) -> None:
        try:
            self._target = AtomicFile("--report-json", self.path)
        except OutputFailed as exc:
            self._error = exc
            return
        self._write(json.dumps(document_head(self.plan))[:-1] + ', "results": [\n')

    def pair_compared(self, pair: PairResult) -> None:
        if self._target is not None:
            self._write((",\n" if self._count else "") + json.dumps(strict(pair_record(pair)), allow_nan=False))
            self._count += 1

    def outputs_described(self, backend: str, iteration: int, stats: list[Any]) -> None:
        if self._target is not None:
            self._write((",\n" if self._count else "") + json.dumps(strict(values_record(backend, iteration, stats)),
                                                                   allow_nan=False))
            self._count += 1

    def finish(self, report: ReportData) -> None:
        """Write the rest of the document and put the file in place; raise what went wrong on the way."""
        if self._target is not None:
            self._write("\n], " + json.dumps(strict(document_tail(report)), indent=1, allow_nan=False)[1:] + "\n")
        if self._error is not None:
            raise self._error
        if self._target is not None:
            target, self._target = self._target, None
            target.commit()

    def _write(self, text: str) -> None:
        target = self._target
        if target is None:  # a write failed already: its error is kept for finish
            return
        try:
            with target.failing():
                target.file.write(text)
        except OutputFailed as exc:
            self._error, self._target = exc, None


def framework(spec: BackendSpec) -> str | None:
    """"onnxruntime 1.23.2": the first of the backend's framework distributions that is installed."""
    from cmpx.plugin import installed

    for name in spec.frameworks:
        version = installed.version([name])
        if version:
            return f"{name} {version}"
    return None


def given_options(request: RunRequest | None) -> dict[str, Any]:
    """The run options given other values than their defaults (the model and backends are reported apart)."""
    from cmpx.options.request import request_defaults

    if request is None:
        return {}
    given = {name: list(value) if isinstance(value, tuple) else value
             for name, default in request_defaults().items() if name not in ("model", "backends")
             and (value := getattr(request, name)) != default}
    if request.thresholds:
        given["thresholds"] = {metric: list(words) for metric, words in request.thresholds.items()}
    return given


def run_command(plan: RunPlan, request: RunRequest | None) -> str | None:
    """The shell command line that runs this request again (cmpx.options.words), or None without a request."""
    if request is None:
        return None
    return command_line(["cmpx", "run", *request_words(request, None, [b.spec for b in plan.backends])])


def compared_tensors(plan: RunPlan, result: RunResult) -> list[dict[str, str]]:
    """For a run that compares intermediate tensors (marked, or in saved runs): the model's tensors it compares
    or marks, outputs included, in graph order, with the node that computes each and its op type; else empty."""
    if plan.graph is None:
        return []
    wanted = set(plan.mark) | result.compared_outputs
    if not wanted - plan.required_outputs:
        return []
    wanted |= plan.required_outputs
    return [{"name": t.name, "node": t.node, "op_type": t.op_type} for t in plan.graph.tensors if t.name in wanted]


def pair_summary(tally: PairTally) -> dict[str, Any]:
    divergence = tally.first_divergence
    return {"backend": tally.backend, "reference": tally.reference, "iterations": tally.iterations,
            "iterations_passed": tally.iterations_passed, "pass_rate": tally.pass_rate,
            "outputs": tally.outputs, "outputs_passed": tally.outputs_passed,
            "outputs_compared": tally.outputs_compared, "elements": tally.elements,
            "worst_abs": tally.worst_abs, "worst_rel": tally.worst_rel,
            "worst_rel_beyond_atol": tally.worst_rel_beyond_atol, "failing_iterations": tally.failing_iterations,
            "first_divergence": None if divergence is None else dict(iteration=divergence[0],
                                                                     **_divergence(divergence[1])),
            "local_errors": None if tally.local_errors is None else [e.to_dict() for e in tally.local_errors],
            "local_error_seconds": tally.local_error_seconds,
            "cannot_fail": [{"output": name, "reference_max": peak, "atol": atol}
                            for name, (peak, atol) in tally.cannot_fail.items()]}


@dataclass(frozen=True)
class FirstDivergence:
    """Where a pair's error first enters, as the document's pair summary says it."""

    iteration: int | None
    tensor: str | None
    node: str | None
    op_type: str | None


@dataclass(frozen=True)
class PairSummary:
    """One pair's totals as the document's ``pairs`` hold them (written by ``pair_summary``); the worst errors are
    floats again (NaN and infinities included)."""

    backend: str
    reference: str
    iterations: int
    iterations_passed: int
    outputs: int
    outputs_passed: int
    worst_abs: float | None
    worst_rel: float | None
    first_divergence: FirstDivergence | None

    @property
    def passed(self) -> bool:
        return self.iterations > 0 and self.iterations_passed == self.iterations


@dataclass(frozen=True)
class FailureSummary:
    """A backend's failure as the document's ``backends`` hold it (``BackendFailed.record()``)."""

    backend: str
    phase: str
    kind: str
    message: str


@dataclass(frozen=True)
class BackendSummary:
    """A live backend's timings as the document's ``backends`` hold them."""

    name: str
    load_seconds: float | None
    mean_infer_seconds: float | None


@dataclass(frozen=True)
class RunSummary:
    """A --report-json document read back, in sum: its exit code, each pair's totals, each live backend's timings
    and each backend's failure. The one reader of the documents this module writes (a sweep's report.json)."""

    exit_code: int
    pairs: tuple[PairSummary, ...] = ()
    backends: tuple[BackendSummary, ...] = ()
    failures: tuple[FailureSummary, ...] = ()
    compared: bool = True  # False: one backend alone, its outputs described, nothing compared

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> RunSummary:
        """Raises ValueError for a document that is not a cmpx report."""
        try:
            if document.get("format") != "cmpx-report":
                raise ValueError("not a cmpx report")
            pairs = tuple(PairSummary(
                pair["backend"], pair["reference"], int(pair["iterations"]), int(pair["iterations_passed"]),
                int(pair["outputs"]), int(pair["outputs_passed"]), read_number(pair["worst_abs"]),
                read_number(pair["worst_rel"]), _first_divergence(pair.get("first_divergence")))
                for pair in document["pairs"])
            live = [b for b in document["backends"] if b.get("kind") == "live"]
            backends = tuple(BackendSummary(b["name"], b.get("load_seconds"),
                                            (b.get("infer_seconds") or {}).get("mean")) for b in live)
            failures = tuple(FailureSummary(b["name"], b["failure"]["phase"], b["failure"]["kind"],
                                            b["failure"]["message"]) for b in live if b.get("failure"))
            return cls(int(document["exit_code"]), pairs, backends, failures, bool(document.get("compared", True)))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a cmpx report: {type(exc).__name__} {exc}") from None

    def to_document(self) -> dict[str, Any]:
        """The smallest document ``from_document`` reads back as this summary (a sweep's index keeps it, so that
        resuming a sweep reads no cell's full report); non-finite numbers as ``strict`` writes them."""
        failed = {f.backend: f for f in self.failures}
        live: list[dict[str, Any]] = [{"name": b.name, "kind": "live", "load_seconds": b.load_seconds,
                 "infer_seconds": {"mean": b.mean_infer_seconds}} for b in self.backends]
        for entry in live:
            if entry["name"] in failed:
                entry["failure"] = _failure_record(failed.pop(entry["name"]))
        live += [{"name": f.backend, "kind": "live", "failure": _failure_record(f)} for f in failed.values()]
        return strict({"format": "cmpx-report", "exit_code": self.exit_code, "compared": self.compared,
                       "backends": live, "pairs": [
            {"backend": p.backend, "reference": p.reference, "iterations": p.iterations,
             "iterations_passed": p.iterations_passed, "outputs": p.outputs, "outputs_passed": p.outputs_passed,
             "worst_abs": p.worst_abs, "worst_rel": p.worst_rel,
             "first_divergence": None if p.first_divergence is None else {
                 "iteration": p.first_divergence.iteration, "tensor": p.first_divergence.tensor,
                 "node": p.first_divergence.node, "op_type": p.first_divergence.op_type}} for p in self.pairs]})


def _failure_record(failure: FailureSummary) -> dict[str, str]:
    return {"phase": failure.phase, "kind": failure.kind, "message": failure.message}


def _first_divergence(found: Mapping[str, Any] | None) -> FirstDivergence | None:
    if not found:
        return None
    return FirstDivergence(found.get("iteration"), found.get("tensor"), found.get("node"), found.get("op_type"))


def read_number(value: Any) -> float | None:
    """A number of the document: JSON's, or the strings ``strict`` writes for non-finite ones."""
    if isinstance(value, str):
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value)
    return value if isinstance(value, (int, float)) else None


def _divergence(divergence: Any) -> dict[str, Any]:
    return {"tensor": divergence.tensor, "node": divergence.node, "op_type": divergence.op_type,
            "metrics": [{"metric": m.metric, "summary": m.summary, "data": dict(m.data)}
                        for m in divergence.result.metrics]}


def values_record(backend: str, iteration: int, stats: list[Any]) -> dict[str, Any]:
    """One backend's outputs of one iteration, described (single-backend runs, -v)."""
    return {"kind": "values", "backend": backend, "iteration": iteration, "outputs": [
        {"name": s.output, "dtype": s.dtype, "shape": list(s.shape), "min": s.minimum, "max": s.maximum,
         "mean": s.mean, "std": s.std, "nan_count": s.nan_count, "inf_count": s.inf_count} for s in stats]}


def pair_record(pair: PairResult) -> dict[str, Any]:
    """One pair in one iteration: every output with its metrics."""
    divergence = pair.first_divergence
    return {"kind": "pair", "backend": pair.backend, "reference": pair.reference, "iteration": pair.iteration,
            "passed": pair.passed, "note": pair.note or None,
            "first_divergence": None if divergence is None else _divergence(divergence),
            "unmatched": [_unmatched_record(pair, tensor, side) for tensor, side in pair.unmatched],
            "not_comparable": [{"output": output, "reason": why} for output, why in pair.not_comparable],
            "oracle": [judgement.to_dict() for judgement in pair.oracle],
            "outputs": [
                {"name": o.output, "passed": o.passed, "note": o.note or None, "elements": o.elements, "metrics": [
                    {"metric": m.metric, "passed": m.passed, "criterion": m.criterion, "summary": m.summary,
                     "value": m.value, "data": dict(m.data)} for m in o.metrics]} for o in pair.outputs]}


def _unmatched_record(pair: PairResult, tensor: str, side: str) -> dict[str, Any]:
    """A tensor only ``side`` produced; ``reason`` says why the other lacks it, when known ("not in the int8
    graph")."""
    lacking = pair.reference if side == pair.backend else pair.backend
    record = {"tensor": tensor, "only_in": side}
    if lacking in pair.lacking:
        record["reason"] = pair.lacking[lacking]
    return record


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


def to_json(report: ReportData, indent: int | None = 1) -> str:
    return json.dumps(strict(run_document(report)), indent=indent, allow_nan=False)
