"""--validate: find NaN and Inf in a backend's outputs, chunk by chunk."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from cmpx.dtypes import is_extension, is_floating
from cmpx.outcome.results import NonFinite

CHUNK_ELEMENTS = 1 << 20


def find_non_finite(backend: str, outputs: Mapping[str, np.ndarray]) -> list[NonFinite]:
    found = []
    for name, array in outputs.items():
        if not (is_floating(array.dtype) or array.dtype.kind == "c"):
            continue
        flat = array.reshape(-1)
        nans = infs = 0
        first = -1
        for start in range(0, flat.size, CHUNK_ELEMENTS):
            chunk = flat[start:start + CHUNK_ELEMENTS]
            if is_extension(chunk.dtype):  # bfloat16 and float8: inspect them as float32
                chunk = chunk.astype(np.float32)
            nan_mask, inf_mask = np.isnan(chunk), np.isinf(chunk)
            nans += int(np.count_nonzero(nan_mask))
            infs += int(np.count_nonzero(inf_mask))
            if first < 0 and (nans or infs):
                first = start + int(np.argmax(nan_mask | inf_mask))
        if nans or infs:
            index = tuple(int(i) for i in np.unravel_index(first, array.shape)) if array.shape else ()
            found.append(NonFinite(backend, name, nans, infs, index))
    return found
