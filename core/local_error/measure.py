"""--local-error's measurement, after the run's iterations and before its workers close.

For each pair whose backend is live, every node that computes a tensor compared in iteration 0 is cut out of the
model that backend runs (its transformed model for ``NAME:fp16``...) together with the nodes between it and
tensors the reference has values of (Constant nodes, the casts or Q/DQ nodes a transform inserted, tensors left
unmarked), and run in the backend's own worker: one ``load`` of that small model, one ``infer`` fed the
reference's values of its inputs (cast to the types that model takes, e.g. float16), its outputs compared with
the reference's values by the run's own metrics and tolerances. Only the public backend API is used, so every
backend that runs ONNX models gets it. A subgraph a backend refuses is that node's note; a backend that crashes or
times out on one leaves the rest of its nodes unmeasured, with a warning, and changes no verdict of the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cmpx.errors import BackendFailed
from cmpx.outcome.results import LocalError, ranked

if TYPE_CHECKING:
    from cmpx.local_error.keeper import ReferenceKeeper
    from cmpx.model.subgraph import GraphIndex
    from cmpx.plan import BackendPlan, RunPlan
    from cmpx.reports.reporter import Reporter
    from cmpx.outcome.results import RunResult
    from cmpx.transport.live import LiveBackends, OnWait, Replies, Reply

KEY = "l"  # the run's segments --local-error feeds and fills (cmpx.transport.live)


def measure_local_errors(plan: RunPlan, backends: LiveBackends, keeper: ReferenceKeeper, reporter: Reporter,
                         result: RunResult) -> None:
    """Measure every pair's local errors into its tally (``PairTally.local_errors``, largest first)."""
    if keeper.failed is not None:
        reporter.warning(f"--local-error: the reference's values could not be kept ({keeper.failed}); local error "
                         "not measured")
        return
    if not keeper.done:
        return  # iteration 0 was never compared (every backend failed, or the run was interrupted)
    feed = keeper.inputs()
    for backend, reference in keeper.pairs:
        tally = result.tallies.get((backend, reference))
        if tally is None or backend not in backends.alive():
            continue
        started = time.monotonic()
        measurer = _PairMeasurer(plan, backends.plans[backend], backends, reporter)
        errors = measurer.measure(keeper.values(reference), feed, keeper.verdicts.get((backend, reference), {}))
        tally.local_errors = ranked(errors)
        tally.local_error_seconds = time.monotonic() - started


