"""Seeded synthetic inputs, value-compatible with Polygraphy's default data loader for floats.

Iteration i draws from ``numpy.random.RandomState(seed + i)``, input by input in model order, so the same
seed gives the same feeds as ``polygraphy run --seed`` for float and bool inputs. Integers differ on purpose:
Polygraphy draws them from {0, 1}, which never exercises an index other than 0 and 1; cmpx draws integers
uniformly from [0, 9] inclusive by default (override with --val-range, bounds inclusive).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np

from cmpx.argtypes import ValueRange
from cmpx.dtypes import is_floating, numpy_dtype
from cmpx.errors import UsageError
from cmpx.loaders.options import DataOptions
from cmpx.model.info import TensorSpec

DEFAULT_FLOAT_RANGE = ValueRange(0.0, 1.0)
DEFAULT_INT_RANGE = ValueRange(0, 9)


class SyntheticDataLoader:
    """Uniform random feeds: floats in [low, high), integers in [low, high], bools about half true."""

    def __init__(self, options: DataOptions):
        self.options = options

    def feeds(self, inputs: Sequence[TensorSpec]) -> Iterator[dict[str, np.ndarray]]:
        plans = [(spec, numpy_dtype(spec.dtype), self._range(spec)) for spec in inputs]
        for iteration in range(self.options.iterations or 1):
            rng = np.random.RandomState(self.options.seed + iteration)
            yield {spec.name: sample(rng, dtype, tuple(spec.shape), value_range)
                   for spec, dtype, value_range in plans}

    def _range(self, spec: TensorSpec) -> ValueRange:
        chosen = self.options.ranges.get(spec.name, self.options.default_range)
        dtype = numpy_dtype(spec.dtype)
        if dtype.kind == "b":
            return ValueRange(0, 1)
        if is_floating(dtype) or dtype.kind == "c":
            chosen = chosen or DEFAULT_FLOAT_RANGE
            if not (math.isfinite(chosen.low) and math.isfinite(chosen.high)):
                raise UsageError(f"--val-range for {spec.name}: bounds must be finite numbers")
            return chosen
        info = _int_info(dtype)
        if chosen is None:  # the default, narrowed for tiny types such as int2 ([-2, 1] -> [0, 1])
            return ValueRange(max(DEFAULT_INT_RANGE.low, info[0]), min(DEFAULT_INT_RANGE.high, info[1]))
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
        return np.array(rng.randint(0, 2, size=shape, dtype=bool))
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


def _int_info(dtype: np.dtype) -> tuple[int, int]:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
    else:
        import ml_dtypes

        info = ml_dtypes.iinfo(dtype)
    return int(info.min), int(info.max)


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
