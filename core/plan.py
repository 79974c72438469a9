"""The validated description of a run: what the coordinator executes. Light to import (no numpy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmpx.compare import ComparisonSettings
from cmpx.model import ModelInfo, TensorSpec
from cmpx.plugins import PluginSettings
from cmpx.registry import BackendSpec


@dataclass(frozen=True)
class BackendPlan:
    """One live backend instance of the run: its unique name, its descriptor and its option values."""

    name: str
    spec: BackendSpec
    options: Mapping[str, Any]


@dataclass(frozen=True)
class SavedBackend:
    """Saved outputs taking part as a backend (--load-outputs); ``source`` is a cmpx.saved.model.SavedSource."""

    name: str
    source: Any
    path: str


@dataclass(frozen=True)
class RunPlan:
    model: ModelInfo | None  # None when only saved runs are compared
    inputs: Sequence[TensorSpec]
    backends: Sequence[BackendPlan]
    reference: str | None
    comparison: ComparisonSettings
    timeouts: Mapping[str, float]  # seconds per load and per inference, by live backend name
    plugin_settings: PluginSettings
    validate: bool = False
    saved_backends: Sequence[SavedBackend] = ()
    save_inputs: str | None = None
    save_outputs: str | None = None
    iterations: int | None = None  # known in advance for synthetic data and saved-only comparisons

    @property
    def names(self) -> list[str]:
        """Every backend of the run, live then saved: the order that decides the default pairs."""
        return [b.name for b in self.backends] + [b.name for b in self.saved_backends]
