"""--postprocess top-K[,axis=N] (per output NAME:top-K): each output replaced by the indices of its K largest
values along an axis (the last by default), largest first, as Polygraphy's top-k post-processing does, for every
backend and every saved run alike, before the comparison. Ties go to the lower index and NaN ranks last, as there;
unlike there, unsigned and boolean outputs rank correctly (Polygraphy negates them: uint8 200 ranks below 3, and
bool raises)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cmpx.options.argtypes import parse_per_output
from cmpx.errors import UsageError

FORM = "top-K or top-K,axis=N, optionally per output as NAME:top-K, e.g. --postprocess top-5 logits:top-1,axis=1"
_TOP_K = re.compile(r"top-(\d+)(?:,(?:axis=)?(-?\d+))?\Z")


@dataclass(frozen=True)
class TopK:
    k: int
    axis: int = -1


@dataclass(frozen=True)
class Postprocess:
    """Top-k per output name; ``default`` for outputs not named (None: left as they are)."""

    default: TopK | None = None
    by_output: Mapping[str, TopK] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.default is not None or bool(self.by_output)

    def apply(self, output: str, array: Any) -> Any:
        spec = self.by_output.get(output, self.default)
        if spec is None or spec.k == 0:
            return array
        return top_k_indices(array, spec.k, spec.axis, output)


def parse_postprocess(words: Iterable[str]) -> Postprocess:
    parsed = parse_per_output("--postprocess", words, None, _top_k, example="top-K")
    return Postprocess(parsed.default, {name: spec for name, spec in parsed.overrides.items() if spec is not None})


def _top_k(text: str) -> TopK:
    match = _TOP_K.match(text)
    if not match:
        raise ValueError(f"the accepted form is {FORM}")
    return TopK(int(match[1]), int(match[2]) if match[2] is not None else -1)


def top_k_indices(array: Any, k: int, axis: int, output: str = "") -> Any:
    """The int64 indices of the ``k`` largest values along ``axis`` (k capped at the axis length), largest first;
    ties: the lower index first; NaN last."""
    import numpy as np

    from cmpx.dtypes import is_extension

    if array.ndim == 0:
        raise UsageError(f"--postprocess: output {output!r} is a scalar; top-k needs at least one axis")
    if not -array.ndim <= axis < array.ndim:
        raise UsageError(f"--postprocess: output {output!r} has {array.ndim} axes; axis {axis} is not one of them")
    length = array.shape[axis]
    if is_extension(array.dtype):
        array = array.astype(np.float32)
    if array.dtype.kind in "fc":
        order = np.argsort(-(array.real if array.dtype.kind == "c" else array), axis=axis, kind="stable")
    else:  # no negation: it wraps unsigned values and is refused for bools; a reversed stable sort keeps ties
        flipped = np.argsort(np.flip(array, axis=axis), axis=axis, kind="stable")
        order = length - 1 - np.flip(flipped, axis=axis)
    return np.take(order, np.arange(min(k, length)), axis=axis).astype(np.int64)
