"""Fit a data loader's feeds to the model: exact names, safe casts only, fitting shapes; and their digest."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cmpx.dtypes import is_extension, is_floating, largest_finite, numpy_dtype
from cmpx.errors import UsageError
from cmpx.model.info import TensorSpec


def fit_feeds(feeds: Any, inputs: Sequence[TensorSpec], iteration: int, source: str,
              warn: Callable[[str], None], input_map: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return ``feeds`` as the model takes them, or raise a UsageError naming the input.

    Names must match exactly (no fuzzy matching, no pairing by position), after ``input_map`` (--input-map: model
    input -> the data's name for it); tensors that are no model input are left out, and ``warn`` says which
    (Polygraphy's layer-wise inputs hold more than the model's); a dtype may differ only if numpy casts it safely
    to the model's (then it is cast, and ``warn`` says so); shapes must fit the model's static dimensions.
    """
    import numpy as np

    where = f"{source}, iteration {iteration}"
    if not isinstance(feeds, Mapping):
        raise UsageError(f"{where}: expected a dict of input name -> array, got {type(feeds).__name__}")
    expected = {spec.name: spec for spec in inputs}
    feeds = dict(feeds)
    for name, data_name in (input_map or {}).items():
        if data_name in feeds and name not in feeds:
            feeds[name] = feeds.pop(data_name)
    unknown = [name for name in feeds if name not in expected]
    missing = [name for name in expected if name not in feeds]
    if missing:
        if unknown:  # Polygraphy would feed them by position: say both sides, and how to pair them
            pairs = " ".join(f"{a}={b}" for a, b in zip(missing, unknown))
            raise UsageError(f"{where}: no data for input {missing[0]!r}; the data holds {', '.join(map(repr, unknown))}"
                             f", which no input is named; cmpx feeds inputs by exact name (Polygraphy would pair them "
                             f"by position): say which feeds which with --input-map {pairs}")
        raise UsageError(f"{where}: no data for input {missing[0]!r}")
    if unknown:
        warn(f"{source}: input data holds {len(unknown)} tensor(s) that are no model input, left out: "
             f"{', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''} (the model's inputs: "
             f"{', '.join(expected)})")
    fitted = {}
    for name, spec in expected.items():
        array = feeds[name]
        if not isinstance(array, np.ndarray):
            raise UsageError(f"{where}: input {name!r} is a {type(array).__name__}, not a numpy array")
        dtype = numpy_dtype(spec.dtype)
        if array.dtype != dtype:
            if np.can_cast(array.dtype, dtype, casting="safe"):
                warn(f"{where}: input {name!r} converted from {array.dtype} to {dtype} (a safe cast)")
            elif array.dtype == np.float32 and is_extension(dtype) and _exact_in(array, dtype):
                # a file that has no type for it (Polygraphy's JSON widens bfloat16 to float32): every value is exact
                warn(f"{where}: input {name!r} read as {dtype} from float32 (every value exact in {dtype})")
            elif array.dtype in (np.float64, np.float32) and is_floating(dtype):  # numpy's default float, or the
                beyond = _beyond_range(array, dtype)  # usual one for a float16 model; Polygraphy casts them too
                warn(f"{where}: input {name!r} cast from {array.dtype} to {dtype}, the model's type"
                     + (f"; {beyond} value(s) beyond {dtype}'s range became infinite" if beyond else ""))
            else:
                raise UsageError(f"{where}: input {name!r} has dtype {array.dtype}, the model takes {dtype}, and "
                                 f"{array.dtype} does not convert to it safely; convert it in the data source")
            with np.errstate(over="ignore"):  # overflow to infinity is counted and said above
                array = array.astype(dtype)
        if spec.shape is not None and (len(array.shape) != len(spec.shape) or any(
                isinstance(d, int) and d != s for d, s in zip(spec.shape, array.shape))):
            raise UsageError(f"{where}: input {name!r} has shape {list(array.shape)}, which does not fit "
                             f"{spec.shape_text()}")
        fitted[name] = array
    return fitted


def feeds_digest(feeds: Mapping[str, Any]) -> str:
    """A digest of names, dtypes, shapes and bytes, to tell whether two runs were fed the same data."""
    import hashlib  # only runs that save or check inputs need it (its OpenSSL load costs ~2 ms)

    import numpy as np

    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(feeds):
        array = np.require(feeds[name], requirements="C")  # a 0-d input stays 0-d
        digest.update(f"{name}|{array.dtype.name}|{array.shape}|".encode())
        digest.update(array.reshape(-1).view(np.uint8).data)
    return "blake2b:" + digest.hexdigest()


def _beyond_range(array: Any, dtype: Any) -> int:
    """How many finite values of ``array`` are too large for ``dtype`` (they become infinite when cast)."""
    import numpy as np

    largest = largest_finite(dtype)
    finite = np.abs(array[np.isfinite(array)])
    return int(np.count_nonzero(finite > largest))


def _exact_in(array: Any, dtype: Any) -> bool:
    """Whether every value of ``array`` survives a cast to ``dtype`` and back unchanged (NaN as NaN)."""
    import numpy as np

    with np.errstate(all="ignore"):
        back = array.astype(dtype).astype(array.dtype)
    return bool(np.array_equal(back, array, equal_nan=True))
