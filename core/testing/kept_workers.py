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
from typing import TYPE_CHECKING, Any

import numpy as np

from cmpx.errors import BackendFailed

if TYPE_CHECKING:
    from cmpx.transport.live import LiveBackends
    from cmpx.transport.supervisor import Worker

START_SECONDS = 120.0


class KeptWorkers:
    """One worker per entry of ``backends`` (backend names; a repeated name becomes ``NAME#2``, as on the command
    line), each with the backend's default options updated by ``options[name]``; ``plugins`` as ``-p``."""

    def __init__(self, backends: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None,
                 plugins: Sequence[str] = (), timeout: float = 120.0):
        from cmpx.comparison.pairing import instance_names
        from cmpx.plan import BackendPlan
        from cmpx.plugin.manager import PluginSettings, make_plugin_manager
        from cmpx.transport.live import LiveBackends
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
        self.space = RunSpace()
        self.workers: dict[str, Worker] = {}
        self.replaced = 0  # workers started again after one died
        self.started: dict[str, dict[str, Any]] = {}  # each worker's hello
        self.live: LiveBackends | None = None  # once every worker has started
        try:
            for name in self.plans:
                self._start(name)
        except BaseException:
            self.close()
            raise
        self.live = LiveBackends(list(self.plans.values()), self.workers, self.space.prefix,
                                 dict.fromkeys(self.plans, timeout))

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
        from cmpx.transport.live import outputs

        assert self.live is not None, "KeptWorkers is closed"
        for name, worker in list(self.workers.items()):
            if not worker.alive:
                supervisor.release(worker)
                self.replaced += 1
                self._start(name)
                self.live.workers[name] = self.workers[name]
        results: dict[str, dict[str, Any] | BackendFailed] = {}
        loaded = self.live.load({name: (model_path, mark if plan.spec.supports_marking else ())
                                 for name, plan in self.plans.items()})
        ready = [name for name, reply in loaded.items() if not isinstance(reply, BackendFailed)]
        results.update((name, reply) for name, reply in loaded.items() if isinstance(reply, BackendFailed))
        if not ready:
            return results
        try:
            descriptors = self.live.write_inputs(dict(feeds), "")
            replies = self.live.results(self.live.infer(dict.fromkeys(ready, descriptors), ""))
        finally:
            self.live.unmap_inputs()  # the file is rewritten in place for the next model
        for name in ready:
            reply = replies[name]
            if isinstance(reply, BackendFailed):
                results[name] = reply
                continue
            source = outputs(reply)
            try:
                results[name] = {output: _copy(source.load(output)) for output in source.names}
            finally:
                source.release_all()
        return results

    def close(self) -> None:
        from cmpx.transport import supervisor

        try:
            if self.live is not None:
                self.live.close_workers()
        finally:
            supervisor.release_all(self.workers.values())
            self.workers = {}
            self.live = None
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
