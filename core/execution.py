"""Run one comparison: start a worker per backend, load in parallel, feed every iteration through shared
memory, add saved runs, compare each iteration's outputs as they arrive, save what was asked, and clean up on
every exit path."""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cmpx import shm, supervisor
from cmpx.compare import PairResult, compare_outputs
from cmpx.errors import BackendError
from cmpx.feeds import feeds_digest
from cmpx.pairing import comparison_pairs
from cmpx.plan import RunPlan
from cmpx.saved.cmpx_format import RunWriter
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


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a run, raised after cleanup; carries what was finished."""

    def __init__(self, result: RunResult):
        super().__init__()
        self.result = result


class Reporter(Protocol):
    def loaded(self, backend: str, seconds: float) -> None: ...
    def backend_failed(self, error: BackendError) -> None: ...
    def pair_compared(self, pair: PairResult) -> None: ...
    def non_finite(self, finding: NonFinite) -> None: ...
    def warning(self, message: str) -> None: ...


@dataclass
class _Run:
    plan: RunPlan
    reporter: Reporter
    result: RunResult
    prefix: str
    workers: dict[str, supervisor.Worker] = field(default_factory=dict)
    inputs_writer: RunWriter | None = None
    outputs_writer: RunWriter | None = None
    warned: set[tuple[str, str]] = field(default_factory=set)


def execute(plan: RunPlan, feeds: Iterator[Mapping[str, Any]] | None, reporter: Reporter) -> RunResult:
    """Run ``plan`` over ``feeds`` (one mapping per iteration; None when only saved runs are compared).

    Never leaves a worker, a segment or an open file behind.
    """
    shm.sweep_orphans()
    run = _Run(plan, reporter, RunResult(), shm.new_run_prefix())
    try:
        _execute(run, feeds)
    except KeyboardInterrupt:
        raise RunInterrupted(run.result) from None
    return run.result


def _execute(run: _Run, feeds: Iterator[Mapping[str, Any]] | None) -> None:
    plan = run.plan
    model_path = plan.model.path if plan.model else None
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shm.sweep, run.prefix)
        if plan.save_inputs:
            run.inputs_writer = RunWriter(plan.save_inputs, "inputs", model_path)
            cleanup.callback(run.inputs_writer.close)
        if plan.save_outputs:
            run.outputs_writer = RunWriter(plan.save_outputs, "outputs", model_path)
            cleanup.callback(run.outputs_writer.close)
        cleanup.callback(_release_all, run.workers)
        _start_and_load(run)
        for iteration in itertools.count() if plan.iterations is None else range(plan.iterations):
            feed = next(feeds, None) if feeds is not None else {}
            if feed is None or plan.backends and not any(w.alive for w in run.workers.values()):
                break
            _run_iteration(run, iteration, feed)
            run.result.iterations = iteration + 1
            if run.result.stopped_early:
                break
        _close_workers(run)


def _release_all(workers: Mapping[str, supervisor.Worker]) -> None:
    for worker in workers.values():
        supervisor.release(worker)


def _start_and_load(run: _Run) -> None:
    plan = run.plan
    if not plan.backends:
        return
    env = dict(os.environ)
    for backend in plan.backends:
        run.workers[backend.name] = supervisor.start_worker(backend.name, env)
    _collect(run, supervisor.wait_replies(run.workers.values(), "hello", "start", plan.timeouts))
    ids = {}
    for backend in plan.backends:
        worker = run.workers[backend.name]
        ids[backend.name] = worker.next_id()
        supervisor.send(worker, {"op": "load", "id": ids[backend.name], "backend": backend.spec.name,
                                 "options": dict(backend.options), "model": plan.model.path,
                                 "plugins": plan.plugin_settings.to_message()}, "load")
    replies = supervisor.wait_replies(run.workers.values(), "ready", "load", plan.timeouts, ids)
    for name, reply in _collect(run, replies).items():
        run.result.load_seconds[name] = reply["seconds"]
        run.reporter.loaded(name, reply["seconds"])


def _close_workers(run: _Run) -> None:
    alive = [w for w in run.workers.values() if w.alive]
    for worker in alive:
        supervisor.send(worker, {"op": "close", "id": worker.next_id()}, "close")
    _collect(run, supervisor.wait_replies(alive, "bye", "close", CLOSE_TIMEOUT_SECONDS))


def _collect(run: _Run, replies: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Record the failures among ``replies``; return the successful ones."""
    ok = {}
    for name, reply in replies.items():
        if isinstance(reply, BackendError):
            if name not in run.result.failures:
                run.result.failures[name] = reply
                run.reporter.backend_failed(reply)
        else:
            ok[name] = reply
    return ok


