"""The element-wise tolerance check, with Polygraphy's rule: strict '>', NaN counts as exceeding, and an
element passes if EITHER tolerance holds. The relative error divides by the reference; exact zeros of the
reference count as machine epsilon (2.22e-16), as in Polygraphy."""

from __future__ import annotations

import numpy as np

from cmpx.compare import MetricResult, Tolerance
from cmpx.dtypes import is_floating

EPSILON = float(np.finfo(np.float64).eps)


def working_dtype(a: np.dtype, b: np.dtype) -> np.dtype:
    """The dtype differences are computed in: float32 for floats up to 32 bits (float16 and bfloat16
    included), float64 otherwise, so integer subtraction can never wrap around."""
    if a.kind == "c" or b.kind == "c":
        return np.dtype(np.complex128)
    if is_floating(a) and is_floating(b) and max(a.itemsize, b.itemsize) <= 4:
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def check_elementwise(actual: np.ndarray, reference: np.ndarray, tolerance: Tolerance) -> MetricResult:
    if actual.shape != reference.shape:
        return MetricResult(False, size=reference.size,
                            note=f"shape mismatch: {list(actual.shape)} vs reference {list(reference.shape)}")
    if reference.size == 0:
        return MetricResult(True)
    work = working_dtype(actual.dtype, reference.dtype)
    a = actual.astype(work, copy=False)
    b = reference.astype(work, copy=False)
    with np.errstate(all="ignore"):  # inf - inf and x / inf are expected here; NaN counts as exceeding
        absdiff = np.abs(a - b)
        denominator = np.abs(b)
        denominator[denominator == 0] = EPSILON
        reldiff = absdiff / denominator
        mismatch = ((absdiff > tolerance.atol) | np.isnan(absdiff)) & ((reldiff > tolerance.rtol) | np.isnan(reldiff))
    mismatches = int(np.count_nonzero(mismatch))
    return MetricResult(mismatches == 0, float(np.max(absdiff)), float(np.max(reldiff)), mismatches,
                        int(reference.size))
