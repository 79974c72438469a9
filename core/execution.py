"""Execute a run's plan: load every backend in parallel, feed every iteration through shared memory, add saved
runs, compare each iteration's outputs as they arrive, save what was asked, and clean up on every exit path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cmpx.comparison.compare import compare_tensor
from cmpx.comparison.divergence import first_divergence
from cmpx.comparison.pairing import comparison_pairs
from cmpx.comparison.validation import find_non_finite
from cmpx.dtypes import numpy_dtype
from cmpx.errors import BackendFailed
from cmpx.loaders.feeds import feeds_digest
from cmpx.plan import RunPlan
from cmpx.reports.reporter import Reporter
from cmpx.results import PairResult, RunResult
from cmpx.saved.cmpx_format import RunWriter
from cmpx.transport import shm, supervisor

CLOSE_TIMEOUT_SECONDS = 10.0
START_TIMEOUT_SECONDS = 60.0  # from spawning a worker to its hello, or --timeout where that is longer
MAPPING_BUDGET = 768 << 20  # an iteration's outputs up to this size stay mapped between iterations


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
    inputs: shm.ReusedSegments = field(default_factory=lambda: shm.ReusedSegments())
    mappings: shm.MappingCache = field(default_factory=lambda: shm.MappingCache(MAPPING_BUDGET))


def execute(plan: RunPlan, feeds: Iterator[Mapping[str, Any]] | None, reporter: Reporter,
            workers: Mapping[str, supervisor.Worker], result: RunResult) -> RunResult:
    """Run ``plan`` over ``feeds`` (one mapping per iteration; None when only saved runs are compared) on
    ``workers`` (one per live backend, just assigned), recording into ``result`` as it goes: an interrupted run
    keeps everything that finished. Closes the workers when done, but does not release them (their owner does).

    Never leaves a segment or an open file behind.
    """
    shm.sweep_orphans()
    run = _Run(plan, reporter, result, shm.new_run_prefix(), dict(workers))
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shm.sweep, run.prefix)
        cleanup.callback(run.inputs.close)
        cleanup.callback(run.mappings.close)
        model_path = plan.model.path if plan.model else None
        if plan.save_inputs:
            run.inputs_writer = RunWriter(plan.save_inputs, "inputs", model_path)
            cleanup.callback(run.inputs_writer.close)
        if plan.save_outputs:
            run.outputs_writer = RunWriter(plan.save_outputs, "outputs", model_path)
            cleanup.callback(run.outputs_writer.close)
        _start_and_load(run)
        _iterate(run, feeds)
        _close_workers(run)
    return result


def _iterate(run: _Run, feeds: Iterator[Mapping[str, Any]] | None) -> None:
    """Iterations as a two-stage pipeline: while the coordinator compares iteration i, the workers already run
    iteration i+1 (when memory allows), each stage using its own half of double-buffered segments."""
    plan = run.plan
    limit = plan.iterations

    def next_feed(iteration: int) -> Mapping[str, Any] | None:
        if limit is not None and iteration >= limit or run.result.stopped_early:
            return None
        if plan.backends and not any(w.alive for w in run.workers.values()):
            return None
        return next(feeds, None) if feeds is not None else {}

    feed = next_feed(0)
    inflight = _dispatch(run, 0, feed) if feed is not None else None
    del feed  # in shared memory now: let the loader's arrays go
    while inflight is not None:
        sources = _receive(run, inflight)
        following = None
        upcoming = next_feed(inflight.iteration + 1)
        if upcoming is not None and _overlap_fits(sources):
            following = _dispatch(run, inflight.iteration + 1, upcoming)
            upcoming = None
        try:
            _compare_iteration(run, inflight, sources)
        finally:
            for source in sources.values():
                source.release_all()
        run.result.iterations = inflight.iteration + 1
        if run.result.stopped_early:
            if following is not None:
                for source in _receive(run, following).values():  # keep the protocol in step, then drop
                    source.release_all()
            return
        if following is None and upcoming is not None:
            following = _dispatch(run, inflight.iteration + 1, upcoming)
            upcoming = None
        inflight = following


def _overlap_fits(sources: Mapping[str, TensorSource]) -> bool:
    """Overlap only if two iterations' tensors fit comfortably in the memory available now."""
    in_use = sum(source.nbytes for source in sources.values())
    return 4 * in_use < _available_memory()


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _start_and_load(run: _Run) -> None:
    plan = run.plan
    if not plan.backends:
        return
    # Starting (a fresh interpreter saying hello) is not a load or an inference: it has its own limit, so that a
    # short --timeout meant for a hanging load does not fail an interpreter that is slow to start on a busy machine.
    start_limits = {name: max(seconds, START_TIMEOUT_SECONDS) for name, seconds in plan.timeouts.items()}
    _collect(run, supervisor.wait_replies(run.workers.values(), "hello", "start", start_limits,
                                          on_wait=_progress(run, "starting")))
    ids = {}
    for backend in plan.backends:
        worker = run.workers[backend.name]
        ids[backend.name] = worker.next_id()
        mark = plan.mark if backend.spec.supports_marking else ()
        supervisor.send(worker, supervisor.load_request("load", ids[backend.name], backend, backend.model_path or
                                                        plan.model.path, mark), "load")
    replies = supervisor.wait_replies(run.workers.values(), "ready", "load", plan.timeouts, ids,
                                      on_wait=_progress(run, "loading"))
    for name, reply in _collect(run, replies).items():
        run.result.load_seconds[name] = reply["seconds"]
        run.reporter.loaded(name, reply["seconds"])


