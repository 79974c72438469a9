"""Error plots of one compared output (--save-error-plots, --report-html): histograms of its absolute and relative
errors on log-spaced bins (one per power of two) with the tolerances drawn, and the absolute error of sampled
elements against the reference's magnitude with the element-wise limit max(atol, rtol * |reference|), so that a
failure of the relative error near zero is told apart from a real one at a glance.

Needs matplotlib (pip install 'cmpx[plots]'); drawn with matplotlib's object API (no pyplot state), as PNG bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.errors import UsageError

INSTALL_HINT = "--save-error-plots needs matplotlib: pip install 'cmpx[plots]'"
PASS_COLOUR, FAIL_COLOUR, LIMIT_COLOUR = "#1f77b4", "#d62728", "#222222"
DPI = 90


def check_plotting() -> None:
    """Fail before any inference if matplotlib is missing."""
    if not plotting_available():
        raise UsageError(INSTALL_HINT)


def plotting_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plain(text: str, limit: int = 90) -> str:
    """``text`` as matplotlib shows it literally ('$' would start mathtext), cut in the middle past ``limit``."""
    if len(text) > limit:
        text = text[: limit // 2 - 1] + "…" + text[-(limit // 2 - 1):]
    return text.replace("\\", "\\\\").replace("$", r"\$")


def png_bytes(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def png_and_panels(figure: Any, top: float = 0.94) -> tuple[bytes, tuple[bytes, ...]]:
    """The figure as PNG, and each of its side-by-side panels cut out below the figure's title (``top``, a
    fraction of its height), drawn once: a page too narrow for the whole figure shows the panels one under the
    other at a readable size."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.image import imsave

    figure.set_dpi(DPI)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    pixels = np.asarray(canvas.buffer_rgba())
    height, width = pixels.shape[:2]

    def encoded(array: Any) -> bytes:
        buffer = io.BytesIO()
        imsave(buffer, np.ascontiguousarray(array), format="png")
        return buffer.getvalue()

    axes = sorted(figure.axes, key=lambda axis: axis.get_position().x0)
    cuts = [0] + [round(width * min(1.0, a.get_position().x1 + 0.006)) for a in axes[:-1]] + [width]
    first = round(height * (1 - top))
    return encoded(pixels), tuple(encoded(pixels[first:, left:right]) for left, right in zip(cuts, cuts[1:]))


def output_figure(title: str, data: Mapping[str, Any], sample: Any = None) -> Any:
    """The figure of one output: ``data`` is its tolerance check's data (cmpx_comparators.tolerance_report: atol,
    rtol, check, coarse histograms), ``sample`` its cmpx.outcome.results.ErrorSample (finer histograms and the elements
    for the magnitude plot) when one was taken."""
    from matplotlib.figure import Figure

    atol, rtol = float(data["atol"]), float(data["rtol"])
    panels = 3 if sample is not None else 2
    figure = Figure(figsize=(5.0 * panels, 4.7))
    # Fixed margins: matplotlib's constrained layout would take most of the drawing time.
    figure.subplots_adjust(left=0.05 * 3 / panels, right=0.985, bottom=0.25, top=0.85, wspace=0.22)
    axes = figure.subplots(1, panels)
    abs_rows = sample.abs_histogram if sample is not None else data.get("abs_histogram", ())
    rel_rows = sample.rel_histogram if sample is not None else data.get("rel_histogram", ())
    draw_histogram(axes[0], abs_rows, atol, "absolute", "|actual − reference|", "atol", PASS_COLOUR)
    draw_histogram(axes[1], rel_rows, rtol, "relative", "|actual − reference| / |reference|", "rtol", "#2ca02c")
    mark_beyond_atol(axes[1], data.get("rel_beyond_atol"), data["rel"].get("max"))
    if sample is not None:
        draw_magnitude(axes[2], sample, atol, rtol, data.get("check", "elemwise"))
    figure.suptitle(plain(title, 150), fontsize=11)
    for axis in axes:
        axis.minorticks_off()  # hundreds of minor ticks on log axes cost more than they tell
    return figure


