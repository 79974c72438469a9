"""A bounded sample of one output's elements for error plots: the elements with the largest absolute errors plus a
uniform random sample, each with |reference| beside its errors, and exact per-octave error histograms.

Taken by ``error_stats`` while the two arrays are being compared, and only when plots are asked for: a few
thousand elements are gathered by index (no pass over the tensor of its own), so the sample costs little time and
its size does not grow with the tensor's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cmpx.outcome.results import ErrorSample
from cmpx_comparators.diffs import DiffPlan, chunk_diffs
from cmpx_comparators.order_stats import exponent_histogram

SEED = 0  # the same elements are drawn in every iteration, so iterations compare like with like


def worst_count(points: int) -> int:
    """How many of ``points`` go to the largest absolute errors (the rest are drawn uniformly)."""
    return max(1, points // 10) if points else 0


def error_sample(actual: np.ndarray, reference: np.ndarray, plan: DiffPlan, worst_indices: Sequence[int],
                 points: int, counts: tuple[np.ndarray, np.ndarray], nan_equal: bool, inf_equal: bool) -> ErrorSample:
    """At most ``points`` elements: ``worst_indices`` (flat indices of the largest absolute errors, largest first)
    then a uniform sample of the others, or every element of a small output (then ``worst`` is 0); ``counts`` are
    the abs and rel bit-pattern bin counts of pass 1."""
    flat_a, flat_b = actual.reshape(-1), reference.reshape(-1)
    n = flat_a.size
    if n <= points:
        worst, indices = np.empty(0, np.int64), np.arange(n, dtype=np.int64)
    else:
        worst = np.asarray(list(worst_indices)[:points], np.int64)
        others = np.random.default_rng(SEED).choice(n, points - worst.size, replace=False).astype(np.int64)
        indices = np.concatenate([worst, np.setdiff1d(others, worst)])  # sorted, so memory is read in order
    a, b = flat_a[indices], flat_b[indices]
    absdiff, reldiff = chunk_diffs(plan, a, b, nan_equal, inf_equal)
    with np.errstate(all="ignore"):
        magnitude = np.abs(b.astype(np.complex128 if plan.kind == "complex" else np.float64))
    bits = 32 if plan.work.itemsize == 4 else 64
    abs_counts, rel_counts = counts
    return ErrorSample(magnitude.astype(np.float64), absdiff.astype(np.float64), reldiff.astype(np.float64),
                       int(worst.size), int(n), octave_histogram(abs_counts, bits), octave_histogram(rel_counts, bits))


def octave_histogram(counts: np.ndarray, float_bits: int) -> list[tuple[float, float, int]]:
    """(low, high, count) rows, one per power of two from the smallest to the largest occupied one."""
    return exponent_histogram(counts, float_bits, max_bins=1 << 12)