def _run_iteration(run: _Run, iteration: int, feed: Mapping[str, Any]) -> None:
    plan = run.plan
    wants_digest = bool(plan.backends) and (run.outputs_writer is not None or run.inputs_writer is not None
                                            or any(b.source.digests for b in plan.saved_backends))
    digest = feeds_digest(feed) if wants_digest else None
    if run.inputs_writer is not None:
        run.inputs_writer.add("inputs", iteration, feed, digest)
    with contextlib.ExitStack() as release:
        outputs = _live_outputs(run, iteration, feed, release)
        for saved in plan.saved_backends:
            if iteration < len(saved.source):
                outputs[saved.name] = saved.source.load(iteration)
                _check_digest(run, saved, iteration, digest)
            elif ("missing", saved.name) not in run.warned:
                run.warned.add(("missing", saved.name))
                run.reporter.warning(f"{saved.name} ({saved.path}) holds {len(saved.source)} iteration(s); it is "
                                     f"left out from iteration {iteration} on")
        if run.outputs_writer is not None:
            for backend in plan.backends:
                if backend.name in outputs:
                    run.outputs_writer.add(backend.name, iteration, outputs[backend.name], digest)
        if plan.validate:
            for name, tensors in outputs.items():
                for finding in find_non_finite(name, tensors):
                    run.result.non_finite.append(finding)
                    run.reporter.non_finite(finding)
        for backend, reference in comparison_pairs([n for n in plan.names if n in outputs], plan.reference):
            pair = compare_outputs(backend, reference, iteration, outputs[backend], outputs[reference],
                                   plan.comparison)
            run.result.pairs.append(pair)
            run.reporter.pair_compared(pair)
            if plan.comparison.fail_fast and not pair.passed:
                run.result.stopped_early = True
                break
        outputs.clear()


def _check_digest(run: _Run, saved: Any, iteration: int, digest: str | None) -> None:
    theirs = saved.source.digests[iteration]
    if digest and theirs and theirs != digest and ("digest", saved.name) not in run.warned:
        run.warned.add(("digest", saved.name))
        run.reporter.warning(f"the inputs of iteration {iteration} differ from those {saved.name} was run with "
                             f"({saved.path}); compare like with like (same --seed, or --load-inputs)")


def _live_outputs(run: _Run, iteration: int, feed: Mapping[str, Any],
                  release: contextlib.ExitStack) -> dict[str, dict[str, Any]]:
    """Each live backend's outputs for ``feed``, as views of shared memory valid until ``release`` closes."""
    alive = {name: w for name, w in run.workers.items() if w.alive}
    if not alive:
        return {}
    input_segment, descriptors = shm.write_tensors(f"{run.prefix}in{iteration}", feed)
    release.callback(shm.unlink, input_segment.name)
    release.callback(input_segment.close)
    ids, out_segments = {}, {}
    for index, (name, worker) in enumerate(run.workers.items()):
        if name in alive:
            ids[name] = worker.next_id()
            out_segments[name] = f"{run.prefix}out{iteration}-{index}"
            release.callback(shm.unlink, out_segments[name])
            supervisor.send(worker, {"op": "infer", "id": ids[name], "inputs": descriptors,
                                     "out_segment": out_segments[name]}, "infer")
    replies = _collect(run, supervisor.wait_replies(alive.values(), "result", "infer", run.plan.timeouts, ids))
    outputs = {}
    for name in run.workers:  # command-line order
        if name in replies:
            segment = shm.Segment.attach(out_segments[name])
            release.callback(segment.close)
            outputs[name] = shm.read_tensors(replies[name]["outputs"], {segment.name: segment})
            run.result.infer_seconds.setdefault(name, []).append(replies[name]["seconds"])
    return outputs
