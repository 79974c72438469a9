"""The data options every loader factory receives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cmpx.options.argtypes import ValueRange


@dataclass(frozen=True)
class DataOptions:
    """``seed`` (iteration i uses seed + i); ``iterations`` (None: the loader's own count, 1 for synthetic data);
    value ranges: ``default_range`` for every input without an entry in ``ranges`` (None: the loader's own
    default for the dtype); ``paths`` of saved inputs (--load-inputs); ``script`` (--data-loader-script).
    ``integer_ranges``: cmpx's own ranges for integer inputs without a given range, read from how the graph uses
    them (cmpx.model.value_ranges); a generating loader uses them where the user gave no range."""

    seed: int = 1
    iterations: int | None = None
    default_range: ValueRange | None = None
    ranges: Mapping[str, ValueRange] = field(default_factory=dict)
    paths: tuple[str, ...] = ()
    script: str | None = None
    integer_ranges: Mapping[str, ValueRange] = field(default_factory=dict)
