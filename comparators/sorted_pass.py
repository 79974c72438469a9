"""Pass 2 of the error statistics for an output small enough to sort: the same exact quantiles and worst elements
as the binned pass (cmpx_comparators.order_stats), in the same order, from errors already computed.

The binned pass costs a fixed few milliseconds (scans of 65,536 bins) whatever the output's size: on a small
model that was most of the comparison, on every iteration. Sorting a few thousand errors costs microseconds.
Both order elements by their bit patterns, as unsigned integers, so they agree on ties, on -0.0 and on NaN.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cmpx_comparators.order_stats import bit_patterns, lerp, quantile_ranks

SORT_ELEMENTS = 1 << 14  # up to this many elements, sorting beats scanning the bins


def sorted_quantiles(values: np.ndarray, quantiles: Sequence[float]) -> dict[float, float]:
    """numpy's linear quantiles of ``values`` (float32 or float64, no NaN), as the binned pass computes them."""
    patterns = np.sort(bit_patterns(values))
    ordered = patterns.view(values.dtype)
    n = values.size
    found = {}
    for q in quantiles:
        low, high, t = quantile_ranks(n, q)
        found[q] = lerp(float(ordered[low]), float(ordered[high]), t)
    return found


def largest_indices(values: np.ndarray, k: int) -> list[int]:
    """The flat indices of the ``k`` largest ``values`` by bit pattern (NaN first), the earliest among equal ones."""
    patterns = bit_patterns(values)
    order = np.lexsort((np.arange(values.size), ~patterns))[:k]
    return [int(i) for i in order]
