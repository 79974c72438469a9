"""What a report tells the user to do next, worded once for the text and the HTML report: the tolerances that pass
the model outputs of a pair whose one side runs a lower-precision graph (measured, not guessed), and the --local-error
ranking of the nodes by the error they make on their own."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmpx.outcome.oracle import ORACLE_TRANSFORM
from cmpx.outcome.results import LocalError
from cmpx.options.table import BY_NAME

LOCAL_ERRORS_SHOWN = 10  # nodes listed by --local-error, failing ones first (the JSON report has every one)


def round_up(value: float) -> float:
    """``value`` rounded up to one significant digit: 2.6e-3 -> 3e-3, 0.0017 -> 0.002, 1e-3 -> 1e-3."""
    exponent = math.floor(math.log10(value))
    digit = math.ceil(round(value / 10.0 ** exponent, 9))
    return float(f"{digit}e{exponent}") if digit < 10 else float(f"1e{exponent + 1}")


def lowered(transforms: Mapping[str, str | None]) -> set[str]:
    """The backends (of backend name -> its transform) that run a lower-precision graph: any transform but the fp64
    oracle's."""
    return {name for name, transform in transforms.items() if transform and transform != ORACLE_TRANSFORM}


def hinted(backend_lowered: bool, reference_lowered: bool) -> bool:
    """Whether a pair gets the tolerance hint: exactly one side runs a lower-precision graph (onnxrt:fp16 against
    onnxrt), so its errors are the transform's, and the tolerance it needs is worth saying."""
    return backend_lowered != reference_lowered


def measured_tolerance(needed: tuple[float, float], metrics: Iterable[tuple[bool, Mapping[str, Any]]]) \
        -> tuple[float, float]:
    """``needed`` (atol, rtol) raised to the minimum tolerances (``min_tolerance`` of a tolerance check's data) of
    the failing ones of ``metrics`` (passed, data) of model outputs."""
    atol, rtol = needed
    for passed, data in metrics:
        found = data.get("min_tolerance") if not passed else None
        if found:  # a saved document writes NaN and infinities as strings: float() reads them
            atol, rtol = max(atol, float(found.get("atol") or 0.0)), max(rtol, float(found.get("rtol") or 0.0))
    return atol, rtol


def pass_options(atol: float, rtol: float) -> str:
    """"--atol 0.002 or --rtol 0.3": the options that pass at the measured tolerances, rounded up; "" if none
    would (an rtol of 1 or more checks nothing)."""
    needed = (("atol", atol, math.inf), ("rtol", rtol, 1))
    return " or ".join(f"{BY_NAME[name].flag} {round_up(value):g}" for name, value, top in needed if 0 < value < top)


def tolerance_hint(transformed: str, transform: str, backend: str, reference: str, options: str) -> str:
    return (f"{transformed} runs the {transform} graph; the model outputs of {backend} vs {reference} pass with "
            f"{options} (the largest minimum tolerance measured, rounded up)")


@dataclass(frozen=True)
class LocalErrorRanking:
    """--local-error in sum: the nodes that fail on their own, those that only inherit an error, those not
    measured, and the ones a report lists: those that fail on their own first (largest first), then the largest of
    the others (by max abs alone, nodes that pass by rtol on large values would hide those that fail)."""

    errors: Sequence[LocalError]
    failing: int
    inheriting: int
    unmeasured: int
    shown: Sequence[LocalError]

    @property
    def more(self) -> int:
        return len(self.errors) - len(self.shown)

    def headline(self) -> str:
        return (f"{self.failing} of {len(self.errors)} node output(s) fail on their own, {self.inheriting} only "
                f"inherit an error" + (f", {self.unmeasured} not measured" if self.unmeasured else ""))


def rank_local_errors(errors: Sequence[LocalError]) -> LocalErrorRanking:
    """``errors`` in the order the run keeps them (largest first: cmpx.outcome.results.ranked)."""
    return LocalErrorRanking(errors, sum(e.passed is False for e in errors), sum(e.inheriting for e in errors),
                             sum(e.passed is None for e in errors),
                             sorted(errors, key=lambda e: e.passed is not False)[:LOCAL_ERRORS_SHOWN])


def local_error_numbers(error: LocalError) -> str:
    """The numbers of one measured node's local error, as the reports write them."""
    if error.max_abs is None or error.max_rel is None:
        return "no abs/rel statistics (see the metrics of the run)"
    beyond = error.max_rel_beyond_atol
    shown = "" if beyond is None or beyond == error.max_rel else f" ({beyond:.3g} where |reference| > atol)"
    return f"max abs {error.max_abs:.3g}, max rel {error.max_rel:.3g}{shown}"
