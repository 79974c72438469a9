"""Execute a run's plan: load every backend in parallel, feed every iteration through shared memory, add saved
runs, compare each iteration's outputs as they arrive, save what was asked, and clean up on every exit path."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cmpx.comparison.iteration import IterationComparer
from cmpx.errors import BackendFailed, UsageError
from cmpx.loaders.feeds import feeds_digest
from cmpx.loaders.prefetch import Prefetcher
from cmpx.memory import available_memory
from cmpx.plan import RunPlan
from cmpx.reports.reporter import Reporter
from cmpx.outcome.results import RunResult
from cmpx.outcome.runtimes import labels
from cmpx.transport.foreign import runtime_from_hello
from cmpx.saved.cmpx_format import RunWriter
from cmpx.saved.polygraphy_writer import run_writer
from cmpx.transport.live import LiveBackends, OnWait, Replies, Reply
from cmpx.transport.sources import TensorSource
from cmpx.transport.supervisor import Worker

if TYPE_CHECKING:
    from cmpx.local_error.keeper import ReferenceKeeper


@dataclass
class _Run:
    plan: RunPlan
    reporter: Reporter
    result: RunResult
    backends: LiveBackends  # the live backends' workers and the run's segments
    inputs_writer: RunWriter | None = None
    outputs_writer: RunWriter | None = None
    comparer: IterationComparer | None = None
    keeper: ReferenceKeeper | None = None  # --local-error


def execute(plan: RunPlan, feeds: Iterator[Mapping[str, Any]] | None, reporter: Reporter,
            workers: Mapping[str, Worker], result: RunResult, prefix: str) -> RunResult:
    """Run ``plan`` over ``feeds`` (one mapping per iteration; None when only saved runs are compared) on
    ``workers`` (one per live backend, just assigned), recording into ``result`` as it goes: an interrupted run
    keeps everything that finished. Segments are named with the run's ``prefix``. Closes the workers when done,
    but does not release them (their owner does).

    Never leaves a segment or an open file behind.
    """
    run = _Run(plan, reporter, result, LiveBackends(plan.backends, workers, prefix, plan.timeouts))
    for _, error in plan.dropped:  # their model transform failed: reported, never run
        _collect(run, {error.backend: error})
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(run.backends.free_segments)
        model_path = plan.model.path if plan.model else None
        if plan.save_inputs:
            run.inputs_writer = run_writer(plan.save_inputs, "inputs", model_path, "--save-inputs")
            cleanup.push(_closer(run.inputs_writer))
        if plan.save_outputs:
            run.outputs_writer = run_writer(plan.save_outputs, "outputs", model_path, "--save-outputs")
            cleanup.push(_closer(run.outputs_writer))
        if plan.local_error_dir is not None:
            from cmpx.local_error.keeper import ReferenceKeeper

            run.keeper = ReferenceKeeper(plan)
            cleanup.callback(run.keeper.close)
        run.comparer = IterationComparer(plan, reporter, result, run.outputs_writer, run.keeper)
        _start_and_load(run)
        if run.outputs_writer is not None:
            _describe_sources(run, run.outputs_writer)
        _iterate(run, feeds)
        if run.keeper is not None:  # each node's own error, in the workers still loaded, before they close
            from cmpx.local_error.measure import measure_local_errors

            measure_local_errors(plan, run.backends, run.keeper, reporter, result)
        _collect(run, run.backends.close_workers())
    return result


def _closer(writer: RunWriter):
    """Close a saved run when the execution ends, marking it complete only if nothing went wrong."""
    def close(exc_type: Any, exc: Any, traceback: Any) -> bool:
        writer.close(complete=exc_type is None)
        return False

    return close


def _iterate(run: _Run, feeds: Iterator[Mapping[str, Any]] | None) -> None:
    """Iterations as a two-stage pipeline: while the coordinator compares iteration i, the workers already run
    iteration i+1 when its feed is ready and memory allows, each stage using its own half of double-buffered
    segments. Iteration i is compared and reported as soon as its outputs are in: never held back waiting for
    the loader to make feed i+1."""
    plan = run.plan
    prefetch = Prefetcher(feeds if feeds is not None else itertools.repeat({}), plan.iterations)
    comparer = run.comparer
    assert comparer is not None, "the comparer is made before the first iteration"
    try:
        if plan.slicing is not None:
            _iterate_sliced(run, prefetch)
            return
        inflight = _next_dispatch(run, prefetch, 0)
        while inflight is not None:
            sources = _receive(run, inflight)
            following, bad_feed = None, None
            if prefetch.ready() and _overlap_fits(sources):
                try:
                    following = _next_dispatch(run, prefetch, inflight.iteration + 1)
                except UsageError as exc:  # the next feed is bad: this iteration, its outputs in, still counts
                    bad_feed = exc
            try:
                comparer.compare(inflight.iteration, inflight.digest, sources)
            finally:
                for source in sources.values():
                    source.release_all()
            run.result.iterations = inflight.iteration + 1
            if bad_feed is not None:
                raise bad_feed
            if run.result.stopped_early:
                if following is not None:
                    for source in _receive(run, following).values():  # keep the protocol in step, then drop
                        source.release_all()
                return
            inflight = following or _next_dispatch(run, prefetch, inflight.iteration + 1)
    finally:
        prefetch.close()


def _iterate_sliced(run: _Run, prefetch: Prefetcher) -> None:
    """Iterations one after another, each slice by slice (cmpx.slicing.runner)."""
    from cmpx.slicing.runner import SlicedRunner

    assert run.comparer is not None and run.plan.slicing is not None
    runner = SlicedRunner(run.backends, run.plan, run.plan.slicing, run.comparer, run.reporter, run.result,
                          lambda replies: _collect(run, replies))
    for iteration in itertools.count():
        if run.result.stopped_early or not run.backends.alive():
            return
        feed = prefetch.take()
        if feed is None:
            return
        digest = _digest(run, iteration, feed)
        runner.run(iteration, feed, digest)
        run.result.iterations = iteration + 1


def _next_dispatch(run: _Run, prefetch: Prefetcher, iteration: int) -> _Inflight | None:
    """Hand iteration ``iteration`` to the workers, if there is a feed for it and a live backend to run it."""
    if run.result.stopped_early or (run.plan.backends and not run.backends.alive()):
        return None
    feed = prefetch.take()
    return _dispatch(run, iteration, feed) if feed is not None else None


def _overlap_fits(sources: Mapping[str, TensorSource]) -> bool:
    """Overlap only if two iterations' tensors fit comfortably in the memory available now."""
    in_use = sum(source.nbytes for source in sources.values())
    return 4 * in_use < available_memory()


