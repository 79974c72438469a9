"""Absolute and relative differences of one chunk, computed in a dtype that cannot overflow or wrap.

Floats up to 32 bits (float16 and bfloat16 included) are compared in float32, wider floats and integers in
float64; integer differences are taken exactly in 64-bit integer arithmetic first, so int64 and uint64 extremes
never wrap. Bools differ by inequality. The relative error divides by the reference, whose exact zeros count
as machine epsilon (2.22e-16) for floats, as in Polygraphy; for integers and bools a difference from an exact zero
is infinitely far (inf, as Polygraphy gives for integers), and no difference is 0 (where Polygraphy gives NaN).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cmpx.dtypes import is_floating

EPSILON = 2.220446049250313e-16


@dataclass(frozen=True)
class DiffPlan:
    """How two dtypes are compared: ``work`` is the dtype of the error arrays; ``note`` explains promotions."""

    kind: str  # "float", "int", "bool" or "complex"
    work: np.dtype
    note: str = ""


def plan_diff(actual: np.dtype, reference: np.dtype) -> DiffPlan:
    note = "" if actual == reference else f"dtypes differ: {actual} vs reference {reference}"
    if actual.kind == "b" and reference.kind == "b":
        return DiffPlan("bool", np.dtype(np.float32), note)
    if actual.kind == "c" or reference.kind == "c":
        return DiffPlan("complex", np.dtype(np.float64), _promoted(note, "complex128"))
    if actual.kind in "iub" and reference.kind in "iub":
        mixed_64 = {actual.kind, reference.kind} == {"i", "u"} and 8 in (actual.itemsize, reference.itemsize)
        if not mixed_64:
            return DiffPlan("int", np.dtype(np.float64), _promoted(note, "exact 64-bit integers"))
    narrow = all(is_floating(d) and d.itemsize <= 4 or d.kind == "b" for d in (actual, reference))
    work = np.dtype(np.float32 if narrow else np.float64)
    return DiffPlan("float", work, _promoted(note, str(work)))


def _promoted(note: str, how: str) -> str:
    return f"{note} (compared as {how})" if note else ""


class DiffComputer:
    """Computes (absdiff, reldiff) chunk after chunk into buffers it reuses, so the hot loop allocates nothing
    on the common float path (fresh multi-megabyte temporaries per chunk cost page faults that can cost more
    than the arithmetic). The arrays returned are overwritten by the next call."""

    def __init__(self, plan: DiffPlan, chunk_elements: int, nan_equal: bool = False, inf_equal: bool = False):
        self.plan = plan
        self.nan_equal = nan_equal
        self.inf_equal = inf_equal
        self.reference_peak = 0.0  # the largest |reference| seen (NaN ignored): can the check fail at all?
        if plan.kind == "float":
            self._buffers = [np.empty(chunk_elements, plan.work) for _ in range(4)]
            self._zero = np.empty(chunk_elements, bool)

    def compute(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.plan.kind != "float":
            return chunk_diffs(self.plan, a, b, self.nan_equal, self.inf_equal)
        n = a.size
        absdiff, reldiff, a_work, b_work = (buffer[:n] for buffer in self._buffers)
        zero = self._zero[:n]
        if a.dtype != self.plan.work:  # e.g. float16: convert before subtracting, never subtract in float16
            np.copyto(a_work, a, casting="unsafe")
            a = a_work
        if b.dtype != self.plan.work:
            np.copyto(b_work, b, casting="unsafe")
            b = b_work
        with np.errstate(all="ignore"):
            np.subtract(a, b, out=absdiff)
            np.abs(absdiff, out=absdiff)
            np.abs(b, out=reldiff)
            if n:
                self._peak(reldiff)
            np.copyto(reldiff, reldiff.dtype.type(EPSILON), where=np.equal(reldiff, 0, out=zero))
            if self.nan_equal or self.inf_equal:
                self._equal_specials(a, b, absdiff, reldiff)
            np.divide(absdiff, reldiff, out=reldiff)
        return absdiff, reldiff

    def _equal_specials(self, a: np.ndarray, b: np.ndarray, absdiff: np.ndarray, magnitude: np.ndarray) -> None:
        """--nan-equal and equal infinities: an error of 0 (0 over 1) where both sides hold NaN or the same
        infinity. Only such elements have a NaN difference, so the rest of the chunk is not looked at again."""
        where = np.flatnonzero(np.isnan(absdiff, out=self._zero[:absdiff.size]))
        if not where.size:
            return
        x, y = a[where], b[where]
        same = np.zeros(where.size, bool)
        if self.nan_equal:
            same |= np.isnan(x) & np.isnan(y)
        if self.inf_equal:
            same |= np.isinf(x) & (x == y)
        absdiff[where[same]] = 0
        magnitude[where[same]] = 1


    def _peak(self, magnitudes: np.ndarray) -> None:
        peak = float(magnitudes.max())
        if peak != peak:  # a NaN in the chunk: its largest number, without it
            peak = float(np.nanmax(magnitudes)) if not np.isnan(magnitudes).all() else 0.0
        self.reference_peak = max(self.reference_peak, peak)


def chunk_diffs(plan: DiffPlan, a: np.ndarray, b: np.ndarray, nan_equal: bool,
                inf_equal: bool) -> tuple[np.ndarray, np.ndarray]:
    """(absdiff, reldiff) of two flat chunks, both in ``plan.work``."""
    with np.errstate(all="ignore"):
        if plan.kind == "bool":
            absdiff = (a != b).astype(plan.work)
            denominator = b.astype(plan.work)
        elif plan.kind == "int":
            absdiff = _exact_int_absdiff(a, b)
            denominator = np.abs(b.astype(plan.work))
        else:
            a_work = a.astype(plan.work if plan.kind == "float" else np.complex128, copy=False)
            b_work = b.astype(plan.work if plan.kind == "float" else np.complex128, copy=False)
            absdiff = np.abs(a_work - b_work).astype(plan.work, copy=False)
            denominator = np.abs(b_work).astype(plan.work, copy=False)
            if nan_equal or inf_equal:
                same = np.zeros(absdiff.shape, bool)
                if nan_equal:
                    same |= np.isnan(a_work) & np.isnan(b_work)
                if inf_equal:
                    same |= np.isinf(a_work) & (a_work == b_work)
                absdiff[same] = 0
                denominator[same] = 1
        if plan.kind in ("int", "bool"):  # exact values: against an exact zero, any difference is infinitely far
            zero = denominator == 0
            reldiff = np.divide(absdiff, denominator, out=denominator, where=~zero)
            reldiff[zero] = np.where(absdiff[zero] > 0, np.inf, 0.0)
            return absdiff, reldiff
        denominator[denominator == 0] = EPSILON
        reldiff = np.divide(absdiff, denominator, out=denominator)
    return absdiff, reldiff


def _exact_int_absdiff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| for integer arrays, exact in uint64 (a wrapped subtraction of the larger minus the smaller)."""
    wide = np.uint64 if a.dtype.kind == b.dtype.kind == "u" else np.int64
    a64, b64 = a.astype(wide, copy=False), b.astype(wide, copy=False)
    larger, smaller = np.maximum(a64, b64), np.minimum(a64, b64)
    return (larger.view(np.uint64) - smaller.view(np.uint64)).astype(np.float64)
