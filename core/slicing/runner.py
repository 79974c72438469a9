"""One iteration of a sliced run: slice after slice, every backend that runs sliced loads the slice's model in its
worker and runs it fed by its own values of the tensors crossing the cut (descriptors of its own earlier outputs,
which never leave shared memory), then the slice's tensors are compared in every pair and freed. Backends that
run whole run once, with the first slice, and their tensors are compared and freed slice by slice too.

Memory: a tensor's pages are given back (``shm.free_range``) once it is compared and no later slice reads it; a
tensor crossing a cut is kept until the last slice that reads it has run; a segment is removed once all its
tensors are freed. So a backend holds one slice's tensors plus those waiting for a later reader.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cmpx.errors import BackendFailed
from cmpx.transport.live import Collect, HeldOutputs, LiveBackends, OnWait, outputs

if TYPE_CHECKING:
    from cmpx.comparison.iteration import IterationComparer, OpenIteration
    from cmpx.plan import RunPlan
    from cmpx.reports.reporter import Reporter
    from cmpx.outcome.results import RunResult
    from cmpx.slicing.planning import SlicingPlan
    from cmpx.transport.sources import TensorSource


class SlicedRunner:
    """Runs a sliced run's iterations on its live ``backends`` (loaded with their first slice), comparing through
    ``comparer`` and recording slice timings into ``result``; ``collect(replies)`` records the failures among
    replies and returns the answers."""

    def __init__(self, backends: LiveBackends, plan: RunPlan, slicing: SlicingPlan, comparer: IterationComparer,
                 reporter: Reporter, result: RunResult, collect: Collect):
        self.backends = backends
        self.plan = plan
        self.slicing = slicing
        self.comparer = comparer
        self.reporter = reporter
        self.result = result
        self.collect = collect

    def run(self, iteration: int, feed: Mapping[str, Any], digest: str | None) -> None:
        """Run and compare iteration ``iteration``, fed ``feed``, slice by slice."""
        plan, slicing, backends = self.plan, self.slicing, self.backends
        alive = backends.alive()
        inputs = {d["name"]: d for d in backends.write_inputs(feed, "p0")}
        held = {name: HeldOutputs() for name in alive}
        sources: list[TensorSource] = []
        state = self.comparer.open(iteration, digest, {}, live=alive)
        state.sliced = True
        failed: set[str] = set()
        seconds: dict[str, float] = dict.fromkeys(alive, 0.0)
        warm_up = plan.warm_up if iteration == 0 else 0  # --warm-up: untimed runs first
        # the backends that run the whole model run it once, with the first slice
        whole = backends.infer({name: list(inputs.values()) for name in alive if name not in slicing.models}, "p0",
                               warm_up=warm_up)
        try:
            for number, targets in enumerate(slicing.targets):
                started = time.perf_counter()
                label = f"iteration {iteration}, slice {number + 1}/{slicing.count}"
                loaded = self._load(number, [n for n in alive if n in slicing.models and n not in failed],
                                    self._progress(label), failed)
                feeds = {}
                for name in loaded:
                    piece = slicing.models[name].slices[number]
                    missing = [t for t in piece.inputs if t not in held[name].descriptors]
                    if missing:  # an earlier slice did not return it: a tensor this backend does not expose
                        failed.add(name)
                        self.collect({name: BackendFailed(name, "infer", (
                            f"slice {number + 1}/{slicing.count} reads {missing[0]}, which the earlier slices did "
                            "not return (a tensor this backend does not expose); run it unsliced, with a larger "
                            "--memory-budget"))})
                        continue
                    feeds[name] = [inputs[f] for f in piece.feeds] + [held[name].descriptors[t] for t in piece.inputs]
                ids = backends.infer(feeds, f"s{number}", warm_up=warm_up,
                                     out_bytes={name: slicing.models[name].out_bytes[number] for name in feeds})
                waiting = dict(ids, **(whole if number == 0 else {}))
                replies = backends.results(waiting, on_wait=self._progress(label))
                answers = self.collect(replies)
                failed.update(name for name in waiting if name not in answers)
                for name, reply in answers.items():
                    if name in failed:
                        continue
                    seconds[name] += reply["seconds"]
                    held[name].add(reply["outputs"])
                    model = slicing.models.get(name)  # a slice also returns tensors later slices read: not compared
                    source = outputs(reply, None if model is None else model.compared)
                    sources.append(source)
                    state.add(name, source, plan.output_map)
                stop = self.comparer.compare_tensors(state, targets)
                freed = _free(slicing, number, held, state, failed)
                elapsed = time.perf_counter() - started
                self.result.slices.append({"iteration": iteration, "slice": number, "seconds": elapsed,
                                           "tensors": len(targets), "freed": freed})
                self.reporter.slice_ran(iteration, number, slicing.count, elapsed)
                if stop:
                    break
            else:
                self.comparer.compare_tensors(state)  # what no slice compared: a saved run's other tensors...
            for name in alive:
                if name not in failed:
                    self.result.add_timing(name, seconds[name])
            self.comparer.close(state, failed)
        finally:
            for source in sources:
                source.release_all()
            for tensors in held.values():
                tensors.free_all()

    def _load(self, number: int, names: list[str], on_wait: OnWait, failed: set[str]) -> list[str]:
        """Load slice ``number`` in the workers of ``names``; those that loaded it."""
        replies = self.collect(self.backends.load({name: (self.slicing.models[name].files[number], ())
                                                   for name in names}, on_wait=on_wait))
        failed.update(name for name in names if name not in replies)
        return [name for name in names if name in replies]

    def _progress(self, phase: str) -> OnWait:
        return lambda pending, elapsed, status: self.reporter.waiting(phase, pending, elapsed, status)


def _free(slicing: SlicingPlan, number: int, held: dict[str, HeldOutputs], state: OpenIteration,
          failed: set[str]) -> list[str]:
    """Free each backend's tensors that are compared (or never will be) and that no later slice reads; return the
    tensors crossing a cut that were freed now (their last reader was this slice, or they were compared now)."""
    crossed: dict[str, None] = {}
    for name, tensors in held.items():
        model = slicing.models.get(name)
        later = set() if model is None else {t for piece in model.slices[number + 1:] for t in piece.inputs}
        crossing = set() if model is None else {t for piece in model.slices for t in piece.inputs}
        own = {value: key for key, value in state.names.get(name, {}).items()}
        for tensor in list(tensors.descriptors):
            done = name in failed or tensor not in own or own[tensor] in state.compared
            if done and tensor not in later:
                tensors.free(tensor)
                if tensor in crossing:
                    crossed[tensor] = None
    return list(crossed)
