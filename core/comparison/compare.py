"""Comparing two backends' outputs: settings per output, the context metrics see, and the comparison itself.

No numpy at import time: metrics import what they need when they run.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmpx.options.argtypes import CHECK_STATS, PerOutput
from cmpx.outcome.results import MetricResult, OutputResult, PairResult

__all__ = ["CHECK_STATS", "ComparisonContext", "ComparisonSettings", "MetricResult", "OutputSettings",
           "compare_output", "compare_outputs", "compare_tensor"]


@dataclass(frozen=True)
class OutputSettings:
    """The settings that apply to one output, after per-output overrides."""

    atol: float
    rtol: float
    check_stat: str
    quantile: float
    nan_equal: bool = False
    inf_equal: bool = False
    thresholds: Mapping[str, float] = field(default_factory=dict)  # metric name -> threshold
    samples: int = 0  # elements to sample for plots (cmpx.outcome.results.ErrorSample); 0: none


@dataclass(frozen=True)
class ComparisonSettings:
    """The run's comparison options; ``for_output`` resolves the per-output values."""

    metrics: Sequence[Any]  # the selected metric objects, all of which must pass
    atol: PerOutput[float] = field(default_factory=lambda: PerOutput(1e-5))
    rtol: PerOutput[float] = field(default_factory=lambda: PerOutput(1e-5))
    check_stat: PerOutput[str] = field(default_factory=lambda: PerOutput("elemwise"))
    quantile: PerOutput[float] = field(default_factory=lambda: PerOutput(0.99))
    thresholds: Mapping[str, PerOutput[float]] = field(default_factory=dict)
    nan_equal: bool = False
    inf_equal: bool = False
    fail_fast: bool = False
    samples: int = 0  # elements of each output to sample for plots (only when plots are asked for)

    def for_output(self, name: str) -> OutputSettings:
        return OutputSettings(self.atol.get(name), self.rtol.get(name), self.check_stat.get(name),
                              self.quantile.get(name), self.nan_equal, self.inf_equal,
                              {metric: values.get(name) for metric, values in self.thresholds.items()}, self.samples)


class ComparisonContext:
    """What a metric sees for one output: the two arrays (read-only views), the settings, and a memo so that
    metrics sharing an expensive computation (the error statistics) do it once."""

    def __init__(self, output: str, actual: Any, reference: Any, settings: OutputSettings):
        self.output = output
        self.actual = actual
        self.reference = reference
        self.settings = settings
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]


def compare_output(name: str, actual: Any, reference: Any, settings: ComparisonSettings) -> OutputResult:
    from cmpx.structured import Structured

    if isinstance(actual, Structured) or isinstance(reference, Structured):
        from cmpx.comparison.structural import compare_structured

        return compare_structured(name, actual, reference,
                                  lambda name, actual, reference: compare_output(name, actual, reference, settings))
    if tuple(actual.shape) != tuple(reference.shape):
        return OutputResult(name, note=f"shape mismatch: {list(actual.shape)} vs reference "
                                       f"{list(reference.shape)}", failed_early=True)
    note = "" if actual.dtype == reference.dtype else f"dtypes differ: {actual.dtype} vs reference {reference.dtype}"
    context = ComparisonContext(name, actual, reference, settings.for_output(name))
    return OutputResult(name, [metric.compare(context) for metric in settings.metrics], note,
                        elements=int(actual.size))


def compare_tensor(pairs: Sequence[PairResult], tensor: str, arrays: Mapping[str, Any],
                   settings: ComparisonSettings, required: Container[str],
                   structured: Mapping[str, str] | None = None) -> bool:
    """Compare one tensor in every pair, given ``arrays`` (backend name -> that backend's array).

    A tensor only one side of a pair has fails that pair if it is ``required`` (a model output), naming the side
    that lacks it; otherwise it is recorded as unmatched. An output that is not a tensor (``structured``: its
    name -> its type) and that one side could not produce, or one a side returned in a form cmpx cannot compare,
    is recorded as not comparable, and fails nothing. Returns True if --fail-fast should stop here.
    """
    from cmpx.structured import NotComparable

    for pair in pairs:
        sides = [side for side in (pair.backend, pair.reference) if side in arrays]
        unusable = [side for side in sides if isinstance(arrays[side], NotComparable)]
        if unusable:
            why = "; ".join(f"{side} returned it in a form cmpx cannot compare: {arrays[side].reason}"
                            for side in unusable)
            if tensor in required and not (structured and tensor in structured):  # a tensor output: a failure
                pair.outputs.append(OutputResult(tensor, note=why, failed_early=True))
                if settings.fail_fast:
                    return True
            else:
                pair.not_comparable.append((tensor, why))
            continue
        if len(sides) == 1 and structured and tensor in structured:
            missing = pair.reference if sides[0] == pair.backend else pair.backend
            article = "an" if structured[tensor].startswith("optional") else "a"
            pair.not_comparable.append((tensor, f"{missing} does not produce it ({article} {structured[tensor]})"))
            continue
        if pair.backend in arrays and pair.reference in arrays:
            pair.outputs.append(compare_output(tensor, arrays[pair.backend], arrays[pair.reference], settings))
        elif pair.backend in arrays or pair.reference in arrays:
            side = pair.backend if pair.backend in arrays else pair.reference
            if tensor not in required:
                pair.unmatched.append((tensor, side))
                continue
            missing = pair.reference if side == pair.backend else pair.backend
            pair.outputs.append(OutputResult(tensor, note=f"missing in {missing}", failed_early=True, missing_in=missing))
        else:
            continue
        if settings.fail_fast and not pair.outputs[-1].passed:
            return True
    return False


def compare_outputs(backend: str, reference: str, iteration: int, actual: Mapping[str, Any],
                    expected: Mapping[str, Any], settings: ComparisonSettings) -> PairResult:
    """Compare two sets of outputs by exact name; every output is required, so one present on one side only
    fails, naming the side that lacks it. With ``fail_fast`` the comparison stops at the first failing output."""
    pair = PairResult(backend, reference, iteration)
    names = list(expected) + [n for n in actual if n not in expected]
    for name in names:
        arrays = {side: outputs[name] for side, outputs in ((backend, actual), (reference, expected))
                  if name in outputs}
        if compare_tensor([pair], name, arrays, settings, names):
            break
    return pair