class _PairMeasurer:
    """One backend's nodes, each run in its worker."""

    def __init__(self, plan: RunPlan, backend: BackendPlan, backends: LiveBackends, reporter: Reporter):
        self.plan = plan
        self.backend = backend
        self.backends = backends
        self.worker = backends.workers[backend.name]
        self.reporter = reporter
        if plan.model is None or plan.local_error_dir is None:
            raise ValueError("measuring local error needs the plan's model and local_error_dir")
        self.model_path = backend.model_path or plan.model_file or plan.model.path
        self.directory = plan.local_error_dir
        self.settings = replace(plan.comparison, samples=0, fail_fast=False)
        self.names = {t.name: (t.node, t.op_type) for t in plan.graph.tensors} if plan.graph is not None else {}
        self.crashed: str | None = None
        self.load: Callable[[str], Any] = lambda name: None  # a reference value (or input) by name, set by measure

    def measure(self, values: Mapping[str, Any], feed: Mapping[str, Any],
                verdicts: Mapping[str, bool]) -> list[LocalError]:
        from cmpx.model.graph import load_structure
        from cmpx.model.subgraph import closure, index_graph

        index = index_graph(load_structure(self.model_path))
        names = set(values)
        inputs = set(feed) & set(index.graph_inputs)
        self.load = lambda name: values[name] if name in names else feed[name]  # mapped when needed, one at a time
        available = {name for name in index.consumers if (name in names or name in inputs)
                     and _castable(self.load(name).dtype, index.elem_type(name))}
        targets: dict[int, list[str]] = {}
        for tensor in verdicts:
            if tensor in names and tensor in index.producer:
                targets.setdefault(index.producer[tensor], []).append(tensor)
        errors = []
        directory = os.path.join(self.directory, f"subgraphs-{self.backend.name.replace('/', '_')}")
        os.makedirs(directory, exist_ok=True)
        started = time.monotonic()
        for number, (position, tensors) in enumerate(sorted(targets.items()), start=1):
            status = f"node {number}/{len(targets)}"
            self.reporter.waiting(f"local error, {status}", [self.backend.name], time.monotonic() - started, {})
            if self.crashed is not None:
                notes = {t: f"not measured: {self.crashed}" for t in tensors}
            else:
                path = os.path.join(directory, f"{position}.onnx")
                notes = self._run_node(index, position, tensors, available, values, path, started, status)
                for leftover in (path, path + ".data"):
                    if os.path.exists(leftover):
                        os.unlink(leftover)
            size = len(closure(index, [position], available))
            for tensor in tensors:
                errors.append(self._entry(index, position, tensor, notes[tensor], verdicts.get(tensor), size))
        return errors

    def _entry(self, index: GraphIndex, position: int, tensor: str, outcome: Any, accumulated: bool | None,
               size: int) -> LocalError:
        node, op_type = self.names.get(tensor, (index.nodes[position].name, index.nodes[position].op_type))
        if isinstance(outcome, str):
            return LocalError(tensor, node, op_type, None, None, None, accumulated, outcome, size)
        return LocalError(tensor, node, op_type, outcome.worst("abs"), outcome.worst("rel"), outcome.passed,
                          accumulated, outcome.note, size, outcome.worst("rel_beyond_atol"))

    def _run_node(self, index: GraphIndex, position: int, tensors: list[str], available: set[str],
                  values: Mapping[str, Any], path: str, started: float, status: str) -> dict[str, Any]:
        """Each of ``tensors``' comparison (an OutputResult), or why it has none (a string)."""
        from cmpx.comparison.compare import compare_output
        from cmpx.model.subgraph import boundary, closure, write_subgraph
        from cmpx.transport.live import outputs

        nodes = closure(index, [position], available)
        inputs, _ = boundary(index, nodes)
        missing = [name for name in inputs if name not in available]
        if missing:
            return dict.fromkeys(tensors, f"not measured: the reference has no value of its input {missing[0]}")
        arrays = {name: _cast(self.load(name), index.elem_type(name)) for name in inputs}
        write_subgraph(index, self.model_path, nodes, {n: (a.dtype, a.shape) for n, a in arrays.items()}, tensors,
                       path, output_types={t: values[t].dtype for t in tensors})
        what = index.node_label(position)
        name, on_wait = self.backend.name, self._on_wait(started, status)
        reply = self._one(self.backends.load({name: (path, ())}, on_wait=on_wait))
        if not isinstance(reply, BackendFailed):
            ids = self.backends.infer({name: self.backends.write_inputs(arrays, KEY)}, KEY)
            reply = self._one(self.backends.results(ids, on_wait=on_wait))
        if isinstance(reply, BackendFailed):
            return dict.fromkeys(tensors, self._failed(reply, what, len(tensors)))
        source = outputs(reply)
        try:
            return {t: compare_output(t, source.load(t), values[t], self.settings) if t in source.names
                    else f"not measured: {self.backend.name} did not return {t} from its subgraph" for t in tensors}
        finally:
            source.release_all()

    def _one(self, replies: Replies) -> Reply | BackendFailed:
        return replies[self.backend.name]

    def _on_wait(self, started: float, status: str) -> OnWait:
        """Progress while waiting: the node being measured, and the time since the measuring began."""
        return lambda pending, elapsed, _: self.reporter.waiting(f"local error, {status}", pending,
                                                                 time.monotonic() - started, {})

    def _failed(self, error: BackendFailed, what: str, count: int) -> str:
        """The note for a node whose subgraph failed; a backend that died leaves the rest unmeasured."""
        if self.worker.alive:
            return f"its subgraph failed on {self.backend.name} during {error.phase}: {error.detail}"
        self.crashed = f"{self.backend.name} failed on the subgraph of {what} ({error})"
        self.reporter.warning(f"--local-error: {self.crashed}; the local error of the nodes after it is not "
                              "measured (the run's verdict is unchanged)")
        return f"not measured: {self.backend.name} failed on its subgraph during {error.phase}: {error}"


def _castable(dtype: Any, elem_type: int | None) -> bool:
    """Whether a reference value of ``dtype`` can feed a tensor the backend's model types as ``elem_type``: the
    same type, or both floating point (the reference's float32 value of a float16 graph's tensor, rounded)."""
    if elem_type is None:
        return True
    from cmpx.dtypes import ONNX_TO_NUMPY, is_floating, numpy_dtype

    name = ONNX_TO_NUMPY.get(elem_type)
    if name is None:
        return False
    target = numpy_dtype(name)
    return target == dtype or (is_floating(target) and is_floating(dtype))


def _cast(array: Any, elem_type: int | None) -> Any:
    import numpy as np

    from cmpx.dtypes import ONNX_TO_NUMPY, numpy_dtype

    array = np.asarray(array)
    if elem_type is None:
        return array
    target = numpy_dtype(ONNX_TO_NUMPY[elem_type])
    with np.errstate(over="ignore"):  # a float32 value beyond float16 becomes inf, as the float16 graph makes it
        return array if array.dtype == target else array.astype(target)
