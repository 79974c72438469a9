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
    """One backend instance of the run: its unique name, its descriptor and its option values."""

    name: str
    spec: BackendSpec
    options: Mapping[str, Any]


@dataclass(frozen=True)
class RunPlan:
    model: ModelInfo
    inputs: Sequence[TensorSpec]  # with concrete shapes
    backends: Sequence[BackendPlan]
    reference: str | None
    comparison: ComparisonSettings
    timeout: float
    plugin_settings: PluginSettings
    validate: bool = False
