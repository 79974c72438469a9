"""The live backends of one run, as the coordinator talks to them: the one place that builds their ``load``,
``infer`` and ``close`` requests (the message types of cmpx.transport.messages), names the run's shared-memory
segments, waits for the answers within the run's limits, turns ``result`` answers into tensor sources, and frees
the segments. The plain run (cmpx.lifecycle.execution), a sliced run (cmpx.slicing.runner), --local-error
(cmpx.local_error.measure) and the test helpers' kept workers all go through it.

Segment names, all under the run's prefix (cmpx.transport.runspace): the inputs the coordinator writes are
``<prefix>in<key>``, the outputs of the run's i-th backend ``<prefix>o<i><key>`` (the worker adds ``-<chunk>``,
``w`` for --warm-up's); ``key`` says which of the run's buffers: ``p0`` and ``p1`` the two halves of a plain run's
double-buffered iterations, ``s<n>`` a sliced run's slice n, ``l`` --local-error's subgraphs. The two kinds never
collide (``in...`` and ``o...``), nor do two backends' outputs.

Waiting is supervisor.wait_replies: a backend that crashes, errs or runs past its limit answers with its
BackendFailed (name, phase, how it died), and the others are still waited for.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cmpx.errors import BackendFailed
from cmpx.transport import runspace, shm, supervisor
from cmpx.transport.arena import MappingCache, ReusedSegments
from cmpx.transport.messages import Close, Infer, TensorDescriptor
from cmpx.transport.sources import TensorSource
from cmpx.transport.supervisor import Worker

if TYPE_CHECKING:
    import numpy as np

    from cmpx.plan import BackendPlan

START_TIMEOUT_SECONDS = 60.0  # from spawning a worker to its hello, or --timeout where that is longer
CLOSE_TIMEOUT_SECONDS = 10.0
MAPPING_BUDGET = 768 << 20  # an iteration's outputs up to this size stay mapped between iterations
UNUSED_TAIL = 1 << 62  # "to the end of the segment" for free_range

Reply = dict[str, Any]  # a worker's answer (hello, ready, result, bye)
Replies = dict[str, Reply | BackendFailed]  # by backend name: its answer, or how it failed
OnWait = Callable[[list[str], float, dict[str, str]], None]  # see supervisor.wait_replies
Collect = Callable[[Replies], dict[str, Reply]]  # records the failures among replies, returns the answers


class LiveBackends:
    """The workers of a run's live backends (one per backend of ``backends``, in that order), the run's segment
    ``prefix`` and each backend's limit in seconds (``timeouts``, the run's --timeout). Owns the run's input
    segments and its cache of mapped output segments: ``free_segments`` on every exit path. The workers
    themselves belong to whoever assigned them (``close_workers`` says goodbye; releasing is theirs)."""

    def __init__(self, backends: Sequence[BackendPlan], workers: Mapping[str, Worker], prefix: str,
                 timeouts: Mapping[str, float]):
        self.plans = {backend.name: backend for backend in backends}
        self.workers = {backend.name: workers[backend.name] for backend in backends}
        self.prefix = prefix
        self.timeouts = dict(timeouts)
        self.mappings = MappingCache(MAPPING_BUDGET)
        self._inputs = ReusedSegments()
        self._index = {name: index for index, name in enumerate(self.workers)}

    def alive(self) -> list[str]:
        """The backends whose workers still run, in the run's order."""
        return [name for name, worker in self.workers.items() if worker.alive]

    def start(self, on_wait: OnWait | None = None) -> Replies:
        """Wait for every worker's ``hello``. Starting (a fresh interpreter saying hello) is not a load or an
        inference: it has its own limit, so that a short --timeout meant for a hanging load does not fail an
        interpreter that is slow to start on a busy machine."""
        limits = {name: max(seconds, START_TIMEOUT_SECONDS) for name, seconds in self.timeouts.items()}
        return supervisor.wait_replies(self.workers.values(), "hello", "start", limits, on_wait=on_wait)

    def load(self, models: Mapping[str, tuple[str, Sequence[str]]], on_wait: OnWait | None = None) -> Replies:
        """Have each backend of ``models`` load its model file, exposing the tensors named with it (its marks) as
        outputs; wait for each one's ``ready``. A later load replaces the loaded model."""
        ids = {}
        for name, (model, mark) in models.items():
            worker = self.workers[name]
            ids[name] = worker.next_id()
            supervisor.send(worker, supervisor.load_request("load", ids[name], self.plans[name], model, mark), "load")
        return supervisor.wait_replies([self.workers[name] for name in ids], "ready", "load", self.timeouts, ids,
                                       on_wait=on_wait)

    def write_inputs(self, arrays: Mapping[str, np.ndarray], key: str) -> list[TensorDescriptor]:
        """Write ``arrays`` into the run's input segment ``key`` (rewritten in place from one use to the next);
        their descriptors, to feed an inference."""
        return self._inputs.write(f"{self.prefix}in{key}", arrays)

    def infer(self, feeds: Mapping[str, Sequence[TensorDescriptor]], key: str, warm_up: int = 0,
              out_bytes: Mapping[str, int] | None = None) -> dict[str, int]:
        """Send each backend of ``feeds`` an inference fed those descriptors, its outputs into its output
        segments ``key``; return the request ids to wait for (``results``). ``warm_up``: untimed inferences first;
        ``out_bytes``: what a backend's outputs are expected to take (a slice's), so one chunk holds them all."""
        ids = {}
        for name, inputs in feeds.items():
            worker = self.workers[name]
            ids[name] = worker.next_id()
            request: Infer = {"op": "infer", "id": ids[name], "inputs": list(inputs),
                              "out_prefix": f"{self.prefix}o{self._index[name]}{key}"}
            if warm_up:
                request["warm_up"] = warm_up
            if out_bytes is not None and name in out_bytes:
                request["out_bytes"] = out_bytes[name]
            supervisor.send(worker, request, "infer")
        return ids

    def results(self, ids: Mapping[str, int], on_wait: OnWait | None = None) -> Replies:
        """Wait for the ``result`` of each request of ``ids`` (from ``infer``)."""
        return supervisor.wait_replies([self.workers[name] for name in ids], "result", "infer", self.timeouts,
                                       dict(ids), on_wait=on_wait)

    def iteration_outputs(self, answers: Mapping[str, Reply]) -> dict[str, TensorSource]:
        """Each answering backend's outputs (in the run's order), left in shared memory until loaded; kept mapped
        for the next iterations when all of them fit the mapping budget (then the next iterations map nothing)."""
        sources = {name: outputs(answers[name]) for name in self.workers if name in answers}
        if sum(source.nbytes for source in sources.values()) <= self.mappings.budget:
            for source in sources.values():
                source.mappings = self.mappings
        return sources

    def close_workers(self) -> Replies:
        """Say goodbye to every worker still alive and wait for each one's ``bye`` (a short, fixed limit)."""
        alive = [worker for worker in self.workers.values() if worker.alive]
        for worker in alive:
            request: Close = {"op": "close", "id": worker.next_id()}
            supervisor.send(worker, request, "close")
        return supervisor.wait_replies(alive, "bye", "close", CLOSE_TIMEOUT_SECONDS)

    def unmap_inputs(self) -> None:
        """Unmap the input segments (their files stay, rewritten in place when next written)."""
        self._inputs.close()

    def free_segments(self) -> None:
        """Unmap and remove every segment of the run: the inputs and every worker's outputs (idempotent)."""
        try:
            try:
                self.mappings.close()
            finally:
                self._inputs.close()
        finally:
            runspace.sweep(self.prefix)


