"""Tolerances from the noise floor (``cmpx tolerances``; the method is docs/tolerances.md): per output, the errors
of backend A against backend B measured over many seeded iterations, turned into an atol and rtol that pass
every measured element with a stated margin, and never tighter than float32 itself can be.

Element-wise (the default check), for one output, e = |a - b| and m = |b| over every element of every iteration:
  rtol0 is tried on a grid (0, and 8 values a decade from one float32 ulp, 2^-23, to 1); for each, atol0 is the
  largest e of the elements it leaves uncovered (e > rtol0 x m); of these pairs, all of which pass every element,
  the one allowing the least error in all, sum of max(atol0, rtol0 x m) over the elements, is taken.
  atol = S x max(atol0, floor atol), rtol = S x max(rtol0, floor rtol), rounded up to 2 significant digits.
Every measured element then passes by S: e x S <= rtol x m, or else e x S <= atol. The floor is the same
measurement of B against the fp64 oracle (B's own rounding error), or, without the oracle, one float32 ulp:
rtol EPSILON_32 and atol EPSILON_32 x rms(m). For --check-error-stat max/mean/median/quantile, atol0 and rtol0
are the largest per-iteration statistic of e and of e / m (m's exact zeros counted as 2.22e-16, as the check
does)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

# the rtols tried: 0 and 8 a decade from one float32 ulp (2^-23) to 1
RTOL_GRID = np.concatenate([[0.0], 2.0 ** -23 * 10.0 ** (np.arange(0, 8 * 7 + 1) / 8)])
CHUNK = 1 << 14  # elements per step of the grid's (candidates x elements) arrays
EPSILON_32 = 2.0 ** -23  # float32's machine epsilon: one ulp of relative error
ZERO_REFERENCE = 2.220446049250313e-16  # what an exact zero of the reference divides by in the relative error

Pairs = Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]  # (a, b) of each iteration, each call from the start


class NotFinite(ValueError):
    """The two sides disagree on a NaN or an infinity: no tolerance passes that element."""


class NaNOnBothSides(NotFinite):
    """Both sides are NaN at an element, and NaN is not counted as equal (no --nan-equal)."""


@dataclass(frozen=True)
class Measured:
    """What one output's errors came to: the smallest passing (atol0, rtol0) and what they were read from."""

    atol: float
    rtol: float
    rms: float = 0.0  # of |b|
    max_abs: float = 0.0
    elements: int = 0
    iterations: int = 0


