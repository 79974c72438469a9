"""Turn error statistics into the verdict and report lines of a tolerance check (elemwise/max/mean/median/
quantile), with Polygraphy's rule: a statistic fails if it is NaN or above its tolerance, and the output fails
only if the absolute AND the relative statistic fail."""

from __future__ import annotations

import math

import numpy as np

from cmpx.comparison.compare import OutputSettings
from cmpx.outcome.results import MetricResult
from cmpx_comparators.errors import BeyondAtol, ErrorStats, Summary

HISTOGRAM_WIDTH = 30


def stat_fails(value: float, tolerance: float) -> bool:
    return math.isnan(value) or value > tolerance


def cannot_fail(reference_peak: float, atol: float) -> bool:
    """Whether a tolerance check is blind: every reference value is nonzero-small and below atol, so that an error
    of 100% (an output of zeros) is within atol and passes, whatever rtol says (rtol decides only past atol)."""
    return 0 < reference_peak < atol


def tolerance_result(name: str, stat: str, stats: ErrorStats, s: OutputSettings) -> MetricResult:
    label = f"quantile {s.quantile:g}" if stat == "quantile" else stat
    if stat == "elemwise":
        passed = stats.mismatches == 0
        abs_value, rel_value = stats.abs.max, stats.rel.max
        needed = f"atol {abs_value:.3g} or rtol {rel_value:.3g}"
        if not passed:  # what raising just one of the two given tolerances would take
            rtol_needed = (f"rtol {stats.min_rtol:.3g} suffices" if math.isfinite(stats.min_rtol) else
                           "no rtol suffices (an element differs from an exact zero)")
            needed += f"; at rtol {s.rtol:g}, atol {stats.min_atol:.3g} suffices; at atol {s.atol:g}, {rtol_needed}"
        required = {"atol": abs_value, "rtol": rel_value, "atol_at_rtol": stats.min_atol,
                    "rtol_at_atol": stats.min_rtol}
    else:
        abs_value, rel_value = stats.abs.statistic(stat, s.quantile), stats.rel.statistic(stat, s.quantile)
        passed = not (stat_fails(abs_value, s.atol) and stat_fails(rel_value, s.rtol))
        needed = f"atol {abs_value:.3g} or rtol {rel_value:.3g}"
        required = {"atol": abs_value, "rtol": rel_value}
    summary = (f"max abs {stats.abs.max:.3g} at {_index(stats, stats.abs)}, "
               f"max rel {stats.rel.max:.3g} at {_index(stats, stats.rel)}")
    beyond = stats.beyond_atol
    if beyond is not None and beyond.count < stats.size and beyond.max != stats.rel.max:
        summary += f" ({beyond_atol_text(beyond)})"  # the largest rel error is against references near 0
    if stats.mismatches:
        summary += f", {stats.mismatches}/{stats.size} elements beyond both tolerances"
    if stats.abs.nan_count and not passed:  # no tolerance passes a NaN error: say where they come from
        needed = (f"none: {stats.abs.nan_count} element(s) have a NaN error (NaN on either side or the same "
                  "infinity on both sides with --strict-infinities; --nan-equal counts NaN on both sides as equal)")
    summary += f"; min tolerance: {needed}" if stats.size else " (empty)"
    if stats.plan.note:  # the dtypes differ (the output's own note says so): say how they were compared
        summary += f"; compared as {stats.plan.note.rsplit('(compared as ', 1)[-1].rstrip(')')}"
    details = [f"abs error: {_describe(stats.abs)}", f"rel error: {_describe(stats.rel)}"] if stats.size else []
    if not passed:
        details += _histogram_lines("abs error histogram", stats.abs)
        details += _worst_lines(stats)
    return MetricResult(name, passed, summary=summary, criterion=f"{label}: atol {s.atol:g}, rtol {s.rtol:g}",
                        details=details, data={
                            "check": stat, "atol": s.atol, "rtol": s.rtol,
                            "quantile": s.quantile if stat == "quantile" else None,
                            "mismatches": stats.mismatches, "size": stats.size, "min_tolerance": required,
                            "reference_max": stats.reference_peak,
                            "cannot_fail": passed and cannot_fail(stats.reference_peak, s.atol),
                            "abs": _summary_data(stats, stats.abs), "rel": _summary_data(stats, stats.rel),
                            "rel_beyond_atol": None if beyond is None else _beyond_data(stats, beyond),
                            "abs_histogram": [list(row) for row in stats.abs.histogram],
                            "rel_histogram": [list(row) for row in stats.rel.histogram]}, sample=stats.sample)


def beyond_atol_text(beyond: BeyondAtol) -> str:
    """How the report says the relative error where |reference| > atol."""
    if beyond.max is None:
        return f"no |reference| > atol {beyond.atol:g}"
    return f"max rel {beyond.max:.3g} where |reference| > atol {beyond.atol:g}"


def _beyond_data(stats: ErrorStats, beyond: BeyondAtol) -> dict:
    return {"threshold": beyond.atol, "elements": beyond.count, "max": beyond.max,
            "max_index": [int(i) for i in np.unravel_index(beyond.max_index, stats.shape)]
            if beyond.max_index >= 0 and stats.shape else []}


def _index(stats: ErrorStats, summary: Summary) -> str:
    if summary.max_index < 0:
        return "-"
    return str(tuple(int(i) for i in np.unravel_index(summary.max_index, stats.shape))) if stats.shape else "()"


def _describe(summary: Summary) -> str:
    q = summary.quantiles
    text = (f"mean {summary.mean:.3g}, std {summary.std:.3g}, min {summary.min:.3g}, median {summary.median:.3g}, "
            f"p90 {q.get(0.9, math.nan):.3g}, p95 {q.get(0.95, math.nan):.3g}, p99 {q.get(0.99, math.nan):.3g}, "
            f"max {summary.max:.3g}")
    if summary.nan_count:
        text += f" ({summary.nan_count} NaN)"
    return text


def _summary_data(stats: ErrorStats, summary: Summary) -> dict:
    return {"mean": summary.mean, "std": summary.std, "min": summary.min, "max": summary.max,
            "max_index": [int(i) for i in np.unravel_index(summary.max_index, stats.shape)]
            if summary.max_index >= 0 and stats.shape else [],
            "median": summary.median, "nan_count": summary.nan_count,
            "quantiles": {f"{q:g}": v for q, v in summary.quantiles.items()}}


def _histogram_lines(title: str, summary: Summary) -> list[str]:
    rows = summary.histogram
    if not rows:
        return []
    peak = max(count for _, _, count in rows)
    lines = [f"{title}:"]
    for low, high, count in rows:
        if low == 0 and high == 0:
            label = "~0"  # zero, or below the smallest normal float
        elif math.isinf(low):
            label = "inf/NaN"
        else:
            label = f"[{low:.1e}, {high:.1e})"
        bar = "#" * max(1, round(HISTOGRAM_WIDTH * count / peak)) if count else ""  # an empty bin: no bar
        lines.append(f"  {label:>20} {count:>10} {bar}".rstrip())
    return lines


def _worst_lines(stats: ErrorStats) -> list[str]:
    if not stats.worst:
        return []
    lines = ["largest abs errors (index: actual vs reference, abs, rel):"]
    for w in stats.worst:
        lines.append(f"  {w.index}: {w.actual:.7g} vs {w.reference:.7g}, abs {w.absdiff:.3g}, rel {w.reldiff:.3g}")
    return lines