def _start_and_load(run: _Run) -> None:
    """Start and load every backend, then announce the run: its header names each backend with what its worker
    said (its framework's version, its Python), so the loads are reported after it (also when interrupted while
    loading). A failure is reported to the reporters when it happens, not held back until the slowest backend has
    loaded (the text report holds its lines until the header, and names the backend on its progress line)."""
    try:
        if run.plan.backends:
            _start(run)
            _load(run)
    finally:
        run.reporter.started(run.result.runtimes)
        for backend in run.plan.backends:
            if backend.name in run.result.load_seconds:
                run.reporter.loaded(backend.name, run.result.load_seconds[backend.name])


def _start(run: _Run) -> None:
    hellos = _collect(run, run.backends.start(on_wait=_progress(run, "starting")))
    for backend in run.plan.backends:
        if backend.name in hellos:
            worker = run.backends.workers[backend.name]
            run.result.runtimes[backend.name] = runtime_from_hello(hellos[backend.name], backend.python is not None,
                                                                   worker.code_dir)


def _load(run: _Run) -> None:
    plan = run.plan
    models: dict[str, tuple[str, Sequence[str]]] = {}
    for backend in plan.backends:
        mark: Sequence[str] = plan.mark if backend.spec.supports_marking else ()
        model = backend.model_path or plan.model_file or (plan.model.path if plan.model else None)
        assert model is not None, "a run with live backends has a model"
        if plan.slicing is not None and backend.name in plan.slicing.models:  # sliced: its first slice
            model, mark = plan.slicing.models[backend.name].files[0], ()
        models[backend.name] = (model, mark)
    replies = run.backends.load(models, on_wait=_progress(run, "loading"))
    for name, reply in _collect(run, replies).items():
        run.result.load_seconds[name] = reply["seconds"]
        runtime = run.result.runtimes.get(name)
        if runtime is not None:
            runtime.framework_version = reply.get("framework_version")