def draw_histogram(axis: Any, rows: Sequence[Sequence[float]], tolerance: float, kind: str, label: str, name: str,
                   colour: str) -> None:
    """Bars on a log x axis, one per row (low, high, count); zeros and non-finite values are counted in a note."""
    bars = [(float(low), float(high), int(count)) for low, high, count in rows
            if 0 < float(low) and math.isfinite(float(low)) and count]
    zeros = sum(int(count) for low, high, count in rows if float(low) == 0 and float(high) == 0)
    special = sum(int(count) for low, _, count in rows if not math.isfinite(float(low)))
    total = sum(int(row[2]) for row in rows)
    axis.set_xscale("log")
    axis.set_xlabel(f"{kind} error {label}", fontsize=9)
    axis.set_ylabel("elements", fontsize=9)
    if bars:
        lows = [b[0] for b in bars]
        widths = [b[1] - b[0] for b in bars]
        counts = [b[2] for b in bars]
        beyond = [FAIL_COLOUR if low >= tolerance else colour for low in lows]
        axis.bar(lows, counts, width=widths, align="edge", color=beyond, edgecolor="white", linewidth=0.5)
        if max(counts) > 50 * min(counts):
            axis.set_yscale("log")
        low, high = min(lows), max(b[1] for b in bars)
    else:  # nothing to draw on a log axis: say what there is instead of empty axes
        low, high = tolerance / 10 if tolerance > 0 else 1e-8, tolerance * 10 if tolerance > 0 else 1.0
        nothing = ("no elements" if not total else f"all {kind} errors 0" if zeros == total else
                   f"all {kind} errors inf or NaN" if special == total else f"all {kind} errors 0, inf or NaN")
        axis.text(0.5, 0.5, nothing, transform=axis.transAxes, ha="center", va="center", fontsize=13,
                  color="#444444")
        axis.set_yticks([])
    if tolerance > 0:
        low, high = min(low, tolerance / 2), max(high, tolerance * 2)
    axis.set_xlim(low, high)  # before the line: autoscaling to a lone vertical line has no width
    if tolerance > 0:
        axis.axvline(tolerance, color=LIMIT_COLOUR, linestyle="--", linewidth=1.2)
    notes = []
    if zeros:
        notes.append(f"{zeros:,} exactly 0 (not on a log axis)")
    if special:
        notes.append(f"{special:,} inf or NaN")
    if notes and bars:
        axis.text(0.02, 0.97, "\n".join(notes), transform=axis.transAxes, va="top", fontsize=8, color="#555555")
    limit = f"dashed: {name} {tolerance:g}; red: bins above it" if tolerance > 0 else f"{name} 0: any error is above it"
    axis.set_title(f"{kind} error of {total:,} elements\n{limit}", fontsize=9)
    axis.grid(True, which="major", axis="y", alpha=0.3)


