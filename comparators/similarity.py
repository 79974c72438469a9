"""Streaming sums behind the similarity metrics (cosine, L2, SNR, PSNR), in float64, chunk by chunk."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CHUNK_ELEMENTS = 1 << 19


@dataclass(frozen=True)
class Sums:
    count: int
    dot: float  # sum(a * b)
    actual_squares: float  # sum(a^2)
    reference_squares: float  # sum(b^2)
    diff_squares: float  # sum((a - b)^2)
    reference_peak: float  # max(b)


def similarity_sums(actual: np.ndarray, reference: np.ndarray) -> Sums:
    a_flat, b_flat = actual.reshape(-1), reference.reshape(-1)
    dot = aa = bb = dd = 0.0
    peak = -math.inf
    with np.errstate(all="ignore"):
        for start in range(0, a_flat.size, CHUNK_ELEMENTS):
            a = _real64(a_flat[start:start + CHUNK_ELEMENTS])
            b = _real64(b_flat[start:start + CHUNK_ELEMENTS])
            diff = a - b
            dot += _dot(a, b)
            aa += _dot(a, a)
            bb += _dot(b, b)
            dd += _dot(diff, diff)
            peak = max(peak, float(b.max()))
    return Sums(a_flat.size, dot, aa, bb, dd, peak)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """sum(a * b) by numpy's own loops: np.dot hands it to a multithreaded BLAS, whose threads (asleep between
    chunks) cost up to 100x the arithmetic on a loaded machine."""
    return float(np.einsum("i,i->", a, b))


def _real64(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "c":
        raise ValueError("similarity metrics compare real tensors; use a tolerance check for complex outputs")
    return values.astype(np.float64, copy=False)


def cosine(s: Sums) -> float:
    """Cosine similarity; two all-zero tensors are identical (1.0), one all-zero tensor is orthogonal (0.0)."""
    if s.actual_squares == 0 and s.reference_squares == 0:
        return 1.0
    if s.actual_squares == 0 or s.reference_squares == 0:
        return 0.0
    value = s.dot / (math.sqrt(s.actual_squares) * math.sqrt(s.reference_squares))
    return value if math.isnan(value) else max(-1.0, min(1.0, value))


def l2(s: Sums) -> float:
    return math.sqrt(s.diff_squares)


def snr(s: Sums) -> float:
    """10 log10(power of the reference / power of the difference), in dB; inf when identical."""
    if s.diff_squares == 0:
        return math.inf
    if s.reference_squares == 0:
        return -math.inf
    return 10 * math.log10(s.reference_squares / s.diff_squares)


def psnr(s: Sums) -> float:
    """20 log10(peak of the reference) - 10 log10(mean squared error), in dB; the peak is 1 if not positive."""
    if s.diff_squares == 0:
        return math.inf
    peak = s.reference_peak if s.reference_peak > 0 else 1.0
    return 20 * math.log10(peak) - 10 * math.log10(s.diff_squares / s.count)
