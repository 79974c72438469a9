"""Comparing outputs that are not tensors (sequences, maps, optionals; see cmpx.structured): the same structure
exactly (lengths, map keys, shapes), then every value with the output's tolerances, as one tensor."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cmpx.outcome.results import OutputResult
from cmpx.structured import Structured, describe, difference, locate


def compare_structured(name: str, actual: Any, reference: Any,
                       compare_values: Callable[[str, Any, Any], OutputResult]) -> OutputResult:
    """Compare two outputs of which at least one is a Structured (the other may be a plain tensor, e.g. an
    optional that one backend returned as its tensor); ``compare_values(name, actual, reference)`` compares their
    values laid out flat (cmpx.comparison.compare, with the run's settings)."""
    mine, theirs = as_structured(actual), as_structured(reference)
    differs = difference(mine.skeleton, theirs.skeleton)
    if differs is not None:
        return OutputResult(name, note=f"structure differs at {differs}", failed_early=True)
    result = compare_values(name, mine.values, theirs.values)
    note = f"{describe(mine.skeleton)}: same structure, {mine.size} value(s) compared in order"
    worst = next((m.data["abs"].get("max_index") for m in result.metrics
                  if isinstance(m.data.get("abs"), dict) and m.data["abs"].get("max_index")), None)
    if worst:
        note += f"; the largest abs error is at {locate(mine.skeleton, int(worst[0]))}"
    return replace(result, note="; ".join(filter(None, [result.note, note])))


def as_structured(value: Any) -> Structured:
    if isinstance(value, Structured):
        return value
    return Structured(["t", list(value.shape)], value.reshape(-1))


def conform(value: Any, dtype: str) -> Any:
    """A structure's values in the model's declared ``dtype`` when they hold exactly those numbers in a wider
    type (ONNX Runtime returns a ZipMap's float32 probabilities as Python floats), else as they are."""
    if not isinstance(value, Structured) or value.values.dtype.name == dtype or not value.size:
        return value
    import numpy as np

    from cmpx.dtypes import numpy_dtype

    try:
        target = numpy_dtype(dtype)
    except (TypeError, AttributeError):
        return value
    converted = value.values.astype(target)
    with np.errstate(invalid="ignore"):
        exact = np.array_equal(converted.astype(value.values.dtype), value.values, equal_nan=value.values.dtype.kind
                               in "fc")
    return Structured(value.skeleton, converted) if exact else value