def _errors(a: np.ndarray, b: np.ndarray, nan_equal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(e, m) in float64; equal values differ by 0, the same infinity is left out, and so is a NaN on both sides
    with ``nan_equal`` (--nan-equal); any other NaN or unequal infinities raise."""
    a64, b64 = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        e = np.where(a64 == b64, 0.0, np.abs(a64 - b64))
    both_nan = np.isnan(a64) & np.isnan(b64) if nan_equal else None
    if both_nan is not None and both_nan.any():
        e[both_nan] = 0.0
    bad = ~np.isfinite(e)
    if bad.any():
        index = int(np.argmax(bad))
        if np.isnan(a64[index]) and np.isnan(b64[index]):
            raise NaNOnBothSides(f"element {index}")
        raise NotFinite(f"element {index} is {a64[index]} against {b64[index]}")
    # the same infinity (or with nan_equal a NaN) on both sides: equal, as the check counts it, and not measured
    kept = np.isfinite(b64)
    return (e, np.abs(b64)) if kept.all() else (e[kept], np.abs(b64[kept]))


def _chunks(e: np.ndarray, m: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for start in range(0, e.size, CHUNK):
        yield e[start:start + CHUNK], m[start:start + CHUNK]


def _elementwise(pairs: Pairs, nan_equal: bool) -> Measured:
    """Pass 1: each candidate rtol's atol (the largest error it leaves uncovered); pass 2: each candidate's summed
    allowed error; the smallest sum wins."""
    grid = RTOL_GRID[:, None]
    needed = np.zeros(len(RTOL_GRID))
    squares, count, iterations, max_abs = 0.0, 0, 0, 0.0
    for a, b in pairs():
        e, m = _errors(a, b, nan_equal)
        squares += float(np.dot(m, m)) if m.size else 0.0
        count += m.size
        iterations += 1
        max_abs = max(max_abs, float(e.max(initial=0.0)))
        for e_part, m_part in _chunks(e, m):
            uncovered = np.where(e_part > grid * m_part, e_part, 0.0)
            np.maximum(needed, uncovered.max(axis=1, initial=0.0), out=needed)
    allowed = np.zeros(len(RTOL_GRID))
    for a, b in pairs():
        e, m = _errors(a, b, nan_equal)
        for _, m_part in _chunks(e, m):
            allowed += np.maximum(needed[:, None], grid * m_part).sum(axis=1)
    best = int(np.argmin(allowed))
    rms = math.sqrt(squares / count) if count else 0.0
    return Measured(float(needed[best]), float(RTOL_GRID[best]), rms, max_abs, count, iterations)


def _statistic(values: np.ndarray, check: str, quantile: float) -> float:
    if not values.size:
        return 0.0
    if check == "max":
        return float(values.max())
    if check == "mean":
        return float(values.mean())
    return float(np.quantile(values, 0.5 if check == "median" else quantile))


def _per_iteration(pairs: Pairs, check: str, quantile: float, nan_equal: bool) -> Measured:
    atol = rtol = max_abs = squares = 0.0
    count = iterations = 0
    for a, b in pairs():
        e, m = _errors(a, b, nan_equal)
        atol = max(atol, _statistic(e, check, quantile))
        rtol = max(rtol, _statistic(e / np.where(m == 0, ZERO_REFERENCE, m), check, quantile))
        max_abs = max(max_abs, float(e.max(initial=0.0)))
        squares += float(np.dot(m, m)) if m.size else 0.0
        count += m.size
        iterations += 1
    return Measured(atol, rtol, math.sqrt(squares / count) if count else 0.0, max_abs, count, iterations)


def measure(pairs: Pairs, check: str = "elemwise", quantile: float = 0.99, nan_equal: bool = False) -> Measured:
    """The smallest (atol, rtol) that pass ``check`` on every iteration of ``pairs``, by the method above; with
    ``nan_equal`` a NaN on both sides is a match and not measured (cmpx run --nan-equal)."""
    return (_elementwise(pairs, nan_equal) if check == "elemwise" else
            _per_iteration(pairs, check, quantile, nan_equal))


def epsilon_floor(measured: Measured) -> Measured:
    """Without the oracle: one float32 ulp, relative, and absolute at the output's root mean square."""
    return Measured(EPSILON_32 * measured.rms, EPSILON_32)


def round_up(value: float, digits: int = 2) -> float:
    """``value`` rounded up to ``digits`` significant digits (never down: the margin stays)."""
    if value <= 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(value)) - digits + 1
    rounded = math.ceil(value / 10.0 ** exponent - 1e-9) * 10.0 ** exponent
    return float(f"{rounded:.{digits}g}") if float(f"{rounded:.{digits}g}") >= value else rounded


def tolerances(measured: Measured, floor: Measured, factor: float) -> tuple[float, float]:
    """(atol, rtol): ``factor`` x the larger of the measurement and the floor, rounded up."""
    return (round_up(factor * max(measured.atol, floor.atol)), round_up(factor * max(measured.rtol, floor.rtol)))


def pairs_of(loaders: Iterable[Callable[[], tuple[np.ndarray, np.ndarray]]]) -> Pairs:
    """A Pairs over ``loaders`` (one per iteration), each read again at every pass."""
    loaders = list(loaders)
    return lambda: (load() for load in loaders)
