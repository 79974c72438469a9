"""cmpx's real backend workers, kept across many models: for differential tests that run hundreds of small models,
where a ``cmpx run`` per model would spend its time starting interpreters and importing frameworks.

Each model goes through the very messages a run sends (``load``, then one ``infer`` whose inputs a coordinator
wrote into shared memory), and its outputs are read back from the worker's shared memory as a run reads them
(cmpx.transport.sources); only planning, comparison and reporting are left out. Several workers (``onnxrt`` and
``onnxrt#2``, or different backends) take each model at once, in parallel. A worker that dies is replaced for the
next model. The workers, their segments and their run space are released on ``close`` (use it as a context
manager).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cmpx.errors import BackendFailed

START_SECONDS = 120.0


class KeptWorkers:
    """One worker per entry of ``backends`` (backend names; a repeated name becomes ``NAME#2``, as on the command
    line), each with the backend's default options updated by ``options[name]``; ``plugins`` as ``-p``."""

    def __init__(self, backends: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None,
                 plugins: Sequence[str] = (), timeout: float = 120.0):
        from cmpx.comparison.pairing import instance_names
        from cmpx.plan import BackendPlan
        from cmpx.plugins import PluginSettings, make_plugin_manager
        from cmpx.transport.arena import ReusedSegments
        from cmpx.transport.runspace import RunSpace

        self.settings = PluginSettings.from_cli(list(plugins))
        plugin_set = make_plugin_manager(autoload=self.settings.autoload, extra=self.settings.extra,
                                         blocked=self.settings.blocked)
        self.plans: dict[str, BackendPlan] = {}
        for name, backend in zip(instance_names(list(backends)), backends):
            spec = plugin_set.backends.get(backend)
            if spec is None:
                raise ValueError(f"no backend {backend!r}; installed: {', '.join(plugin_set.backends.names())}")
            values = {option.name: option.default for option in spec.options}
            values.update((options or {}).get(backend, {}))
            self.plans[name] = BackendPlan(name, spec, values)
        self.timeout = timeout
        self.space = RunSpace()
        self.inputs = ReusedSegments()
        self.workers: dict[str, Any] = {}
        self.replaced = 0  # workers started again after one died
        self.started: dict[str, dict[str, Any]] = {}  # each worker's hello
        try:
            for name in self.plans:
                self._start(name)
        except BaseException:
            self.close()
            raise

    def _start(self, name: str) -> None:
        from cmpx.transport import supervisor
        from cmpx.transport.pool import worker_environment

        worker = supervisor.assign(supervisor.spawn_worker(worker_environment()), self.plans[name], self.settings)
        self.workers[name] = worker
        reply = supervisor.wait_replies([worker], "hello", "start", START_SECONDS)[name]
        if isinstance(reply, BackendFailed):
            raise reply
        self.started[name] = reply

    def run(self, model_path: str, feeds: Mapping[str, np.ndarray],
            mark: Sequence[str] = ()) -> dict[str, dict[str, Any] | BackendFailed]:
        """Load ``model_path`` on every worker (exposing ``mark`` on those that support marking), infer ``feeds``
        once; return, per worker name, its outputs (copies: arrays, ``cmpx.structured.Structured``,
        ``cmpx.structured.NotComparable``) or the BackendFailed it reported."""
        from cmpx.transport import supervisor
        from cmpx.transport.sources import TensorSource

        for name, worker in list(self.workers.items()):
            if not worker.alive:
                supervisor.release(worker)
                self.replaced += 1
                self._start(name)
        results: dict[str, dict[str, Any] | BackendFailed] = {}
        ids = {}
        for name, worker in self.workers.items():
            plan = self.plans[name]
            ids[name] = worker.next_id()
            supervisor.send(worker, supervisor.load_request("load", ids[name], plan, model_path,
                                                            mark if plan.spec.supports_marking else ()), "load")
        loaded = supervisor.wait_replies(self.workers.values(), "ready", "load", self.timeout, ids)
        ready = [name for name, reply in loaded.items() if not isinstance(reply, BackendFailed)]
        results.update((name, reply) for name, reply in loaded.items() if isinstance(reply, BackendFailed))
        if not ready:
            return results
        try:
            descriptors = self.inputs.write(f"{self.space.prefix}in", dict(feeds))
            for name in ready:
                worker, index = self.workers[name], list(self.plans).index(name)  # one output prefix each
                ids[name] = worker.next_id()
                supervisor.send(worker, {"op": "infer", "id": ids[name], "inputs": descriptors,
                                         "out_prefix": f"{self.space.prefix}o{index}"}, "infer")
            replies = supervisor.wait_replies([self.workers[n] for n in ready], "result", "infer", self.timeout,
                                              {n: ids[n] for n in ready})
        finally:
            self.inputs.close()  # unmapped; the file is rewritten in place for the next model
        for name in ready:
            reply = replies[name]
            if isinstance(reply, BackendFailed):
                results[name] = reply
                continue
            source = TensorSource(descriptors={d["name"]: d for d in reply["outputs"]})
            try:
                results[name] = {output: _copy(source.load(output)) for output in source.names}
            finally:
                source.release_all()
        return results

    def close(self) -> None:
        from cmpx.transport import supervisor

        alive = [w for w in self.workers.values() if w.alive]
        for worker in alive:
            supervisor.send(worker, {"op": "close", "id": worker.next_id()}, "close")
        try:
            supervisor.wait_replies(alive, "bye", "close", 10.0)
        finally:
            supervisor.release_all(self.workers.values())
            self.workers = {}
            self.space.close()

    def __enter__(self) -> KeptWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _copy(value: Any) -> Any:
    """A value read from shared memory, copied out of it (its segment is reused by the next model)."""
    from cmpx.structured import Structured

    if isinstance(value, Structured):
        return Structured(value.skeleton, np.array(value.values, copy=True))
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True)
    return value