def _describe_sources(run: _Run, writer: RunWriter) -> None:
    """Saved outputs say which framework version, under which Python, made them."""
    shown = labels(run.plan.backends, run.result.runtimes)
    for name, runtime in run.result.runtimes.items():
        writer.describe(name, {"label": shown[name], "framework_version": runtime.framework_version,
                               "python": runtime.python, "python_version": runtime.python_version,
                               "environment": runtime.place})


def _progress(run: _Run, phase: str) -> OnWait:
    return lambda pending, elapsed, status: run.reporter.waiting(phase, pending, elapsed, status)


def _collect(run: _Run, replies: Replies) -> dict[str, Reply]:
    """Record the failures among ``replies``; return the successful ones."""
    ok = {}
    for name, reply in replies.items():
        if isinstance(reply, BackendFailed):
            if name not in run.result.failures:
                run.result.failures[name] = reply
                run.reporter.backend_failed(reply)
        else:
            ok[name] = reply
    return ok


@dataclass
class _Inflight:
    """An iteration handed to the workers: its number, the digest of its inputs and the request ids."""

    iteration: int
    digest: str | None
    ids: dict[str, int] = field(default_factory=dict)


def _dispatch(run: _Run, iteration: int, feed: Mapping[str, Any]) -> _Inflight:
    """Save the inputs if asked, write them into this iteration's half of the input buffers and send every
    live worker its infer request."""
    plan = run.plan
    digest = _digest(run, iteration, feed)
    inflight = _Inflight(iteration, digest)
    alive = run.backends.alive()
    if not alive:
        return inflight
    key = f"p{iteration % 2}"  # this iteration's half of the double-buffered segments
    descriptors = run.backends.write_inputs(feed, key)
    del feed
    inflight.ids = run.backends.infer(dict.fromkeys(alive, descriptors), key,
                                      warm_up=plan.warm_up if iteration == 0 else 0)
    return inflight


def _digest(run: _Run, iteration: int, feed: Mapping[str, Any]) -> str | None:
    """The digest of an iteration's inputs where something records it; save them if asked, keep them for
    --local-error."""
    plan = run.plan
    wants_digest = bool(plan.backends) and (run.outputs_writer is not None or run.inputs_writer is not None
                                            or any(b.source.digests for b in plan.saved_backends))
    digest = feeds_digest(feed) if wants_digest else None
    if run.inputs_writer is not None:
        run.inputs_writer.add("inputs", iteration, feed, digest)
    if run.keeper is not None:
        run.keeper.feed(iteration, feed)
    return digest


def _receive(run: _Run, inflight: _Inflight) -> dict[str, TensorSource]:
    """Each live backend's outputs, left in shared memory until loaded."""
    replies = _collect(run, run.backends.results(inflight.ids,
                                                 on_wait=_progress(run, f"iteration {inflight.iteration}")))
    sources = run.backends.iteration_outputs(replies)
    for name in sources:  # command-line order
        run.result.add_timing(name, replies[name]["seconds"])
    return sources
