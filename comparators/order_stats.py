"""Exact quantiles and largest elements of non-negative float arrays in two streaming passes.

For floats >= 0 (and NaN), the integer value of the bit pattern grows with the float value, so counting
elements per top-16-bit prefix (65,536 bins) locates the bin holding any rank. A second pass gathers only the
elements of the few bins that hold the wanted ranks and selects within them. This is exact, O(n), and needs
memory for one chunk plus the gathered bins, instead of the full copy and sort that numpy.quantile makes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

BINS = 1 << 16


def bit_patterns(values: np.ndarray) -> np.ndarray:
    """The unsigned-integer view of a float32 or float64 array (orders like the floats for x >= 0, NaN last)."""
    return values.view(np.uint32 if values.dtype.itemsize == 4 else np.uint64)


def bin_keys(values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The top 16 bits of each element: its bin (uint32 for float32, which bincount takes without a copy;
    ``out``, a uint32 buffer, is used for float32)."""
    bits = bit_patterns(values)
    if bits.dtype.itemsize == 4:
        return np.right_shift(bits, 16, out=out)
    return (bits >> 48).astype(np.intp)


def count_bins(keys: np.ndarray, counts: np.ndarray) -> None:
    """Add the elements whose bins are ``keys`` to ``counts`` (an int64 array of BINS entries)."""
    counts += np.bincount(keys, minlength=BINS)


def quantile_ranks(n: int, q: float) -> tuple[int, int, float]:
    """numpy's default ('linear') quantile: the two ranks around q * (n - 1) and the weight of the upper one."""
    position = q * (n - 1)
    lower = min(int(math.floor(position)), n - 1)
    return lower, min(lower + 1, n - 1), position - lower


def lerp(low: float, high: float, t: float) -> float:
    """numpy's interpolation between neighbouring order statistics (numerically the same formula), except
    that equal neighbours give their value (numpy turns two infinities into NaN)."""
    if low == high:
        return low
    diff = high - low
    return high - diff * (1 - t) if t >= 0.5 else low + diff * t


class RankSelector:
    """Finds the values at given ranks: built after pass 1 (with the bin counts), ``gather`` per chunk in pass 2,
    then ``values``. The elements of the bins that hold the ranks are gathered and selected among (float64: float32
    errors have cmpx_comparators.fine_ranks, which gathers nothing)."""

    def __init__(self, counts: np.ndarray, ranks: Iterable[int]):
        self._cumulative = np.cumsum(counts)
        self._ranks = sorted(set(ranks))
        self._bins = {rank: int(np.searchsorted(self._cumulative, rank, side="right")) for rank in self._ranks}
        self._wanted = np.zeros(BINS, bool)
        self._wanted[list(self._bins.values())] = True
        self._gathered: list[tuple[np.ndarray, np.ndarray]] = []

    def gather(self, values: np.ndarray, keys: np.ndarray, selected: np.ndarray | None = None) -> None:
        """One chunk: its values and their bin keys (``selected``: a bool buffer of at least its size)."""
        selected = np.take(self._wanted, keys, out=None if selected is None else selected[:keys.size])
        if selected.any():
            self._gathered.append((values[selected], keys[selected]))

    def values(self) -> dict[int, float]:
        if not self._ranks:
            return {}
        values = np.concatenate([v for v, _ in self._gathered])
        keys = np.concatenate([k for _, k in self._gathered])
        self._gathered.clear()
        found: dict[int, float] = {}
        for bin_index in sorted(set(self._bins.values())):
            in_bin = values[keys == bin_index]
            before = int(self._cumulative[bin_index - 1]) if bin_index else 0
            ranks = [r for r, b in self._bins.items() if b == bin_index]
            offsets = [r - before for r in ranks]
            in_bin.partition(offsets)
            for rank, offset in zip(ranks, offsets):
                found[rank] = float(in_bin[offset])
        return found


