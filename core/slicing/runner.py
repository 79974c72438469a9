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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cmpx.transport import shm, supervisor
from cmpx.transport.sources import TensorSource

UNUSED_TAIL = 1 << 62  # "to the end of the segment" for free_range

if TYPE_CHECKING:
    from cmpx.comparison.iteration import OpenIteration
    from cmpx.slicing.planning import SlicingPlan


@dataclass
class _Held:
    """One backend's tensors of this iteration still in shared memory, by name, and how many live in each
    segment."""

    descriptors: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_segment: dict[str, int] = field(default_factory=dict)

    def add(self, descriptors: list[dict[str, Any]]) -> None:
        """Hold a slice's outputs, and free what their segments reserved beyond them (a worker's output chunks grow
        ahead of need)."""
        ends: dict[str, int] = {}
        for descriptor in descriptors:
            segment = descriptor["segment"]
            self.descriptors[descriptor["name"]] = descriptor
            self.per_segment[segment] = self.per_segment.get(segment, 0) + 1
            ends[segment] = max(ends.get(segment, 0), int(descriptor["offset"]) + shm.descriptor_bytes(descriptor))
        for segment, end in ends.items():
            shm.free_range(segment, end, UNUSED_TAIL)

    def free(self, name: str) -> None:
        descriptor = self.descriptors.pop(name, None)
        if descriptor is None:
            return
        segment = descriptor["segment"]
        self.per_segment[segment] -= 1
        if self.per_segment[segment] == 0:
            del self.per_segment[segment]
            shm.discard(segment)
        else:
            shm.free_range(segment, int(descriptor["offset"]), shm.descriptor_bytes(descriptor))

    def free_all(self) -> None:
        for segment in self.per_segment:
            shm.discard(segment)
        self.descriptors.clear()
        self.per_segment.clear()


def run_sliced_iteration(run: Any, iteration: int, feed: Mapping[str, Any], digest: str | None,
                         collect: Any, progress: Any) -> None:
    """Run and compare iteration ``iteration`` of ``run`` (cmpx.execution's run state) slice by slice.
    ``collect(replies)`` records failures and returns the successful replies; ``progress(phase)`` makes the
    waiting callback."""
    plan = run.plan
    slicing: SlicingPlan = plan.slicing
    order = list(run.workers)
    alive = [name for name in order if run.workers[name].alive]
    inputs = {d["name"]: d for d in run.inputs.write(f"{run.prefix}in0", feed)}
    held = {name: _Held() for name in alive}
    sources: list[TensorSource] = []
    state = run.comparer.open(iteration, digest, {}, live=alive)
    state.sliced = True
    failed: set[str] = set()
    seconds: dict[str, float] = dict.fromkeys(alive, 0.0)
    whole = {}
    warm = {"warm_up": plan.warm_up} if iteration == 0 and plan.warm_up else {}  # --warm-up: untimed runs first
    for name in alive:
        if name not in slicing.models:  # runs the whole model once, with the first slice
            worker = run.workers[name]
            whole[name] = worker.next_id()
            supervisor.send(worker, {"op": "infer", "id": whole[name], "inputs": list(inputs.values()),
                                     "out_prefix": f"{run.prefix}o{order.index(name)}p0", **warm}, "infer")
    try:
        for number, targets in enumerate(slicing.targets):
            started = time.perf_counter()
            label = f"iteration {iteration}, slice {number + 1}/{slicing.count}"
            ids = _load(run, slicing, number, [n for n in alive if n in slicing.models and n not in failed],
                        collect, progress(label), failed)
            for name in ids:
                piece = slicing.models[name].slices[number]
                feeds = [inputs[f] for f in piece.feeds] + [held[name].descriptors[t] for t in piece.inputs]
                supervisor.send(run.workers[name], {"op": "infer", "id": ids[name], "inputs": feeds,
                                                    "out_prefix": f"{run.prefix}o{order.index(name)}s{number}",
                                                    "out_bytes": slicing.models[name].out_bytes[number], **warm},
                              "infer")
            waiting = dict(ids, **(whole if number == 0 else {}))
            replies = supervisor.wait_replies([run.workers[n] for n in waiting], "result", "infer", plan.timeouts,
                                              waiting, on_wait=progress(label))
            failed.update(name for name in waiting if name not in collect(replies))
            for name, reply in replies.items():
                if name in failed:
                    continue
                seconds[name] += reply["seconds"]
                held[name].add(reply["outputs"])
                model = slicing.models.get(name)  # a slice also returns tensors later slices read: not compared
                source = TensorSource(descriptors={d["name"]: d for d in reply["outputs"]
                                                   if model is None or d["name"] in model.compared})
                sources.append(source)
                state.add(name, source, plan.output_map)
            stop = run.comparer.compare_tensors(state, targets)
            freed = _free(slicing, number, held, state, failed)
            elapsed = time.perf_counter() - started
            run.result.slices.append({"iteration": iteration, "slice": number, "seconds": elapsed,
                                      "tensors": len(targets), "freed": freed})
            run.reporter.slice_ran(iteration, number, slicing.count, elapsed)
            if stop:
                break
        else:
            run.comparer.compare_tensors(state)  # what no slice compared: a saved run's other tensors...
        for name in alive:
            if name not in failed:
                run.result.add_timing(name, seconds[name])
        run.comparer.close(state, failed)
    finally:
        for source in sources:
            source.release_all()
        for tensors in held.values():
            tensors.free_all()


def _load(run: Any, slicing: SlicingPlan, number: int, names: list[str], collect: Any, on_wait: Any,
          failed: set[str]) -> dict[str, int]:
    """Load slice ``number`` in the workers of ``names``; the request id of each one's inference to come."""
    ids = {}
    for name in names:
        worker = run.workers[name]
        ids[name] = worker.next_id()
        backend = next(b for b in run.plan.backends if b.name == name)
        supervisor.send(worker, supervisor.load_request("load", ids[name], backend,
                                                        slicing.models[name].files[number], ()), "load")
    replies = collect(supervisor.wait_replies([run.workers[n] for n in ids], "ready", "load", run.plan.timeouts,
                                              ids, on_wait=on_wait))
    failed.update(name for name in ids if name not in replies)
    return {name: run.workers[name].next_id() for name in ids if name in replies}


def _free(slicing: SlicingPlan, number: int, held: dict[str, _Held], state: OpenIteration,
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
