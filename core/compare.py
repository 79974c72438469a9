"""Comparison results, and pairing of two backends' outputs by exact name. No numpy at import time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmpx.argtypes import PerOutput


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class MetricResult:
    """What a metric says about one output: verdict, largest errors, and a note when it failed early."""

    passed: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0
    size: int = 0
    note: str = ""


@dataclass(frozen=True)
class OutputResult:
    output: str
    tolerance: Tolerance | None
    result: MetricResult


@dataclass
class PairResult:
    """One backend compared against its reference backend, in one iteration."""

    backend: str
    reference: str
    iteration: int
    outputs: list[OutputResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.result.passed for o in self.outputs)


def compare_outputs(backend: str, reference: str, iteration: int, actual: Mapping[str, Any],
                    expected: Mapping[str, Any], metric: Any, atol: PerOutput[float],
                    rtol: PerOutput[float]) -> PairResult:
    """Compare every output by exact name; an output present on one side only fails, named as missing."""
    pair = PairResult(backend, reference, iteration)
    for name in list(expected) + [n for n in actual if n not in expected]:
        if name not in actual or name not in expected:
            side = backend if name not in actual else reference
            pair.outputs.append(OutputResult(name, None, MetricResult(False, note=f"missing in {side}")))
            continue
        tolerance = Tolerance(atol.get(name), rtol.get(name))
        pair.outputs.append(OutputResult(name, tolerance, metric.compare(actual[name], expected[name], tolerance)))
    return pair