class TopK:
    """The k largest elements (NaN first) with their flat indices, the earliest first among equal ones. After
    pass 1 the bin counts say which bins can hold them, so pass 2 looks closely only at the elements of those top
    bins, and once k are found, only at those larger than the k-th (sorting, never partitioning: numpy's
    partition slows down a hundredfold on the many equal values of a nearly constant error)."""

    def __init__(self, k: int, counts: np.ndarray):
        self.k = k
        from_top = np.cumsum(counts[::-1])
        self.first_bin = BINS - 1 - int(np.searchsorted(from_top, k)) if k else BINS
        self._bits = np.empty(0, np.uint64)
        self._indices = np.empty(0, np.int64)

    def add(self, values: np.ndarray, keys: np.ndarray, offset: int) -> None:
        patterns = bit_patterns(values)
        full = self._bits.size == self.k
        if full and (not patterns.size or patterns.max() <= self._bits[-1]):
            return  # nothing here beats the k-th (an equal one comes later: the earlier stays)
        candidates = np.flatnonzero(keys >= self.first_bin)
        bits = patterns[candidates]
        if full:
            beats = bits > self._bits[-1]
            candidates, bits = candidates[beats], bits[beats]
        if bits.size > self.k:  # the k largest of the chunk, the earliest of equal ones
            kth = np.sort(bits)[bits.size - self.k]
            above = bits > kth
            tied = np.flatnonzero(bits == kth)[:self.k - int(np.count_nonzero(above))]
            keep = np.concatenate([np.flatnonzero(above), tied])
            candidates, bits = candidates[keep], bits[keep]
        merged_bits = np.concatenate([self._bits, bits.astype(np.uint64)])
        merged_indices = np.concatenate([self._indices, candidates.astype(np.int64) + offset])
        order = np.lexsort((merged_indices, ~merged_bits))[:self.k]  # largest first, then earliest
        self._bits, self._indices = merged_bits[order], merged_indices[order]

    def indices(self) -> Sequence[int]:
        return [int(i) for i in self._indices]


def exponent_histogram(counts: np.ndarray, float_bits: int, max_bins: int = 8) -> list[tuple[float, float, int]]:
    """A log-scale histogram from the bin counts: (low, high, count) rows. The first bin (zero and the tiniest
    subnormals) gets its own row (0, 0), infinities and NaN one row (inf, nan)."""
    mantissa_bits, _, exponent_count = _layout(float_bits)
    per_exponent = counts.reshape(-1, 1 << mantissa_bits).sum(axis=1)[:exponent_count]
    return _histogram_rows(per_exponent, int(counts[0]), float_bits, max_bins)


def keys_histogram(keys: np.ndarray, float_bits: int, max_bins: int = 8) -> list[tuple[float, float, int]]:
    """exponent_histogram of the elements whose bin keys are ``keys``, without counting every bin."""
    mantissa_bits, _, exponent_count = _layout(float_bits)
    per_exponent = np.bincount(keys >> mantissa_bits, minlength=2 * exponent_count)[:exponent_count]
    return _histogram_rows(per_exponent, int(np.count_nonzero(keys == 0)), float_bits, max_bins)


def _layout(float_bits: int) -> tuple[int, int, int]:
    """Of a bin key (the top 16 bits): the mantissa bits after the sign and exponent; the exponent's bias and
    number of values."""
    return (7, 127, 256) if float_bits == 32 else (4, 1023, 2048)


def _histogram_rows(per_exponent: np.ndarray, zeros: int, float_bits: int,
                    max_bins: int) -> list[tuple[float, float, int]]:
    bias = _layout(float_bits)[1]
    rows = []
    if zeros:
        rows.append((0.0, 0.0, zeros))
    per_exponent = per_exponent.copy()
    per_exponent[0] -= zeros  # subnormals stay in exponent 0
    special = int(per_exponent[-1])
    occupied = np.flatnonzero(per_exponent[:-1])
    if len(occupied):
        first, last = int(occupied[0]), int(occupied[-1])
        width = max(1, math.ceil((last - first + 1) / max_bins))
        for start in range(first, last + 1, width):
            stop = min(start + width, last + 1)
            rows.append((_power_of_two(start - bias), _power_of_two(stop - bias), int(per_exponent[start:stop].sum())))
    if special:
        rows.append((math.inf, math.nan, special))
    return rows


def _power_of_two(exponent: int) -> float:
    return math.inf if exponent > 1023 else 2.0 ** exponent