def _progress(run: _Run, phase: str):
    return lambda pending, elapsed, status: run.reporter.waiting(phase, pending, elapsed, status)


def _close_workers(run: _Run) -> None:
    alive = [w for w in run.workers.values() if w.alive]
    for worker in alive:
        supervisor.send(worker, {"op": "close", "id": worker.next_id()}, "close")
    _collect(run, supervisor.wait_replies(alive, "bye", "close", CLOSE_TIMEOUT_SECONDS))


def _collect(run: _Run, replies: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
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
    wants_digest = bool(plan.backends) and (run.outputs_writer is not None or run.inputs_writer is not None
                                            or any(b.source.digests for b in plan.saved_backends))
    digest = feeds_digest(feed) if wants_digest else None
    if run.inputs_writer is not None:
        run.inputs_writer.add("inputs", iteration, feed, digest)
    inflight = _Inflight(iteration, digest)
    alive = {name: w for name, w in run.workers.items() if w.alive}
    if not alive:
        return inflight
    parity = iteration % 2
    descriptors = run.inputs.write(f"{run.prefix}in{parity}", feed)
    del feed
    for index, (name, worker) in enumerate(run.workers.items()):
        if name in alive:
            inflight.ids[name] = worker.next_id()
            supervisor.send(worker, {"op": "infer", "id": inflight.ids[name], "inputs": descriptors,
                                     "out_prefix": f"{run.prefix}o{index}p{parity}"}, "infer")
    return inflight


def _receive(run: _Run, inflight: _Inflight) -> dict[str, TensorSource]:
    """Each live backend's outputs, left in shared memory until loaded."""
    waiting = [run.workers[name] for name in inflight.ids]
    replies = _collect(run, supervisor.wait_replies(waiting, "result", "infer", run.plan.timeouts, inflight.ids,
                                                    on_wait=_progress(run, f"iteration {inflight.iteration}")))
    sources = {}
    for name in run.workers:  # command-line order
        if name in replies:
            sources[name] = TensorSource(descriptors={d["name"]: d for d in replies[name]["outputs"]})
            run.result.add_timing(name, replies[name]["seconds"])
    if sum(source.nbytes for source in sources.values()) <= run.mappings.budget:
        for source in sources.values():  # small enough to keep mapped: the next iterations map nothing
            source.mappings = run.mappings
    return sources


def _compare_iteration(run: _Run, inflight: _Inflight, sources: dict[str, TensorSource]) -> None:
    plan, iteration = run.plan, inflight.iteration
    for saved in plan.saved_backends:
        if iteration < len(saved.source):
            sources[saved.name] = TensorSource(saved.source.load(iteration))
            _check_digest(run, saved, iteration, inflight.digest)
        elif ("missing", saved.name) not in run.warned:
            run.warned.add(("missing", saved.name))
            run.reporter.warning(f"{saved.name} ({saved.path}) holds {len(saved.source)} iteration(s); it is "
                                 f"left out from iteration {iteration} on")
    order = [name for name in plan.names if name in sources]
    pairs = [PairResult(b, r, iteration) for b, r in comparison_pairs(order, plan.reference)]
    live = {b.name for b in plan.backends}
    for tensor in dict.fromkeys(t for name in order for t in sources[name].names):
        arrays = {name: sources[name].load(tensor) for name in order if tensor in sources[name].names}
        for name, array in arrays.items():
            if name in live and run.outputs_writer is not None:
                run.outputs_writer.tensor(name, iteration, tensor, array)
            if plan.validate:
                for finding in find_non_finite(name, {tensor: array}):
                    run.result.non_finite.append(finding)
                    run.reporter.non_finite(finding)
        stop = compare_tensor(pairs, tensor, arrays, plan.comparison, plan.required_outputs)
        del arrays
        for name in order:
            sources[name].release(tensor)
        if stop:
            run.result.stopped_early = True
            break
    if run.outputs_writer is not None:
        run.outputs_writer.finish_iteration(iteration, inflight.digest)
    for pair in pairs:
        if plan.graph is not None:
            pair.first_divergence = first_divergence(plan.graph, {o.output: o for o in pair.outputs})
        run.result.add_pair(pair)
        run.reporter.pair_compared(pair)
        if plan.comparison.samples:  # the reporters drew what they wanted; the run keeps results, not samples
            pair.outputs[:] = [output.without_sample() for output in pair.outputs]
            if pair.first_divergence is not None:
                pair.first_divergence = replace(pair.first_divergence,
                                                result=pair.first_divergence.result.without_sample())


class TensorSource:
    """One backend's tensors of one iteration, loaded one at a time. Saved ones are memory-mapped arrays;
    live ones are shared-memory segments written by the worker, mapped when asked for and unmapped as soon as
    they are released, so the coordinator holds only the tensors being compared. The segments stay for the
    worker to reuse two iterations later; the run's sweep removes them at the end."""

    def __init__(self, arrays: Mapping[str, Any] | None = None,
                 descriptors: Mapping[str, Mapping[str, Any]] | None = None, mappings: shm.MappingCache | None = None):
        self._arrays = dict(arrays or {})
        self._descriptors = dict(descriptors or {})
        self._attached: dict[str, shm.Segment] = {}
        self.mappings = mappings  # keeps small iterations' segments mapped for the next time; None: unmap
        self.names = list(self._arrays) or list(self._descriptors)

    def load(self, name: str) -> Any:
        if name in self._arrays:
            return self._arrays[name]
        descriptor = self._descriptors[name]
        segment = self.mappings.get(descriptor["segment"]) if self.mappings else shm.Segment.attach(
            descriptor["segment"])
        self._attached[name] = segment
        return shm.read_tensors([descriptor], {segment.name: segment})[name]

    def release(self, name: str) -> None:
        self._arrays.pop(name, None)
        segment = self._attached.pop(name, None)
        if segment is not None:
            if self.mappings is not None:
                self.mappings.put(segment)
            else:
                segment.close()

    def release_all(self) -> None:
        for name in list(self._attached):
            self.release(name)
        self._arrays.clear()

    @property
    def nbytes(self) -> int:
        import numpy as np

        return sum(int(np.prod(d["shape"], dtype=np.int64)) * numpy_dtype(d["dtype"]).itemsize
                   for d in self._descriptors.values())


def _check_digest(run: _Run, saved: Any, iteration: int, digest: str | None) -> None:
    theirs = saved.source.digests[iteration]
    if digest and theirs and theirs != digest and ("digest", saved.name) not in run.warned:
        run.warned.add(("digest", saved.name))
        run.reporter.warning(f"the inputs of iteration {iteration} differ from those {saved.name} was run with "
                             f"({saved.path}); compare like with like (same --seed, or --load-inputs)")