def mark_beyond_atol(axis: Any, beyond: Mapping[str, Any] | None, largest: Any) -> None:
    """The largest relative error where |reference| > atol, as a dotted line with its value, where it is not the
    largest of all: where the relative error means something (against references near 0 it explodes though atol
    passes them)."""
    if not beyond or beyond.get("max") is not None and largest is not None and \
            float(beyond["max"]) == float(largest):
        return
    value = beyond.get("max")
    text = (f"no |reference| > atol {float(beyond['threshold']):g}" if value is None else
            f"max where |reference| > atol: {float(value):.3g}\n({int(beyond['elements']):,} elements)")
    if value is not None and 0 < float(value) < math.inf:
        low, high = axis.get_xlim()
        axis.set_xlim(min(low, float(value) / 2), max(high, float(value) * 2))
        axis.axvline(float(value), color="#6a3d9a", linestyle=":", linewidth=1.6)
    axis.text(0.98, 0.97, text, transform=axis.transAxes, ha="right", va="top", fontsize=8, color="#6a3d9a",
              bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none", alpha=0.85), zorder=5)


def draw_magnitude(axis: Any, sample: Any, atol: float, rtol: float, check: str) -> None:
    """Absolute error against |reference| of the sampled elements, with the element-wise limit: an element fails
    where its error is above max(atol, rtol * |reference|) (beyond both tolerances, Polygraphy's rule)."""
    import numpy as np

    x, y, rel = sample.magnitude, sample.abs, sample.rel
    finite = np.isfinite(x) & np.isfinite(y)
    hidden = int(np.count_nonzero(~finite))
    x_pos, y_pos = x[finite & (x > 0)], y[finite & (y > 0)]
    x_floor = float(x_pos.min()) / 4 if x_pos.size else 1e-8
    y_floor = float(y_pos.min()) / 4 if y_pos.size else (atol / 10 if atol > 0 else 1e-12)
    xs, ys = np.where(x > 0, x, x_floor), np.where(y > 0, y, y_floor)
    with np.errstate(invalid="ignore"):
        fails = ((y > atol) | np.isnan(y)) & ((rel > rtol) | np.isnan(rel))
    worst = np.zeros(x.size, bool)
    worst[: sample.worst] = True
    uniform = x.size - sample.worst
    others = "element" if x.size == sample.total else f"element ({uniform:,} at random of {sample.total:,})"
    series = [(~worst & ~fails, "o", PASS_COLOUR, 9, f"{others} that passes"),
              (~worst & fails, "o", FAIL_COLOUR, 9, f"{others} that fails"),
              (worst & ~fails, "^", PASS_COLOUR, 22, f"one of the {sample.worst:,} largest errors, passes"),
              (worst & fails, "^", FAIL_COLOUR, 22, f"one of the {sample.worst:,} largest errors, fails")]
    for mask, marker, colour, size, label in series:
        mask = mask & finite
        failing = colour == FAIL_COLOUR  # on top, and larger: a few failing elements must not hide
        if mask.any():
            axis.scatter(xs[mask], ys[mask], s=size * (1.8 if failing else 1), marker=marker, color=colour,
                         alpha=0.9 if failing else 0.6, linewidths=0, label=label, zorder=3 if failing else 2)
    axis.set_xscale("log")
    axis.set_yscale("log")
    low_x, high_x = (float(xs[finite].min()), float(xs[finite].max())) if finite.any() else (1e-3, 1.0)
    low_x, high_x = low_x / 2, high_x * 2
    if rtol > 0 and atol > 0:  # show where the limit turns from atol to rtol * |reference|
        low_x, high_x = min(low_x, atol / rtol / 4), max(high_x, atol / rtol * 4)
    grid = np.geomspace(low_x, high_x, 200)
    limit = np.maximum(atol, rtol * grid)
    top = max(float(ys[finite].max()) if finite.any() else 1.0, float(limit.max())) * 3
    bottom = min(y_floor, float(limit.min()) if limit.min() > 0 else y_floor) / 2
    if limit.max() > 0:  # with atol = rtol = 0 there is no limit to draw: every nonzero error fails
        axis.plot(grid, limit, color=LIMIT_COLOUR, linewidth=1.4, label="limit max(atol, rtol·|ref|)")
    axis.fill_between(grid, np.maximum(limit, bottom), top, color=FAIL_COLOUR, alpha=0.06, linewidth=0)
    axis.set_xlim(low_x, high_x)
    axis.set_ylim(bottom, top)
    axis.set_xlabel("|reference|", fontsize=9)
    axis.set_ylabel("absolute error", fontsize=9)
    notes = []
    if np.any(finite & (x == 0)):
        notes.append(f"{int(np.count_nonzero(finite & (x == 0)))} with |reference| = 0 at the left edge")
    if np.any(finite & (y == 0)):
        notes.append(f"{int(np.count_nonzero(finite & (y == 0)))} with error 0 at the bottom edge")
    if hidden:
        notes.append(f"{hidden} inf or NaN not shown")
    if check != "elemwise":
        notes.append(f"(the check is on the {check} error, not per element)")
    if notes:
        axis.text(0.98, 0.03, "\n".join(notes), transform=axis.transAxes, ha="right", va="bottom", fontsize=7,
                  color="#555555")
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), fontsize=7, frameon=False, ncols=1, markerscale=1.5)
    shown = f"all {sample.total:,} elements" if x.size == sample.total else f"{x.size:,} of {sample.total:,} elements"
    axis.set_title(f"error against the reference's magnitude, {shown}\n(shaded: an element there fails)", fontsize=9)
    axis.grid(True, which="major", alpha=0.3)
