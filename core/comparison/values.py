"""What one backend's output holds, for single-backend runs and -v: shape, dtype and value statistics (min, max,
mean, std, NaN and Inf counts), computed chunk by chunk so that no copy of a large tensor is made. Min and max
take infinities in (an output of [1, inf] has max inf); NaN has no order and is only counted; mean and std are over
the finite values, and the text says how many elements they leave out."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cmpx.dtypes import is_extension, is_floating

CHUNK_ELEMENTS = 1 << 20


@dataclass(frozen=True)
class ValueStats:
    output: str
    dtype: str
    shape: tuple[int, ...]
    minimum: float | None
    maximum: float | None
    mean: float | None
    std: float | None
    nan_count: int = 0
    inf_count: int = 0

    def __str__(self) -> str:
        head = f"{self.output}: {self.dtype} {list(self.shape)}"
        if self.minimum is None:
            return f"{head} (empty)" if not all(self.shape) else head
        if math.isnan(self.minimum):  # every element NaN
            text = f"{head}: no value to order (all NaN)"
        else:
            text = f"{head}: min {self.minimum:.6g}, max {self.maximum:.6g}"
            excluded = self.nan_count + self.inf_count
            if self.mean is None or math.isnan(self.mean):
                text += ", no finite value for mean and std"
            else:
                text += f", mean {self.mean:.6g}, std {self.std:.6g}"
                if excluded:
                    text += f" (over {math.prod(self.shape) - excluded} finite value(s); {excluded} NaN/Inf left out)"
        if self.nan_count or self.inf_count or self.dtype.startswith(("float", "bfloat", "complex")):
            text += f", {self.nan_count} NaN, {self.inf_count} Inf"
        return text


def value_stats(name: str, array: np.ndarray) -> ValueStats:
    """Statistics of ``array`` over its finite values (NaN and Inf counted apart); complex arrays by magnitude."""
    flat = array.reshape(-1)
    if flat.size == 0 or not (is_floating(array.dtype) or array.dtype.kind in "iubc"):
        return ValueStats(name, array.dtype.name, tuple(array.shape), None, None, None, None)
    count, total, squares, nans, infs = 0, 0.0, 0.0, 0, 0
    low, high = math.inf, -math.inf
    for start in range(0, flat.size, CHUNK_ELEMENTS):
        chunk = flat[start:start + CHUNK_ELEMENTS]
        if chunk.dtype.kind == "c":
            chunk = np.abs(chunk)
        chunk = chunk.astype(np.float64) if (is_extension(chunk.dtype) or chunk.dtype.kind in "iub") else chunk
        if chunk.dtype.kind == "f":
            nan_mask, inf_mask = np.isnan(chunk), np.isinf(chunk)
            nans += int(np.count_nonzero(nan_mask))
            chunk_infs = int(np.count_nonzero(inf_mask))
            if chunk_infs:  # infinities bound the range; they are left out of mean and std
                infinite = chunk[inf_mask]
                low, high = min(low, float(infinite.min())), max(high, float(infinite.max()))
            infs += chunk_infs
            chunk = chunk[~(nan_mask | inf_mask)]
        if chunk.size:
            chunk64 = chunk.astype(np.float64, copy=False)
            count += chunk.size
            total += float(chunk64.sum())
            squares += float(np.square(chunk64).sum())
            low, high = min(low, float(chunk64.min())), max(high, float(chunk64.max()))
    if not count:  # no finite value: the range is the infinities' (or NaN when every element is NaN)
        return ValueStats(name, array.dtype.name, tuple(array.shape), low if infs else math.nan,
                          high if infs else math.nan, math.nan, math.nan, nans, infs)
    mean = total / count
    return ValueStats(name, array.dtype.name, tuple(array.shape), low, high, mean,
                      math.sqrt(max(0.0, squares / count - mean * mean)), nans, infs)