def outputs(answer: Reply, compared: Collection[str] | None = None) -> TensorSource:
    """The outputs of a ``result`` answer (only those named in ``compared``, if given), left in shared memory
    until loaded; each segment unmapped when the source is released."""
    return TensorSource(descriptors={d["name"]: d for d in answer["outputs"]
                                     if compared is None or d["name"] in compared})


class HeldOutputs:
    """One backend's outputs of an inference or more, kept in its shared memory until each is freed (a sliced run
    frees a tensor once it is compared and no later slice reads it): by name, with how many live in each
    segment. A segment is removed once all its tensors are freed; until then a freed tensor's pages are given
    back (``shm.free_range``)."""

    def __init__(self) -> None:
        self.descriptors: dict[str, TensorDescriptor] = {}
        self._per_segment: dict[str, int] = {}

    def add(self, descriptors: Iterable[TensorDescriptor]) -> None:
        """Hold an inference's outputs, and free what their segments reserved beyond them (a worker's output
        chunks grow ahead of need)."""
        ends: dict[str, int] = {}
        for descriptor in descriptors:
            segment = descriptor["segment"]
            self.descriptors[descriptor["name"]] = descriptor
            self._per_segment[segment] = self._per_segment.get(segment, 0) + 1
            ends[segment] = max(ends.get(segment, 0), int(descriptor["offset"]) + shm.descriptor_bytes(descriptor))
        for segment, end in ends.items():
            shm.free_range(segment, end, UNUSED_TAIL)

    def free(self, name: str) -> None:
        descriptor = self.descriptors.pop(name, None)
        if descriptor is None:
            return
        segment = descriptor["segment"]
        self._per_segment[segment] -= 1
        if self._per_segment[segment] == 0:
            del self._per_segment[segment]
            shm.discard(segment)
        else:
            shm.free_range(segment, int(descriptor["offset"]), shm.descriptor_bytes(descriptor))

    def free_all(self) -> None:
        for segment in self._per_segment:
            shm.discard(segment)
        self.descriptors.clear()
        self._per_segment.clear()
