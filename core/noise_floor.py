"""Tolerances from the noise floor (``cmpx tolerances``; the method is docs/tolerances.md): per output, the errors
of backend A against backend B measured over many seeded iterations, turned into an atol and rtol that pass
every measured element with a stated margin, and never tighter than float32 itself can be.

Element-wise (the default check), for one output, e = |a - b| and m = |b| over all iterations:
  f     = FLOOR_FRACTION x the root mean square of m           (below f, a relative error means little)
  rtol0 = max of e / m over the elements with m >= f           (0 when there are none)
  atol0 = max of e over the elements with e > rtol0 x m         (those rtol0 does not cover: all have m < f)
  atol  = S x max(atol0, floor atol), rtol = S x max(rtol0, floor rtol), rounded up to 2 significant digits
Every measured element then passes by S: e x S <= rtol x m, or else e x S <= atol. The floor is the same
measurement of B against the fp64 oracle (B's own rounding error), or, without the oracle, one float32 ulp:
rtol EPSILON_32 and atol EPSILON_32 x f. For --check-error-stat max/mean/median/quantile, atol0 and rtol0 are the
largest per-iteration statistic of e and of e / m (m's exact zeros counted as 2.22e-16, as the check does)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

SAFETY_FACTOR = 4.0
FLOOR_FRACTION = 0.1
EPSILON_32 = 2.0 ** -23  # float32's machine epsilon: one ulp of relative error
ZERO_REFERENCE = 2.220446049250313e-16  # what an exact zero of the reference divides by in the relative error

Pairs = Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]]  # (a, b) of each iteration, each call from the start


class NotFinite(ValueError):
    """The two sides disagree on a NaN or an infinity: no tolerance passes that element."""


@dataclass(frozen=True)
class Measured:
    """What one output's errors came to: the smallest passing (atol0, rtol0) and what they were read from."""

    atol: float
    rtol: float
    floor_magnitude: float = 0.0  # f (element-wise)
    rms: float = 0.0  # of |b|
    max_abs: float = 0.0
    elements: int = 0
    iterations: int = 0


def _errors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(e, m) in float64; equal values (the same infinity too) differ by 0; NaN or unequal infinities raise."""
    a64, b64 = np.asarray(a, np.float64).reshape(-1), np.asarray(b, np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        e = np.where(a64 == b64, 0.0, np.abs(a64 - b64))
    bad = ~np.isfinite(e)
    if bad.any():
        index = int(np.argmax(bad))
        raise NotFinite(f"element {index} is {a64[index]} against {b64[index]}")
    return e, np.abs(b64)


def _elementwise(pairs: Pairs) -> Measured:
    squares, count, iterations, max_abs = 0.0, 0, 0, 0.0
    for a, b in pairs():
        e, m = _errors(a, b)
        squares += float(np.dot(m, m)) if m.size else 0.0
        count += m.size
        iterations += 1
        max_abs = max(max_abs, float(e.max(initial=0.0)))
    rms = math.sqrt(squares / count) if count else 0.0
    floor = FLOOR_FRACTION * rms
    rtol = 0.0
    for a, b in pairs():
        e, m = _errors(a, b)
        large = (m >= floor) & (m > 0)
        if large.any():
            rtol = max(rtol, float((e[large] / m[large]).max()))
    atol = 0.0
    for a, b in pairs():
        e, m = _errors(a, b)
        uncovered = e > rtol * m
        if uncovered.any():
            atol = max(atol, float(e[uncovered].max()))
    return Measured(atol, rtol, floor, rms, max_abs, count, iterations)


def _statistic(values: np.ndarray, check: str, quantile: float) -> float:
    if not values.size:
        return 0.0
    if check == "max":
        return float(values.max())
    if check == "mean":
        return float(values.mean())
    return float(np.quantile(values, 0.5 if check == "median" else quantile))


def _per_iteration(pairs: Pairs, check: str, quantile: float) -> Measured:
    atol = rtol = max_abs = squares = 0.0
    count = iterations = 0
    for a, b in pairs():
        e, m = _errors(a, b)
        atol = max(atol, _statistic(e, check, quantile))
        rtol = max(rtol, _statistic(e / np.where(m == 0, ZERO_REFERENCE, m), check, quantile))
        max_abs = max(max_abs, float(e.max(initial=0.0)))
        squares += float(np.dot(m, m)) if m.size else 0.0
        count += m.size
        iterations += 1
    return Measured(atol, rtol, 0.0, math.sqrt(squares / count) if count else 0.0, max_abs, count, iterations)


def measure(pairs: Pairs, check: str = "elemwise", quantile: float = 0.99) -> Measured:
    """The smallest (atol, rtol) that pass ``check`` on every iteration of ``pairs``, by the method above."""
    return _elementwise(pairs) if check == "elemwise" else _per_iteration(pairs, check, quantile)


def epsilon_floor(measured: Measured, check: str) -> Measured:
    """Without the oracle: one float32 ulp, relative, and absolute at the floor magnitude (or the rms)."""
    scale = measured.floor_magnitude if check == "elemwise" else measured.rms
    return Measured(EPSILON_32 * scale, EPSILON_32)


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
