"""Run one comparison: start a worker per backend, load in parallel, feed every iteration through shared
memory, compare each iteration's outputs as they arrive, and clean up on every exit path."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cmpx import shm, supervisor
from cmpx.compare import PairResult, compare_outputs
from cmpx.errors import BackendError
from cmpx.pairing import comparison_pairs
from cmpx.plan import RunPlan
from cmpx.validation import NonFinite, find_non_finite

CLOSE_TIMEOUT_SECONDS = 10.0


@dataclass
class RunResult:
    pairs: list[PairResult] = field(default_factory=list)
    non_finite: list[NonFinite] = field(default_factory=list)  # found by --validate
    stopped_early: bool = False  # --fail-fast
    failures: dict[str, BackendError] = field(default_factory=dict)
    load_seconds: dict[str, float] = field(default_factory=dict)
    infer_seconds: dict[str, list[float]] = field(default_factory=dict)
    iterations: int = 0


class Reporter(Protocol):
    def loaded(self, backend: str, seconds: float) -> None: ...
    def backend_failed(self, error: BackendError) -> None: ...
    def pair_compared(self, pair: PairResult) -> None: ...
    def non_finite(self, finding: NonFinite) -> None: ...


def execute(plan: RunPlan, feeds: Iterator[Mapping[str, Any]], reporter: Reporter) -> RunResult:
    """Run ``plan`` over ``feeds`` (one mapping per iteration). Never leaves a worker or segment behind."""
    result = RunResult()
    shm.sweep_orphans()
    prefix = shm.new_run_prefix()
    workers: dict[str, supervisor.Worker] = {}
    try:
        env = dict(os.environ)
        for backend in plan.backends:
            workers[backend.name] = supervisor.start_worker(backend.name, env)
        _collect(result, reporter, supervisor.wait_replies(workers.values(), "hello", "start", plan.timeout))
        ids = {}
        for backend in plan.backends:
            worker = workers[backend.name]
            ids[backend.name] = worker.next_id()
            supervisor.send(worker, {"op": "load", "id": ids[backend.name], "backend": backend.spec.name,
                                     "options": dict(backend.options), "model": plan.model.path,
                                     "plugins": plan.plugin_settings.to_message()}, "load")
        replies = supervisor.wait_replies(workers.values(), "ready", "load", plan.timeout, ids)
        for name, reply in _collect(result, reporter, replies).items():
            result.load_seconds[name] = reply["seconds"]
            reporter.loaded(name, reply["seconds"])
        for iteration in itertools.count():
            feed = next(feeds, None)
            if feed is None or not any(w.alive for w in workers.values()):
                break
            _run_iteration(plan, workers, prefix, iteration, feed, result, reporter)
            result.iterations = iteration + 1
            if result.stopped_early:
                break
        alive = [w for w in workers.values() if w.alive]
        for worker in alive:
            supervisor.send(worker, {"op": "close", "id": worker.next_id()}, "close")
        _collect(result, reporter, supervisor.wait_replies(alive, "bye", "close", CLOSE_TIMEOUT_SECONDS))
    finally:
        for worker in workers.values():
            supervisor.release(worker)
        shm.sweep(prefix)
    return result


def _collect(result: RunResult, reporter: Reporter, replies: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Record the failures among ``replies``; return the successful ones."""
    ok = {}
    for name, reply in replies.items():
        if isinstance(reply, BackendError):
            if name not in result.failures:
                result.failures[name] = reply
                reporter.backend_failed(reply)
        else:
            ok[name] = reply
    return ok


def _run_iteration(plan: RunPlan, workers: Mapping[str, supervisor.Worker], prefix: str, iteration: int,
                   feed: Mapping[str, Any], result: RunResult, reporter: Reporter) -> None:
    input_segment, descriptors = shm.write_tensors(f"{prefix}in{iteration}", feed)
    out_segments: dict[str, str] = {}
    attached: list[shm.Segment] = []
    try:
        ids = {}
        for index, (name, worker) in enumerate(workers.items()):
            if not worker.alive:
                continue
            ids[name] = worker.next_id()
            out_segments[name] = f"{prefix}out{iteration}-{index}"
            supervisor.send(worker, {"op": "infer", "id": ids[name], "inputs": descriptors,
                                     "out_segment": out_segments[name]}, "infer")
        replies = _collect(result, reporter, supervisor.wait_replies(
            [w for w in workers.values() if w.alive], "result", "infer", plan.timeout, ids))
        outputs = {}
        for name in workers:  # keep the command-line order: it decides the default pairs
            if name in replies:
                segment = shm.Segment.attach(out_segments[name])
                attached.append(segment)
                outputs[name] = shm.read_tensors(replies[name]["outputs"], {segment.name: segment})
                result.infer_seconds.setdefault(name, []).append(replies[name]["seconds"])
        if plan.validate:
            for name, tensors in outputs.items():
                for finding in find_non_finite(name, tensors):
                    result.non_finite.append(finding)
                    reporter.non_finite(finding)
        for backend, reference in comparison_pairs(list(outputs), plan.reference):
            pair = compare_outputs(backend, reference, iteration, outputs[backend], outputs[reference],
                                   plan.comparison)
            result.pairs.append(pair)
            reporter.pair_compared(pair)
            if plan.comparison.fail_fast and not pair.passed:
                result.stopped_early = True
                break
        outputs.clear()
    finally:
        input_segment.close()
        shm.unlink(input_segment.name)
        for segment in attached:
            segment.close()
        for name in out_segments.values():
            shm.unlink(name)
