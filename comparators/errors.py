"""Error statistics of one output pair: exact, vectorised, and computed chunk by chunk in bounded memory.

Pass 1 streams the absolute and relative errors once for counts, extremes, mean, standard deviation, the
element-wise verdict, the smallest tolerances that would pass, and a histogram of bit-pattern bins. Pass 2
(recomputing the errors chunk by chunk) gathers just the elements needed for the exact median and quantiles
and the worst elements. Memory stays within a few chunks, whatever the tensor size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from cmpx_comparators.diffs import DiffPlan, chunk_diffs, plan_diff
from cmpx_comparators.order_stats import BINS, RankSelector, TopK, count_bins, exponent_histogram, lerp, \
    quantile_ranks

CHUNK_ELEMENTS = 1 << 19
REPORTED_QUANTILES = (0.5, 0.9, 0.95, 0.99)
WORST_ELEMENTS = 5


@dataclass
class Summary:
    """Statistics of one error array (absolute or relative). NaN anywhere makes every statistic NaN except
    ``max_index`` (the first NaN) and the counts, as with numpy."""

    count: int = 0
    nan_count: int = 0
    zeros: int = 0
    min: float = math.nan
    max: float = math.nan
    max_index: int = -1
    mean: float = math.nan
    std: float = math.nan
    quantiles: dict[float, float] = field(default_factory=dict)
    histogram: list[tuple[float, float, int]] = field(default_factory=list)

    @property
    def median(self) -> float:
        return self.quantiles.get(0.5, math.nan)

    def statistic(self, name: str, q: float | None = None) -> float:
        """The value that --check-error-stat NAME checks: max, mean, median or quantile (with ``q``)."""
        if self.count == 0:
            return 0.0
        if name == "quantile":
            return self.quantiles[q]
        return {"max": self.max, "mean": self.mean, "median": self.median}[name]


@dataclass(frozen=True)
class WorstElement:
    index: tuple[int, ...]
    actual: float
    reference: float
    absdiff: float
    reldiff: float


@dataclass
class ErrorStats:
    """Everything the report says about one output pair."""

    shape: tuple[int, ...]
    plan: DiffPlan
    abs: Summary
    rel: Summary
    mismatches: int  # elements failing the element-wise rule at (atol, rtol)
    min_atol: float  # smallest atol that passes element-wise at this rtol
    min_rtol: float  # smallest rtol that passes element-wise at this atol
    worst: list[WorstElement]

    @property
    def size(self) -> int:
        return self.abs.count


class _Accumulator:
    def __init__(self) -> None:
        self.summary = Summary()
        self.counts = np.zeros(BINS, np.int64)
        self._total = 0.0
        self._mean = 0.0
        self._m2 = 0.0

    def add(self, values: np.ndarray, offset: int) -> None:
        s = self.summary
        n = values.size
        s.nan_count += int(np.count_nonzero(np.isnan(values)))
        s.zeros += int(np.count_nonzero(values == 0))
        index = int(values.argmax())  # the first NaN if any
        peak = float(values[index])
        if s.max_index < 0 or math.isnan(peak) and not math.isnan(s.max) or peak > s.max:
            s.max, s.max_index = peak, offset + index
        low = float(values.min())
        s.min = low if s.count == 0 or math.isnan(low) or low < s.min else s.min
        total = float(values.sum(dtype=np.float64))
        self._total += total
        chunk_mean = total / n
        with np.errstate(all="ignore"):  # inf - inf is NaN here as in numpy.std
            centered = np.subtract(values, chunk_mean, dtype=np.float64)  # centred: x**2 sums overflow less
            chunk_m2 = float(np.dot(centered, centered))
        merged = s.count + n  # Chan et al.: merge the chunk's mean and M2 into the running ones
        delta = chunk_mean - self._mean
        self._m2 += chunk_m2 + delta * delta * s.count * n / merged if s.count else chunk_m2
        self._mean += delta * n / merged
        s.count = merged
        count_bins(values, self.counts)

    def finish_pass1(self) -> None:
        s = self.summary
        if s.count == 0:
            s.min = s.max = s.mean = s.std = 0.0
            return
        if s.nan_count:
            s.min = s.mean = s.std = math.nan
        else:
            s.mean = self._total / s.count  # a plain sum, so infinities give inf as in numpy
            s.std = math.sqrt(self._m2 / s.count) if not self._m2 < 0 else 0.0  # inf and NaN pass through


def _chunks(actual: np.ndarray, reference: np.ndarray) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    flat_a, flat_b = actual.reshape(-1), reference.reshape(-1)
    for start in range(0, flat_a.size, CHUNK_ELEMENTS):
        yield start, flat_a[start:start + CHUNK_ELEMENTS], flat_b[start:start + CHUNK_ELEMENTS]


def error_stats(actual: np.ndarray, reference: np.ndarray, *, atol: float, rtol: float,
                quantiles: Sequence[float] = (), nan_equal: bool = False, inf_equal: bool = False) -> ErrorStats:
    """Compare two arrays of the same shape; ``quantiles`` are computed besides the reported ones."""
    if actual.shape != reference.shape:
        raise ValueError(f"shape mismatch: {list(actual.shape)} vs reference {list(reference.shape)}")
    plan = plan_diff(actual.dtype, reference.dtype)
    abs_acc, rel_acc = _Accumulator(), _Accumulator()
    mismatches, min_atol, min_rtol = 0, 0.0, 0.0
    for offset, a, b in _chunks(actual, reference):
        absdiff, reldiff = chunk_diffs(plan, a, b, nan_equal, inf_equal)
        abs_acc.add(absdiff, offset)
        rel_acc.add(reldiff, offset)
        with np.errstate(invalid="ignore"):
            abs_fails = (absdiff > atol) | np.isnan(absdiff)
            rel_fails = (reldiff > rtol) | np.isnan(reldiff)
        mismatches += int(np.count_nonzero(abs_fails & rel_fails))
        min_atol = _nan_max(min_atol, float(np.max(absdiff, where=rel_fails, initial=0.0)))
        min_rtol = _nan_max(min_rtol, float(np.max(reldiff, where=abs_fails, initial=0.0)))
    for acc in (abs_acc, rel_acc):
        acc.finish_pass1()
    wanted = tuple(dict.fromkeys((*REPORTED_QUANTILES, *quantiles)))
    worst = _pass2(actual, reference, plan, abs_acc, rel_acc, wanted, nan_equal, inf_equal)
    bits = 32 if plan.work.itemsize == 4 else 64
    for acc in (abs_acc, rel_acc):
        acc.summary.histogram = exponent_histogram(acc.counts, bits, acc.summary.zeros)
    return ErrorStats(actual.shape, plan, abs_acc.summary, rel_acc.summary, mismatches, min_atol, min_rtol, worst)


def _nan_max(a: float, b: float) -> float:
    """max() that keeps NaN (Python's max drops it when it comes second)."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _pass2(actual: np.ndarray, reference: np.ndarray, plan: DiffPlan, abs_acc: _Accumulator,
           rel_acc: _Accumulator, wanted: tuple[float, ...], nan_equal: bool, inf_equal: bool) -> list[WorstElement]:
    n = abs_acc.summary.count
    if n == 0:
        for acc in (abs_acc, rel_acc):
            acc.summary.quantiles = {q: 0.0 for q in wanted}
        return []
    selectors = []
    for acc in (abs_acc, rel_acc):
        s = acc.summary
        if s.nan_count or s.min == s.max:  # NaN poisons quantiles (as in numpy); constant arrays need no search
            s.quantiles = {q: (math.nan if s.nan_count else s.min) for q in wanted}
            selectors.append(None)
        else:
            ranks = [r for q in wanted for r in quantile_ranks(n, q)[:2]]
            selectors.append(RankSelector(acc.counts, ranks))
    top = TopK(min(WORST_ELEMENTS, n))
    for offset, a, b in _chunks(actual, reference):
        absdiff, reldiff = chunk_diffs(plan, a, b, nan_equal, inf_equal)
        top.add(absdiff, offset)
        for selector, values in zip(selectors, (absdiff, reldiff)):
            if selector is not None:
                selector.gather(values)
    for selector, acc in zip(selectors, (abs_acc, rel_acc)):
        if selector is not None:
            found = selector.values()
            acc.summary.quantiles = {}
            for q in wanted:
                low, high, t = quantile_ranks(n, q)
                acc.summary.quantiles[q] = lerp(found[low], found[high], t)
    return [_worst_element(actual, reference, plan, index, nan_equal, inf_equal) for index in top.indices()]


def _worst_element(actual: np.ndarray, reference: np.ndarray, plan: DiffPlan, flat_index: int, nan_equal: bool,
                   inf_equal: bool) -> WorstElement:
    a = actual.reshape(-1)[flat_index:flat_index + 1]
    b = reference.reshape(-1)[flat_index:flat_index + 1]
    absdiff, reldiff = chunk_diffs(plan, a, b, nan_equal, inf_equal)
    index = tuple(int(i) for i in np.unravel_index(flat_index, actual.shape)) if actual.shape else ()
    return WorstElement(index, _scalar(a[0]), _scalar(b[0]), float(absdiff[0]), float(reldiff[0]))


def _scalar(value) -> float:
    value = np.asarray(value)
    if value.dtype.kind == "c":
        return complex(value)
    return float(value.astype(np.float64)) if value.dtype.kind != "b" else float(bool(value))
