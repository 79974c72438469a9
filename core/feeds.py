"""Check that a data loader's feeds are exactly what the model takes: names, dtypes and shapes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.dtypes import numpy_dtype
from cmpx.errors import UsageError
from cmpx.model import TensorSpec


def check_feeds(feeds: Any, inputs: Sequence[TensorSpec], iteration: int, source: str) -> None:
    """Raise a UsageError naming the input when ``feeds`` does not fit ``inputs`` exactly (no casts)."""
    import numpy as np

    where = f"{source}, iteration {iteration}"
    if not isinstance(feeds, Mapping):
        raise UsageError(f"{where}: expected a dict of input name -> array, got {type(feeds).__name__}")
    expected = {spec.name: spec for spec in inputs}
    unknown = [name for name in feeds if name not in expected]
    if unknown:
        raise UsageError(f"{where}: {unknown[0]!r} is not a model input; the inputs are: {', '.join(expected)}")
    missing = [name for name in expected if name not in feeds]
    if missing:
        raise UsageError(f"{where}: no data for input {missing[0]!r}")
    for name, spec in expected.items():
        array = feeds[name]
        if not isinstance(array, np.ndarray):
            raise UsageError(f"{where}: input {name!r} is a {type(array).__name__}, not a numpy array")
        dtype = numpy_dtype(spec.dtype)
        if array.dtype != dtype:
            raise UsageError(f"{where}: input {name!r} has dtype {array.dtype}, the model takes {dtype}; "
                             "convert it in the data source (cmpx never casts silently)")
        if spec.shape is not None and (len(array.shape) != len(spec.shape) or any(
                isinstance(d, int) and d != s for d, s in zip(spec.shape, array.shape))):
            raise UsageError(f"{where}: input {name!r} has shape {list(array.shape)}, which does not fit "
                             f"{spec.shape_text()}")
