"""Seeded synthetic inputs, value-compatible with Polygraphy's default data loader.

Iteration i draws from ``numpy.random.RandomState(seed + i)``, input by input in model order, with the calls
Polygraphy makes, so the same seed gives the same feeds as ``polygraphy run --seed``: floats and bools always, and
integers whenever their range is given (``--val-range``). Integers without a given range differ on purpose:
Polygraphy draws them from {0, 1}, which never exercises an index other than 0 and 1, while cmpx draws them from
its own range: the one the graph's use of the input calls for (an index into a 2-row table gets [0, 1]: see
cmpx.model.value_ranges), else its default. Those values come from a side stream of their own (seeded by the seed,
the iteration and the input's position), and the main stream is advanced exactly as Polygraphy's {0, 1} draw
advances it, so the floats and bools after an integer input still match Polygraphy's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from cmpx.options.argtypes import ValueRange
from cmpx.dtypes import is_floating, largest_finite, numpy_dtype
from cmpx.errors import UsageError
from cmpx.loaders.options import DataOptions
from cmpx.model.info import TensorSpec

DEFAULT_FLOAT_RANGE = ValueRange(0.0, 1.0)
DEFAULT_INT_RANGE = ValueRange(0, 9)
SIDE_STREAM = 0x636D7078  # "cmpx": seeds the stream of integers drawn from cmpx's own ranges


class SyntheticDataLoader:
    """Uniform random feeds: floats in [low, high), integers in [low, high], bools in [bool(low), bool(high)]
    (about half true by default)."""

    def __init__(self, options: DataOptions):
        self.options = options

    def feeds(self, inputs: Sequence[TensorSpec]) -> Iterator[dict[str, np.ndarray]]:
        plans = [(spec, numpy_dtype(spec.dtype), self._range(spec), self._given(spec)) for spec in inputs]
        for iteration in range(self.options.iterations or 1):
            seed = self.options.seed + iteration
            rng = np.random.RandomState(seed)
            feed = {}
            for position, (spec, dtype, value_range, given) in enumerate(plans):
                shape = spec.sizes
                if shape is None:
                    raise ValueError(f"synthetic data needs concrete shapes, not {spec.name} {spec.shape_text()}")
                if dtype.kind in "iu" and not given:
                    rng.randint(0, 2, size=shape, dtype=dtype)  # what Polygraphy's default {0, 1} draw consumes
                    feed[spec.name] = sample(np.random.RandomState([seed, SIDE_STREAM, position]), dtype, shape,
                                             value_range)
                else:
                    feed[spec.name] = sample(rng, dtype, shape, value_range)
            yield feed

    def _given(self, spec: TensorSpec) -> bool:
        """Whether the user gave this input's range (then its values are Polygraphy's too)."""
        return spec.name in self.options.ranges or self.options.default_range is not None

    def _range(self, spec: TensorSpec) -> ValueRange:
        chosen = self.options.ranges.get(spec.name, self.options.default_range)
        dtype = numpy_dtype(spec.dtype)
        if dtype.kind == "b":  # as Polygraphy: bool(low), bool(high), so [1,1] and [-5,5] give all True
            chosen = chosen or DEFAULT_FLOAT_RANGE
            low, high = int(bool(chosen.low)), int(bool(chosen.high))
            if low > high:
                raise UsageError(f"--val-range for {spec.name}: a bool input's range is bool(low) to bool(high), and "
                                 f"[{chosen.low:g},{chosen.high:g}] gives [True,False]; give [0,1] (either), [0,0] "
                                 "(all False) or [1,1] (all True)")
            return ValueRange(low, high)
        if is_floating(dtype) or dtype.kind == "c":
            chosen = chosen or DEFAULT_FLOAT_RANGE
            if not (math.isfinite(chosen.low) and math.isfinite(chosen.high)):
                raise UsageError(f"--val-range for {spec.name}: bounds must be finite numbers")
            largest = largest_finite(dtype)
            if max(-chosen.low, chosen.high) > largest:
                raise UsageError(f"--val-range for {spec.name}: [{chosen.low:g},{chosen.high:g}] does not fit "
                                 f"{spec.dtype} ([{-largest:g},{largest:g}]), which cannot hold the values beyond it")
            return chosen
        info = int_limits(dtype)
        if chosen is None:  # the graph's range, else the default, narrowed for tiny types ([-2, 1] -> [0, 1])
            own = self.options.integer_ranges.get(spec.name, DEFAULT_INT_RANGE)
            return ValueRange(max(own.low, info[0]), min(own.high, info[1]))
        if chosen.low != int(chosen.low) or chosen.high != int(chosen.high):
            raise UsageError(f"--val-range for {spec.name}: {spec.dtype} input needs integer bounds, "
                             f"e.g. {spec.name}:[0,9]")
        low, high = int(chosen.low), int(chosen.high)
        if low < info[0] or high > info[1]:
            raise UsageError(f"--val-range for {spec.name}: [{low},{high}] does not fit {spec.dtype} "
                             f"([{info[0]},{info[1]}])")
        return ValueRange(low, high)


CHUNK_ELEMENTS = 1 << 18


def sample(rng: np.random.RandomState, dtype: np.dtype, shape: tuple[int, ...], value_range: ValueRange) -> np.ndarray:
    """One array of ``dtype`` and ``shape`` drawn from ``rng`` within ``value_range``."""
    if dtype.kind == "b":
        return np.array(rng.randint(int(value_range.low), int(value_range.high) + 1, size=shape, dtype=bool))
    scale, shift = value_range.high - value_range.low, value_range.low
    if dtype.kind == "c":
        real = rng.random_sample(size=shape) * scale + shift
        imag = rng.random_sample(size=shape) * scale + shift
        return (real + 1j * imag).astype(dtype)
    if is_floating(dtype):
        return _uniform_floats(rng, dtype, shape, scale, shift)
    low, high = int(value_range.low), int(value_range.high)
    if dtype.kind in "iu":
        return np.array(rng.randint(low, high + 1, size=shape, dtype=dtype))
    return rng.randint(low, high + 1, size=shape, dtype=np.int64).astype(dtype)  # int4, uint4, int2...


def int_limits(dtype: np.dtype) -> tuple[int, int]:
    """The smallest and largest value of an integer dtype (numpy's, or ml_dtypes' int4, int2...)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    import ml_dtypes

    narrow = ml_dtypes.iinfo(dtype)
    return int(narrow.min), int(narrow.max)


def _uniform_floats(rng: np.random.RandomState, dtype: np.dtype, shape: tuple[int, ...], scale: float,
                    shift: float) -> np.ndarray:
    """random_sample(shape) * scale + shift, cast to ``dtype``: the very values one call would give (the stream
    is sequential), made chunk by chunk so that no float64 copy of the whole tensor is ever held."""
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        chunk = rng.random_sample(size=min(CHUNK_ELEMENTS, flat.size - start))
        chunk *= scale
        chunk += shift
        flat[start:start + chunk.size] = chunk.astype(dtype)
    return out
