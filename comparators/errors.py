"""Error statistics of one output pair: exact, vectorised, and computed chunk by chunk in bounded memory.

Pass 1 streams the absolute and relative errors once for counts, extremes, mean, standard deviation, the
element-wise verdict, the smallest tolerances that would pass, and a histogram of bit-pattern bins. Pass 2
(recomputing the errors chunk by chunk) looks only at the bins that hold the exact median and quantiles (counting
their float32 elements by their low bits, or gathering them) and the worst elements. Memory stays within a few
chunks and a few fixed-size counts, whatever the tensor size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cmpx_comparators.diffs import DiffComputer, DiffPlan, chunk_diffs, plan_diff
from cmpx_comparators.fine_ranks import FineRanks, pays_off
from cmpx_comparators.order_stats import BINS, RankSelector, TopK, bin_keys, count_bins, exponent_histogram, \
    keys_histogram, lerp, quantile_ranks
from cmpx_comparators.sampling import error_sample, worst_count
from cmpx_comparators.sorted_pass import SORT_ELEMENTS, largest_indices, sorted_quantiles

CHUNK_ELEMENTS = 1 << 17  # small enough to stay in cache, large enough to amortise the per-call overhead
REPORTED_QUANTILES = (0.5, 0.9, 0.95, 0.99)
WORST_ELEMENTS = 5


@dataclass
class Summary:
    """Statistics of one error array (absolute or relative). NaN anywhere makes every statistic NaN except
    ``max_index`` (the first NaN) and the counts, as with numpy."""

    count: int = 0
    nan_count: int = 0
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
            if q is None:
                raise ValueError("the quantile statistic needs its quantile q")
            return self.quantiles[q]
        return {"max": self.max, "mean": self.mean, "median": self.median}[name]


@dataclass(frozen=True)
class WorstElement:
    index: tuple[int, ...]
    actual: float | complex
    reference: float | complex
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
    worst: list[WorstElement]
    min_atol: float = 0.0  # smallest atol that passes element-wise at this rtol (computed when mismatches)
    min_rtol: float = 0.0  # smallest rtol that passes element-wise at this atol (computed when mismatches)
    sample: Any = None  # a cmpx.outcome.results.ErrorSample of the elements, when asked for (plots)
    reference_peak: float = 0.0  # the largest |reference| (floats; NaN ignored; 0 for integers and bools)
    beyond_atol: BeyondAtol | None = None  # the relative error where it means something (see BeyondAtol)

    @property
    def size(self) -> int:
        return self.abs.count


@dataclass
class BeyondAtol:
    """The relative error over the elements whose |reference| exceeds atol (NaN references excluded). Against a
    reference at or near zero the relative error explodes (an exact zero divides by 2.2e-16), though the element
    passes by atol: over the others it says how far off the values that count are. ``count`` such elements; the
    largest relative error among them (NaN if any is NaN; None if there are none) at flat index ``max_index``."""

    atol: float
    count: int = 0
    max: float | None = None
    max_index: int = -1

    def add(self, reldiff: np.ndarray, reference: np.ndarray, offset: int, mask: np.ndarray) -> None:
        """Account for one chunk (``mask``: a bool buffer of at least its size)."""
        n = reldiff.size
        mask = mask[:n]
        threshold = np.float64(self.atol)  # compared in float64: a float16 reference must not round atol
        if reference.dtype.kind == "c":
            np.greater(np.abs(reference), threshold, out=mask)
        else:  # both signs without abs(), which wraps the smallest integer
            with np.errstate(invalid="ignore"):
                np.greater(reference, threshold, out=mask)
                mask |= np.less(reference, -threshold)
        found = int(np.count_nonzero(mask))
        if not found:
            return
        self.count += found
        peak = float(np.max(reldiff, where=mask, initial=-np.inf))
        if self.max is not None and (math.isnan(self.max) or not (math.isnan(peak) or peak > self.max)):
            return  # the first NaN, or the first occurrence of the largest value, stays
        hits = np.isnan(reldiff) if math.isnan(peak) else reldiff == peak
        self.max, self.max_index = peak, offset + int(np.flatnonzero(hits & mask)[0])


class _Accumulator:
    """Pass 1 over one error array. ``sorted_pass``: the array is one chunk small enough for a sorted pass 2
    (cmpx_comparators.sorted_pass), so its bin keys are kept instead of counted into the 65,536 bins."""

    def __init__(self, chunk_elements: int, sorted_pass: bool = False) -> None:
        self.summary = Summary()
        self.counts: np.ndarray | None = None if sorted_pass else np.zeros(BINS, np.int64)
        self.keys: np.ndarray = np.empty(0, np.uint32)  # with sorted_pass: the bin keys of every element
        self._centered = np.empty(chunk_elements, np.float64)
        self._keys = np.empty(chunk_elements, np.uint32)
        self._total = 0.0
        self._mean = 0.0
        self._m2 = 0.0
        self.chunk_peak = (math.nan, -1)  # the last chunk's largest value (or first NaN) and its index in the chunk

    def add(self, values: np.ndarray, offset: int) -> np.ndarray:
        """Account for one chunk; return its bin keys (pass 2 needs them again)."""
        s = self.summary
        n = values.size
        index = int(values.argmax())  # the first NaN if any
        peak = float(values[index])
        self.chunk_peak = peak, index
        if math.isnan(peak):
            s.nan_count += int(np.count_nonzero(np.isnan(values)))
        if s.max_index < 0 or math.isnan(peak) and not math.isnan(s.max) or peak > s.max:
            s.max, s.max_index = peak, offset + index
        low = float(values.min())
        s.min = low if s.count == 0 or math.isnan(low) or low < s.min else s.min
        total = float(values.sum(dtype=np.float64))
        self._total += total
        chunk_mean = total / n
        with np.errstate(all="ignore"):  # inf - inf is NaN here as in numpy.std
            centered = np.subtract(values, chunk_mean, out=self._centered[:n], dtype=np.float64)
            # squared in place and summed pairwise: np.dot would hand this to a multithreaded BLAS, whose threads
            # (asleep between chunks) cost up to 100x the arithmetic on a loaded machine
            chunk_m2 = float(np.multiply(centered, centered, out=centered).sum())
        merged = s.count + n  # Chan et al.: merge the chunk's mean and M2 into the running ones
        delta = chunk_mean - self._mean
        self._m2 += chunk_m2 + delta * delta * s.count * n / merged if s.count else chunk_m2
        self._mean += delta * n / merged
        s.count = merged
        keys = bin_keys(values, self._keys[:n])
        if self.counts is None:
            self.keys = keys
        else:
            count_bins(keys, self.counts)
        return keys

    def bin_counts(self) -> np.ndarray:
        """The elements per bin (counted now from the kept keys under sorted_pass)."""
        if self.counts is None:
            self.counts = np.zeros(BINS, np.int64)
            np.add.at(self.counts, self.keys, 1)
        return self.counts

    def histogram(self, float_bits: int) -> list[tuple[float, float, int]]:
        if self.counts is None:
            return keys_histogram(self.keys, float_bits)
        return exponent_histogram(self.counts, float_bits)

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
                quantiles: Sequence[float] = (), nan_equal: bool = False, inf_equal: bool = False,
                samples: int = 0) -> ErrorStats:
    """Compare two arrays of the same shape; ``quantiles`` are computed besides the reported ones. ``samples``:
    also take a sample of up to that many elements for plots (cmpx_comparators.sampling)."""
    if actual.shape != reference.shape:
        raise ValueError(f"shape mismatch: {list(actual.shape)} vs reference {list(reference.shape)}")
    plan = plan_diff(actual.dtype, reference.dtype)
    chunk = min(CHUNK_ELEMENTS, max(actual.size, 1))
    diffs = DiffComputer(plan, chunk, nan_equal, inf_equal)
    sorted_pass = actual.size <= min(SORT_ELEMENTS, CHUNK_ELEMENTS)  # one chunk, small enough to sort
    abs_acc, rel_acc = _Accumulator(chunk, sorted_pass), _Accumulator(chunk, sorted_pass)
    masks = np.empty((2, chunk), bool)
    mismatches = 0
    min_atol = min_rtol = 0.0  # the largest abs and rel errors of the failing elements (see _largest_where)
    beyond = BeyondAtol(atol)
    errors = (np.empty(0), np.empty(0))  # the last chunk's: with sorted_pass, every element's
    for offset, a, b in _chunks(actual, reference):
        absdiff, reldiff = errors = diffs.compute(a, b)
        abs_acc.add(absdiff, offset)
        rel_acc.add(reldiff, offset)
        beyond.add(reldiff, b, offset, masks[0])
        abs_fails = _fails(absdiff, atol, masks[0])
        rel_fails = _fails(reldiff, rtol, masks[1])
        failing = np.logical_and(abs_fails, rel_fails, out=abs_fails)
        found = int(np.count_nonzero(failing))
        if found:
            mismatches += found
            min_atol = _nan_max(min_atol, _largest_where(absdiff, failing, abs_acc.chunk_peak))
            min_rtol = _nan_max(min_rtol, _largest_where(reldiff, failing, rel_acc.chunk_peak))
    for acc in (abs_acc, rel_acc):
        acc.finish_pass1()
    wanted = tuple(dict.fromkeys((*REPORTED_QUANTILES, *quantiles)))
    stats = ErrorStats(actual.shape, plan, abs_acc.summary, rel_acc.summary, mismatches, [],
                       reference_peak=diffs.reference_peak, beyond_atol=beyond)
    if mismatches:  # the smallest passing tolerances are only said of failing outputs
        stats.min_atol, stats.min_rtol = min_atol, min_rtol
    k = min(max(WORST_ELEMENTS, worst_count(samples)), stats.size)
    if sorted_pass:
        largest = _sorted_pass2(errors, (abs_acc, rel_acc), wanted, k)
    else:
        largest = _pass2(actual, reference, stats.plan, abs_acc, rel_acc, wanted, nan_equal, inf_equal, k)
    stats.worst = [_worst_element(actual, reference, plan, index, nan_equal, inf_equal)
                   for index in largest[:WORST_ELEMENTS]]
    if samples and stats.size:
        stats.sample = error_sample(actual, reference, plan, largest, samples,
                                    (abs_acc.bin_counts(), rel_acc.bin_counts()), nan_equal, inf_equal)
    bits = 32 if plan.work.itemsize == 4 else 64
    for acc in (abs_acc, rel_acc):
        acc.summary.histogram = acc.histogram(bits)
    return stats


def _fails(values: np.ndarray, tolerance: float, out: np.ndarray | None = None) -> np.ndarray:
    """values > tolerance, or NaN (into ``out[:n]`` when given)."""
    n = values.size
    with np.errstate(invalid="ignore"):  # not (values <= tolerance): NaN compares False, so it fails
        mask = np.less_equal(values, tolerance, out=None if out is None else out[:n])
    return np.logical_not(mask, out=mask)


def _largest_where(values: np.ndarray, failing: np.ndarray, chunk_peak: tuple[float, int]) -> float:
    """The largest of ``values`` over the ``failing`` elements (NaN if one of them is NaN); ``chunk_peak``: the
    chunk's own largest value (its first NaN) and its index, the answer whenever that element fails.

    This is the smallest passing tolerance: atol must cover the abs error of every element failing rtol, and of
    those, the ones also failing atol (the mismatches) have larger abs errors than the others (at most atol); so
    over an output with mismatches, the largest over the mismatches is the largest over all that fail rtol
    (likewise for rtol)."""
    peak, index = chunk_peak
    if failing[index]:
        return peak
    return float(np.max(values, where=failing, initial=0.0))


def _nan_max(a: float, b: float) -> float:
    """max() that keeps NaN (Python's max drops it when it comes second)."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _unsearched_quantiles(s: Summary, wanted: tuple[float, ...]) -> dict[float, float] | None:
    """The quantiles that need no search: 0 for an empty output, NaN where an error is NaN (as numpy), the value of a
    constant one; None for the others."""
    if s.count == 0 or s.nan_count or s.min == s.max:
        return {q: (0.0 if s.count == 0 else math.nan if s.nan_count else s.min) for q in wanted}
    return None


def _pass2(actual: np.ndarray, reference: np.ndarray, plan: DiffPlan, abs_acc: _Accumulator,
           rel_acc: _Accumulator, wanted: tuple[float, ...], nan_equal: bool, inf_equal: bool, k: int) -> list[int]:
    """Quantiles (into the summaries) and the flat indices of the ``k`` largest absolute errors, largest first."""
    n = abs_acc.summary.count
    bits = 32 if plan.work.itemsize == 4 else 64
    selectors: list[RankSelector | FineRanks | None] = []
    for acc in (abs_acc, rel_acc):
        s = acc.summary
        unsearched = _unsearched_quantiles(s, wanted)
        if unsearched is not None:
            s.quantiles = unsearched
            selectors.append(None)
        else:
            ranks = [r for q in wanted for r in quantile_ranks(n, q)[:2]]
            counted = bits == 32 and pays_off(acc.bin_counts(), ranks)
            selectors.append(FineRanks(acc.bin_counts(), ranks) if counted else RankSelector(acc.bin_counts(), ranks))
    if n == 0:
        return []
    top = TopK(k, abs_acc.bin_counts())
    chunk = min(CHUNK_ELEMENTS, n)
    diffs = DiffComputer(plan, chunk, nan_equal, inf_equal)
    keys = np.empty((2, chunk), np.uint32)  # reused: bin keys of float32 errors (float64 ones allocate)
    selected = np.empty(chunk, bool)
    for offset, a, b in _chunks(actual, reference):
        absdiff, reldiff = diffs.compute(a, b)
        abs_keys = bin_keys(absdiff, keys[0, :absdiff.size])
        top.add(absdiff, abs_keys, offset)
        if selectors[0] is not None:
            selectors[0].gather(absdiff, abs_keys, selected)
        if selectors[1] is not None:
            selectors[1].gather(reldiff, bin_keys(reldiff, keys[1, :reldiff.size]), selected)
    for selector, acc in zip(selectors, (abs_acc, rel_acc)):
        if selector is not None:
            found = selector.values()
            acc.summary.quantiles = {}
            for q in wanted:
                low, high, t = quantile_ranks(n, q)
                acc.summary.quantiles[q] = lerp(found[low], found[high], t)
    return list(top.indices())


def _sorted_pass2(errors: tuple[np.ndarray, np.ndarray], accumulators: tuple[_Accumulator, _Accumulator],
                  wanted: tuple[float, ...], k: int) -> list[int]:
    """_pass2 for an output of one chunk, from its errors of pass 1 (cmpx_comparators.sorted_pass)."""
    for values, acc in zip(errors, accumulators):
        unsearched = _unsearched_quantiles(acc.summary, wanted)
        acc.summary.quantiles = unsearched if unsearched is not None else sorted_quantiles(values, wanted)
    return largest_indices(errors[0], k)


def _worst_element(actual: np.ndarray, reference: np.ndarray, plan: DiffPlan, flat_index: int, nan_equal: bool,
                   inf_equal: bool) -> WorstElement:
    a = actual.reshape(-1)[flat_index:flat_index + 1]
    b = reference.reshape(-1)[flat_index:flat_index + 1]
    absdiff, reldiff = chunk_diffs(plan, a, b, nan_equal, inf_equal)
    index = tuple(int(i) for i in np.unravel_index(flat_index, actual.shape)) if actual.shape else ()
    return WorstElement(index, _scalar(a[0]), _scalar(b[0]), float(absdiff[0]), float(reldiff[0]))


def _scalar(value: Any) -> float | complex:
    value = np.asarray(value)
    if value.dtype.kind == "c":
        return complex(value)
    return float(value.astype(np.float64)) if value.dtype.kind != "b" else float(bool(value))
