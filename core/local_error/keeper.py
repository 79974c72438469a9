"""What --local-error keeps while the run goes: the reference's values of iteration 0 (every tensor each
reference produced, live references only: a saved reference's run is on disk already) and that iteration's feed,
written once to the run's scratch space as cmpx saved runs, and each pair's verdict on each tensor in that
iteration. Disk: one iteration of each reference's tensors; memory: nothing beyond the tensor being written."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cmpx.comparison.pairing import comparison_pairs
from cmpx.errors import OutputFailed

if TYPE_CHECKING:
    from cmpx.plan import RunPlan
    from cmpx.outcome.results import PairResult
    from cmpx.saved.cmpx_format import RunWriter

ITERATION = 0  # the iteration whose values feed the nodes


class ReferenceKeeper:
    """Told every tensor of iteration 0 by the comparer (``tensor``), its feed by the execution (``feed``) and its
    pairs once compared (``compared``); gives them back for the measurement (``values``, ``inputs``)."""

    def __init__(self, plan: RunPlan):
        from cmpx.saved.cmpx_format import RunWriter

        live = {b.name for b in plan.backends}
        self.pairs = [(b, r) for b, r in comparison_pairs(plan.names, plan.reference, plan.oracle) if b in live]
        self.saved = {s.name: s for s in plan.saved_backends}
        self.kept = {r for _, r in self.pairs if r in live}
        self.verdicts: dict[tuple[str, str], dict[str, bool]] = {}
        if plan.local_error_dir is None:
            raise ValueError("a ValueKeeper needs the plan's local_error_dir (--local-error)")
        self.directory = plan.local_error_dir
        self.failed: str | None = None  # why the values could not be kept (a full disk)
        self.done = False  # iteration 0 was compared and its values are kept
        self._values_path = os.path.join(self.directory, "reference")
        self._inputs_path = os.path.join(self.directory, "inputs")
        self._writers: list[RunWriter] = []
        model = plan.model.path if plan.model else None
        try:
            os.makedirs(self.directory, exist_ok=True)
            self._values = RunWriter(self._values_path, "outputs", model, "--local-error")
            self._inputs = RunWriter(self._inputs_path, "inputs", model, "--local-error")
            self._writers = [self._values, self._inputs]
        except (OSError, OutputFailed) as exc:
            self.failed = str(exc)

    def feed(self, iteration: int, feed: Mapping[str, Any]) -> None:
        if iteration == ITERATION and self.failed is None:
            self._write(lambda: self._inputs.add("inputs", ITERATION, feed, None))

    def tensor(self, iteration: int, source: str, name: str, array: Any) -> None:
        if iteration == ITERATION and source in self.kept and self.failed is None:
            self._write(lambda: self._values.tensor(source, ITERATION, name, array))

    def compared(self, iteration: int, pairs: Sequence[PairResult]) -> None:
        if iteration != ITERATION:
            return
        for pair in pairs:
            self.verdicts[(pair.backend, pair.reference)] = {o.output: o.passed for o in pair.outputs}
        if self.failed is None:
            self._write(lambda: self._values.finish_iteration(ITERATION, None))
        self.close()
        self.done = self.failed is None

    def _write(self, write: Any) -> None:
        try:
            write()
        except OutputFailed as exc:
            self.failed = str(exc)

    def close(self) -> None:
        for writer in self._writers:
            writer.close(complete=self.failed is None)

    def inputs(self) -> Mapping[str, Any]:
        """The feed of iteration 0 (arrays mapped on access)."""
        from cmpx.saved.cmpx_format import read_cmpx_run

        sources = read_cmpx_run(self._inputs_path).sources
        return sources[0].load(ITERATION) if sources else {}

    def values(self, reference: str) -> Mapping[str, Any]:
        """The reference's tensors of iteration 0, by name (arrays mapped on access)."""
        saved = self.saved.get(reference)
        if saved is not None:
            return saved.source.load(ITERATION) if len(saved.source) else {}
        from cmpx.saved.cmpx_format import read_cmpx_run

        for source in read_cmpx_run(self._values_path).sources:
            if source.name == reference and len(source):
                return source.load(ITERATION)
        return {}
