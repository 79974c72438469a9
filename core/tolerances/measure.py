"""``cmpx tolerances``' measurement of one finished run: each output's errors of A against B read back from the
run's saved outputs, measured by cmpx.tolerances.noise_floor, floored, and said as the tolerance file's entries and comments.
The run itself (a Session) is the command's (cmpx.cli.tolerances_cmd)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from cmpx._version import __version__
from cmpx.dtypes import is_floating, largest_finite
from cmpx.errors import UsageError
from cmpx.tolerances.noise_floor import Measured, NaNOnBothSides, NotFinite, Pairs, epsilon_floor, measure, pairs_of, tolerances
from cmpx.saved.opening import open_saved
from cmpx.tolerances.tolerance_file import OutputTolerance

if TYPE_CHECKING:
    from cmpx.report import Report


def _method(check: str, floor: str) -> list[str]:
    if check == "elemwise":
        steps = ("per output, e = |A - B|, m = |B| over every element of every iteration; for each rtol0 of a grid "
                 "(0, and 8 a decade from 2^-23 to 1), atol0 = max e where e > rtol0 x m; the pair with the least "
                 "sum of max(atol0, rtol0 x m) is taken")
    else:
        steps = (f"per output, atol0 and rtol0 = the largest per-iteration {check} of e = |A - B| and of e/|B| "
                 "(|B| = 0 counted as 2.22e-16)")
    return [steps, f"atol = S x max(atol0, floor atol), rtol = S x max(rtol0, floor rtol), rounded up to 2 digits; "
                   f"floor: {floor}"]


def measure_outputs(report: Report, saved_path: str, check: str, quantile: float, factor: float,
                    oracle: bool) -> tuple[list[str], list[OutputTolerance], list[str]]:
    """(header comment lines, the entries, lines to print) for the outputs of ``report``'s run saved in
    ``saved_path``: its first live backend A measured against the second, B (or the --reference)."""
    plan, request = report.plan, report.request
    names = [backend.name for backend in plan.backends]
    reference = request.reference if request is not None and request.reference else names[1]
    actual = next(name for name in names[:2] if name != reference)
    sources = {source.name: source for source in open_saved(saved_path, "outputs").sources}
    a, b = sources[actual], sources[reference]
    exact = sources[names[2]] if oracle else None
    outputs = [*(spec.name for spec in plan.model.outputs), *plan.mark] if plan.model else list(a.load(0))
    floor_words = (f"B's own error against the fp64 oracle {names[2]}, measured the same way" if oracle else
                   "one float32 ulp (rtol 2^-23 = 1.19e-07, atol 2^-23 x rms(m)), without the fp64 oracle")
    if request is None or request.load_inputs:
        seeds = "the loaded inputs"
    elif request.data_loader_script or request.data_loader not in (None, "synthetic"):
        seeds = f"the inputs of {request.data_loader_script or request.data_loader}"
    else:
        seeds = f"seeds {request.seed}..{request.seed + len(a) - 1} (iteration i: seed + i)"
    header = [f"Tolerances measured by 'cmpx tolerances' (cmpx {__version__}); the method: docs/tolerances.md",
              f"model {plan.model.path if plan.model else '?'}: A = {actual} measured against B = {reference}, "
              f"{len(a)} iteration(s), {seeds}",
              f"check {check}{f' (quantile {quantile:g})' if check == 'quantile' else ''}; safety factor S = "
              f"{factor:g}", *_method(check, floor_words)]
    nan_equal = bool(request is not None and request.nan_equal)
    if nan_equal:
        header.append("--nan-equal: a NaN on both sides is a match and is not measured; give --nan-equal to cmpx run "
                      "with this file too")
    entries, lines = [], []
    for output in outputs:
        first = a.load(0).get(output)
        if not isinstance(first, np.ndarray):
            lines.append(f"{output}: not a tensor; left to the default tolerances")
            continue
        try:
            measured = measure(_pairs(a, b, output), check, quantile, nan_equal)
        except NaNOnBothSides as exc:
            raise UsageError(f"{output}: {actual} and {reference} are both NaN ({exc}), and a NaN equals nothing "
                             "unless --nan-equal; give --nan-equal here and to cmpx run if a NaN on both sides is a "
                             "match") from None
        except NotFinite as exc:
            raise UsageError(f"{output}: {actual} and {reference} disagree on a NaN or an infinity ({exc}); no "
                             "tolerance passes it; find where with 'cmpx run --mark-all --validate'") from None
        floating = is_floating(first.dtype)
        try:
            if not floating:
                floor = Measured(0.0, 0.0)
            elif exact is not None:
                floor = measure(_pairs(b, exact, output, overflow=b.load(0)[output].dtype), check, quantile,
                                nan_equal)
            else:
                floor = epsilon_floor(measured)
        except NotFinite as exc:
            raise UsageError(f"{output}: {reference} and the fp64 oracle disagree on a NaN or an infinity ({exc}), "
                             "so the oracle gives no floor; measure without it: --floor ulp") from None
        atol, rtol = tolerances(measured, floor, factor)
        notes = _notes(measured, floor, factor, (atol, rtol), floating)
        entries.append(OutputTolerance(output, atol, rtol, check, quantile if check == "quantile" else None, notes))
        lines.append(f"{output}: atol {atol:g}, rtol {rtol:g} ({check}; measured atol0 {measured.atol:.3g}, rtol0 "
                     f"{measured.rtol:.3g} over {measured.iterations} iteration(s))")
    tally = next((t for t in report.tallies if (t.backend, t.reference) == (actual, reference)), None)
    if tally is not None:
        lines.insert(0, f"{actual} vs {reference} at the default tolerances (atol 1e-5, rtol 1e-5, as "
                        f"Polygraphy's): {'passed' if tally.passed else 'FAILED'}, "
                        f"{tally.outputs_passed}/{tally.outputs} output comparisons passed")
    return header, entries, lines


def _pairs(a: Any, b: Any, output: str, overflow: np.dtype | None = None) -> Pairs:
    """``output`` of ``a`` and ``b``, iteration by iteration, each read again at every pass. ``overflow``: ``b``'s
    values beyond that float type's range become its infinities (an exact value float32 cannot hold is the
    infinity float32 gives: the same answer, not an error of the backend's)."""
    def loader(i: int) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        if overflow is None:
            return lambda: (a.load(i)[output], b.load(i)[output])
        largest = largest_finite(overflow)
        return lambda: (a.load(i)[output], _saturated(b.load(i)[output], largest))

    return pairs_of(loader(i) for i in range(min(len(a), len(b))))


def _saturated(values: np.ndarray, largest: float) -> np.ndarray:
    """``values`` with those beyond ``largest`` in magnitude as the infinity of their sign."""
    wide = values.astype(np.float64)
    return np.where(np.abs(wide) > largest, np.copysign(np.inf, wide), wide)


def _notes(measured: Measured, floor: Measured, factor: float, result: tuple[float, float],
           floating: bool) -> Sequence[str]:
    notes = [f"measured: {measured.elements} elements over {measured.iterations} iteration(s), rms(m) "
             f"{measured.rms:.3g}, max e {measured.max_abs:.3g}; atol0 {measured.atol:.3g}, rtol0 {measured.rtol:.3g}"]
    notes.append(f"floor: atol {floor.atol:.3g}, rtol {floor.rtol:.3g}" if floating else
                 "floor: none (not a floating-point output)")
    notes.append(f"atol = {factor:g} x {max(measured.atol, floor.atol):.3g} -> {result[0]:g}; rtol = {factor:g} x "
                 f"{max(measured.rtol, floor.rtol):.3g} -> {result[1]:g}")
    return notes
