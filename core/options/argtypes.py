"""Parsers for the values users type: shapes, value ranges, per-output values. Pure functions, no numpy."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from cmpx.errors import UsageError
from cmpx.suggest import did_you_mean

CHECK_STATS = ("elemwise", "max", "mean", "median", "quantile")
SHAPE_FORM = "NAME:[D0,D1,...], e.g. X:[1,3,224,224]"
INPUT_SHAPES_FORM = f"{SHAPE_FORM}, or DIMENSION=SIZE for a named dimension, e.g. batch=4"
RANGE_FORM = "[LOW,HIGH] or NAME:[LOW,HIGH], e.g. [0,1] or X:[-1,1]"

_SHAPE = re.compile(r"(?P<name>.+):\[(?P<dims>[^\[\]]*)\]\Z")
_RANGE = re.compile(r"(?:(?P<name>.+):)?\[(?P<low>[^\[\],]+),(?P<high>[^\[\],]+)\]\Z")

T = TypeVar("T")


def parse_shape_words(values: Iterable[str]) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    """Parse ``--input-shapes`` words: ``X:[1,3,224,224]`` sets an input's shape, ``batch=4`` the size of a named
    (symbolic) dimension wherever an input uses it. Returns ({input: shape}, {dimension name: size})."""
    shape_words, dims = [], {}
    for text in values:
        name, sep, size_text = text.strip().rpartition("=")
        if not sep or _SHAPE.match(text.strip()) or not name.strip():
            shape_words.append(text)
            continue
        name = name.strip()
        try:
            size = int(size_text.strip())
        except ValueError:
            raise UsageError(f"--input-shapes: the size {size_text.strip()!r} of dimension {name} is not an integer; "
                             f"the accepted form is {INPUT_SHAPES_FORM}") from None
        if size < 0:
            raise UsageError(f"--input-shapes: dimension {name}={size} is negative; give a size of 0 or more")
        if name in dims:
            raise UsageError(f"--input-shapes: dimension {name} is given twice; give each once")
        dims[name] = size
    return parse_input_shapes(shape_words, INPUT_SHAPES_FORM), dims


def parse_input_shapes(values: Iterable[str], form: str = SHAPE_FORM) -> dict[str, tuple[int, ...]]:
    """Parse ``--input-shapes`` words such as ``X:[1,3,224,224]`` into {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for text in values:
        match = _SHAPE.match(text.strip())
        if not match:
            raise UsageError(f"--input-shapes: cannot read {text!r}; the accepted form is {form}")
        name, dims_text = match["name"], match["dims"].strip()
        dims = []
        for word in (dims_text.split(",") if dims_text else []):
            try:
                dim = int(word.strip())
            except ValueError:
                raise UsageError(f"--input-shapes: dimension {word.strip()!r} of {name} is not an integer; "
                                 f"the accepted form is {form}") from None
            if dim < 0:
                raise UsageError(f"--input-shapes: dimension {dim} of {name} is negative; "
                                 "give concrete sizes of 0 or more")
            dims.append(dim)
        if name in shapes:
            raise UsageError(f"--input-shapes: {name} is given twice; give each input once")
        shapes[name] = tuple(dims)
    return shapes


@dataclass(frozen=True)
class ValueRange:
    low: float
    high: float


def parse_val_ranges(values: Iterable[str]) -> tuple[ValueRange | None, dict[str, ValueRange]]:
    """Parse ``--val-range`` words: ``[lo,hi]`` sets the default, ``name:[lo,hi]`` one input."""
    default: ValueRange | None = None
    per_input: dict[str, ValueRange] = {}
    for text in values:
        match = _RANGE.match(text.strip())
        if not match:
            raise UsageError(f"--val-range: cannot read {text!r}; the accepted form is {RANGE_FORM}")
        low, high = (_number(match[key], "--val-range", text) for key in ("low", "high"))
        if math.isnan(low) or math.isnan(high) or low > high:
            raise UsageError(f"--val-range: {text!r} is not a range; LOW must be a number not above HIGH")
        if match["name"] is None:
            default = ValueRange(low, high)
        else:
            per_input[match["name"]] = ValueRange(low, high)
    return default, per_input


@dataclass(frozen=True)
class PerOutput(Generic[T]):
    """A value with per-output overrides, as in ``--atol 1e-3 out0:1e-2``."""

    default: T
    overrides: Mapping[str, T] = field(default_factory=dict)

    def get(self, output: str) -> T:
        return self.overrides.get(output, self.default)


def parse_per_output(option: str, values: Iterable[str], default: T, convert: Callable[[str], T],
                     example: str = "VALUE") -> PerOutput[T]:
    """Parse per-output words: a bare value sets the default, ``name:value`` one output (split on the last ':');
    ``example`` names the value's form in the error for an empty name."""
    overrides: dict[str, T] = {}
    for text in values:
        name, sep, value_text = text.rpartition(":")
        try:
            value = convert(value_text.strip())
        except (ValueError, UsageError) as exc:
            output, equals, rest = value_text.partition("=")
            if equals and output.strip() and rest.strip():  # NAME=VALUE: the separator is a colon, as in NAME:VALUE
                raise UsageError(f"{option}: {text!r}: an output's value is written NAME:VALUE: {option} "
                                 f"{name}{sep}{output.strip()}:{rest.strip()}") from None
            raise UsageError(f"{option}: {text!r}: {exc}") from None
        if sep and name:
            overrides[name] = value
        elif sep:
            raise UsageError(f"{option}: {text!r} has an empty output name; use {example} or NAME:{example}")
        else:
            default = value
    return PerOutput(default, overrides)


def _float(text: str, example: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number; give {example}") from None


def tolerance(text: str) -> float:
    """A tolerance: a finite or infinite number of 0 or more."""
    value = _float(text, "a tolerance such as 1e-3")
    if math.isnan(value) or value < 0:
        raise ValueError(f"{text!r} is not a tolerance; give a number of 0 or more")
    return value


def check_stat(text: str) -> str:
    """A --check-error-stat value."""
    if text not in CHECK_STATS:
        raise ValueError(f"{text!r} is not a check; use one of {', '.join(CHECK_STATS)}")
    return text


def quantile(text: str) -> float:
    """A quantile between 0 and 1."""
    value = _float(text, "a quantile such as 0.99")
    if not 0 <= value <= 1:
        raise ValueError(f"{text!r} is not a quantile; give a number from 0 to 1")
    return value


def threshold(text: str) -> float:
    """A metric threshold: any number but NaN."""
    value = _float(text, "a threshold such as 0.99")
    if math.isnan(value):
        raise ValueError("NaN is not a threshold")
    return value


def seconds(text: str) -> float:
    """A duration above 0 seconds."""
    value = _float(text, "a number of seconds such as 600")
    if not value > 0:
        raise ValueError(f"{text!r}: give a number of seconds above 0")
    return value


def check_names(option: str, names: Iterable[str], known: Iterable[str], what: str) -> None:
    """Raise a UsageError if ``names`` mentions anything not in ``known`` (``what``: e.g. "model inputs")."""
    known = list(known)
    for name in names:
        if name not in known:
            raise UsageError(f"{option}: {name!r}{did_you_mean(name, known)} is not one of the {what}: "
                             f"{', '.join(known) or '(none)'}")


def _number(text: str, option: str, whole: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise UsageError(f"{option}: {text.strip()!r} in {whole!r} is not a number; the accepted form is "
                         f"{RANGE_FORM}") from None


_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[kmgt]i?b?|b)?\Z", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}


def byte_size(option: str, text: str) -> int:
    """A size in bytes: ``6GiB``, ``500MB``, ``1.5G`` (binary with ``i``, decimal without; a bare number is bytes)."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise UsageError(f"{option}: cannot read {text!r}; give a size such as 6GiB, 500MB or 1073741824 (bytes)")
    unit = (match["unit"] or "").lower()
    scale = 1024 ** "bkmgt".index(unit[0]) if "i" in unit else _UNITS[unit[:1]]
    value = int(float(match["number"]) * scale)
    if value < 1:
        raise UsageError(f"{option}: {text!r} is less than one byte; give a size such as 6GiB")
    return value
