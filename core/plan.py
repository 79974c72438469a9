"""The validated description of a run: what the coordinator executes. Light to import (no numpy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cmpx.comparison.compare import ComparisonSettings
from cmpx.comparison.postprocess import Postprocess
from cmpx.model.info import ModelInfo, TensorSpec
from cmpx.plugin.registry import BackendSpec

if TYPE_CHECKING:
    from cmpx.errors import BackendFailed
    from cmpx.model.graph import TensorGraph
    from cmpx.model.value_ranges import InputRange
    from cmpx.saved.model import SavedSource
    from cmpx.slicing.planning import SlicingPlan


@dataclass(frozen=True)
class BackendPlan:
    """One live backend instance of the run: its unique name, its descriptor and its option values."""

    name: str
    spec: BackendSpec
    options: Mapping[str, Any]
    transform: str | None = None  # e.g. "fp16" for --backend onnxrt:fp16
    model_path: str | None = None  # the transformed model this backend loads, once made
    python: str | None = None  # the Python its worker runs under, when not the coordinator's (--backend NAME@PYTHON)
    python_given: str | None = None  # that Python as the user named it (a path, or env:NAME)
    absent_marks: frozenset[str] = frozenset()  # marked tensors its transformed graph no longer computes

    @property
    def short_name(self) -> str:
        """Its name without the ``@PYTHON`` part (``onnxrt``, ``onnxrt:fp16``, ``onnxrt#2``): the reports add the
        framework version and environment to it instead."""
        if self.python_given is None:
            return self.name
        word = f"{self.spec.name}:{self.transform}" if self.transform else self.spec.name
        number = self.name[len(word) + 1 + len(self.python_given):]  # "#2" for a repeated word
        return word + number


@dataclass(frozen=True)
class SavedBackend:
    """Saved outputs taking part as a backend (--load-outputs)."""

    name: str
    source: SavedSource
    path: str


@dataclass(frozen=True)
class RunPlan:
    model: ModelInfo | None  # None when only saved runs are compared
    inputs: Sequence[TensorSpec]
    backends: Sequence[BackendPlan]
    reference: str | None
    comparison: ComparisonSettings
    timeouts: Mapping[str, float]  # seconds per load and per inference, by live backend name
    validate: bool = False
    saved_backends: Sequence[SavedBackend] = ()
    save_inputs: str | None = None
    save_outputs: str | None = None
    iterations: int | None = None  # known in advance for synthetic data and saved-only comparisons
    mark: Sequence[str] = ()  # intermediate tensors exposed by backends that support marking
    mark_all: bool = False  # every tensor marked (--mark-all, --onnx-outputs mark all / '*'): the text report tallies
    graph: TensorGraph | None = None  # the model's graph when tensors are marked (for the first divergence)
    show_unmatched: bool = False
    dropped: Sequence[tuple[BackendPlan, BackendFailed]] = ()  # backends whose model transform failed
    output_map: Mapping[str, str] = field(default_factory=dict)  # --output-map A=B: tensor B compared as A
    postprocess: Postprocess = field(default_factory=Postprocess)  # --postprocess top-K
    warm_up: int = 0  # --warm-up: untimed inferences before the first timed one
    model_file: str | None = None  # the file backends load (beside its external data: --external-data-dir)
    local_error_dir: str | None = None  # --local-error: where the reference's values of iteration 0 are kept
    data_ranges: Sequence[InputRange] = ()  # the range of each integer input of synthetic data
    excluded: frozenset[str] = frozenset()  # model outputs left out with --onnx-exclude-outputs: never compared
    slicing: SlicingPlan | None = None  # when the marked tensors exceed the memory budget
    oracle: str | None = None  # the backend every other one is also measured against (cmpx.comparison.oracle)

    @property
    def required_outputs(self) -> frozenset[str]:
        """Tensors every backend must produce: the model's outputs (a marked tensor may be absent on one side)."""
        if not self.model:
            return frozenset()
        return frozenset(spec.name for spec in self.model.outputs if spec.name not in self.excluded)

    @property
    def required_outputs_order(self) -> list[str]:
        """The model's outputs in the model's order."""
        return [spec.name for spec in self.model.outputs] if self.model else []

    @property
    def single(self) -> bool:
        """One backend and nothing to compare it with: its outputs are described and checked, not compared."""
        return len(self.names) == 1

    @property
    def names(self) -> list[str]:
        """Every backend of the run, live then saved: the order that decides the default pairs."""
        return [b.name for b in self.backends] + [b.name for b in self.saved_backends]
