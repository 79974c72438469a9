"""Exact order statistics of float32 errors from a second-level count, gathering no element.

Pass 1 counted the errors by the top 16 bits of their bit patterns (cmpx_comparators.order_stats), which says in
which bin each wanted rank lies. A float32 has 16 more bits: pass 2 counts the elements of those bins by their
low 16 bits, one row of 65,536 counts per bin, and a rank's row then gives every bit of its value. The time is one
count per element of those bins and the memory a few rows, however many elements share a bin (a nearly constant
error, such as a model off by a factor, puts every element in one or two bins, which gathering them would copy
and partition whole).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from cmpx_comparators.order_stats import BINS, bit_patterns

ROW = 1 << 16  # counts per bin: one per value of the low 16 bits


def pays_off(counts: np.ndarray, ranks: Iterable[int]) -> bool:
    """Whether counting beats gathering (cmpx_comparators.order_stats.RankSelector): when the bins holding the
    ``ranks`` hold more than an eighth of a row's worth of elements each, on average. Below that, the few elements
    gathered take less memory than the rows of counts, and less time than zeroing them."""
    cumulative = np.cumsum(counts)
    bins = {int(np.searchsorted(cumulative, rank, side="right")) for rank in ranks}
    return int(sum(int(counts[b]) for b in bins)) > len(bins) * ROW // 8


class FineRanks:
    """The float32 values at given ranks: built after pass 1 with its bin counts, ``gather`` per chunk in pass 2,
    then ``values``. Wanted bins within SPAN of each other are counted over their whole range (a subtraction
    gives an element's row and column); others through a lookup of each element's row."""

    PENDING = 1 << 18  # row-and-column indices buffered before they are counted (2 MiB)
    SPAN = 4  # at most this many rows (2 MiB) for a contiguous range

    def __init__(self, counts: np.ndarray, ranks: Iterable[int]):
        cumulative = np.cumsum(counts)
        self._bins = {rank: int(np.searchsorted(cumulative, rank, side="right")) for rank in set(ranks)}
        self._before = {b: int(cumulative[b - 1]) if b else 0 for b in self._bins.values()}
        wanted = sorted(self._before)
        self._wanted = np.zeros(BINS, bool)
        self._base: np.ndarray | None = None  # per bin: what turns a bit pattern into its index (lookup form)
        if not wanted:
            self._rows: dict[int, int] = {}
        elif wanted[-1] - wanted[0] < self.SPAN:
            self._low, self._high = wanted[0], wanted[-1]
            self._rows = {b: b - self._low for b in range(self._low, self._high + 1)}
            self._wanted[self._low:self._high + 1] = True
        else:
            self._rows = {b: row for row, b in enumerate(wanted)}
            self._wanted[wanted] = True
            self._base = np.zeros(BINS, np.intp)
            for b, row in self._rows.items():
                self._base[b] = (row - b) * ROW
        self._counts = np.zeros(len(self._rows) * ROW, np.int64)
        self._pending = np.empty(self.PENDING, np.intp)
        self._filled = 0

    def gather(self, values: np.ndarray, keys: np.ndarray, selected: np.ndarray | None = None) -> None:
        """One chunk: its float32 values and their bin keys (``selected``: a bool buffer of at least its size)."""
        if not self._rows or not keys.size:
            return
        patterns = bit_patterns(values)
        if self._base is None:  # a contiguous range: a chunk wholly inside it is counted as it is
            low, high = int(keys.min()), int(keys.max())
            if high < self._low or low > self._high:
                return
            if self._low <= low and high <= self._high:
                self._add(patterns)
                return
        mask = np.take(self._wanted, keys, out=None if selected is None else selected[:keys.size])
        if mask.any():
            self._add(patterns[mask])

    def _add(self, patterns: np.ndarray) -> None:
        if self._filled + patterns.size > self.PENDING:
            self._flush()
        if patterns.size > self.PENDING:
            self._count(self._index(patterns, np.empty(patterns.size, np.intp)))
            return
        self._index(patterns, self._pending[self._filled:self._filled + patterns.size])
        self._filled += patterns.size

    def _index(self, patterns: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Each pattern's place in the counts (row * ROW + low 16 bits), into ``out``."""
        if self._base is None:
            np.subtract(patterns, self._low * ROW, out=out, dtype=np.intp)
        else:
            np.take(self._base, patterns >> 16, out=out)
            out += patterns
        return out

    def _count(self, indices: np.ndarray) -> None:
        self._counts += np.bincount(indices, minlength=self._counts.size)

    def _flush(self) -> None:
        self._count(self._pending[:self._filled])
        self._filled = 0

    def values(self) -> dict[int, float]:
        self._flush()
        found: dict[int, float] = {}
        for rank, b in self._bins.items():
            row = self._rows[b]
            cumulative = np.cumsum(self._counts[row * ROW:(row + 1) * ROW])
            low = int(np.searchsorted(cumulative, rank - self._before[b], side="right"))
            found[rank] = float(np.array([b * ROW + low], np.uint32).view(np.float32)[0])
        return found
