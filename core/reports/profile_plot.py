"""The per-layer error profile as a figure: the largest absolute (top) and relative (bottom) error of every compared
tensor in graph order on log axes, the tolerances as lines, failing tensors in red, the first divergence marked
with its node and op type, and each layer's own (local) error overlaid where the report has it. Needs matplotlib.
"""

from __future__ import annotations

import math
from typing import Any

from cmpx.reports.plots import FAIL_COLOUR, LIMIT_COLOUR, PASS_COLOUR, plain
from cmpx.reports.profile import LayerProfile, divergence_label

LOCAL_COLOUR = "#ff7f0e"
LABELLED_TICKS = 48  # up to this many tensors, each is labelled with its op type


def profile_figure(profile: LayerProfile, title: str) -> Any:
    from matplotlib.figure import Figure

    rows = profile.rows
    labelled = len(profile.rows) <= LABELLED_TICKS
    figure = Figure(figsize=(13, 7.2))
    figure.subplots_adjust(left=0.07, right=0.99, top=0.89, bottom=0.2 if labelled else 0.09, hspace=0.08)
    top, bottom = figure.subplots(2, 1, sharex=True)
    x = [row.index for row in rows]
    # the relative error where |reference| > atol: against references near 0 it explodes (1 / 2.2e-16) though
    # atol passes those elements, and a panel of those says nothing; documents older than the statistic lack it
    meaningful = any(row.max_rel_beyond_atol is not None for row in rows)
    for axis, key, tolerance, name in ((top, "max_abs", "atol", "largest absolute error"),
                                       (bottom, "max_rel_beyond_atol" if meaningful else "max_rel", "rtol",
                                        "largest relative error\nwhere |reference| > atol" if meaningful else
                                        "largest relative error")):
        values = [getattr(row, key) for row in rows]
        _draw_errors(axis, x, values, [row.passed for row in rows], [getattr(row, tolerance) for row in rows],
                     tolerance)
        if meaningful and axis is bottom and any(row.max_rel_beyond_atol != row.max_rel for row in rows):
            axis.text(0.005, 0.02, "relative errors against |reference| ≤ atol are left out (the tables have "
                                   "them)", transform=axis.transAxes, fontsize=7, color="#555555")
        if profile.has_local_errors:
            local = [(row.index, getattr(row.local, key)) for row in rows if row.local is not None]
            _scatter_positive(axis, local, dict(marker="s", s=30, facecolors="none", edgecolors=LOCAL_COLOUR,
                                                linewidths=1.3, label="local error (the layer's own)", zorder=4))
        axis.set_yscale("log")
        axis.minorticks_off()
        axis.set_ylabel(name, fontsize=9)
        axis.grid(True, which="major", alpha=0.3)
    top.margins(x=0.02)
    _mark_divergence(top, bottom, profile)
    _label_x(bottom, rows)
    handles, labels = top.get_legend_handles_labels()
    for handle, label in zip(*bottom.get_legend_handles_labels()):
        if label.startswith("rtol"):
            handles.append(handle)
            labels.append(label)
    top.legend(handles, labels, loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=8, ncols=6, frameon=False)
    figure.suptitle(plain(title, 160), fontsize=11)
    return figure


def _draw_errors(axis: Any, x: list[int], given: list[float | None], passed: list[bool], tolerances: list[float],
                 name: str) -> None:
    """``given``: one value per tensor; None where a tensor has none (no |reference| > atol), drawn as no point."""
    values = [math.inf if v is None else v for v in given]  # not finite: left out of the scale
    finite = [v for v in values if math.isfinite(v) and v > 0]
    floor = min(finite + [t for t in tolerances if t > 0]) / 10 if finite else 1e-12
    shown = [v if math.isfinite(v) and v > 0 else (floor if v == 0 else math.nan) for v in values]
    axis.plot(x, shown, color="#999999", linewidth=0.8, zorder=1)
    for ok, colour, label in ((True, PASS_COLOUR, "passes"), (False, FAIL_COLOUR, "fails")):
        points = [(i, v) for i, v, p in zip(x, shown, passed) if p == ok and not math.isnan(v)]
        if points:
            axis.scatter(*zip(*points), s=18 if ok else 26, color=colour, label=f"tensor {label}", zorder=3)
    ceiling = max(finite + [t for t in tolerances if t > 0] + [floor * 10]) * 5
    special = [i for i, v in zip(x, given) if v is not None and not math.isfinite(v)]
    if special:  # NaN or inf: drawn at the top edge
        axis.scatter(special, [ceiling] * len(special), marker="^", s=40, color=FAIL_COLOUR, zorder=3,
                     label="NaN or inf (top edge)")
    if any(v == 0 for v in values):
        axis.text(0.995, 0.02, "error 0: bottom edge", transform=axis.transAxes, ha="right", fontsize=7,
                  color="#555555")
    if len(set(tolerances)) == 1:
        if tolerances[0] > 0:
            axis.axhline(tolerances[0], color=LIMIT_COLOUR, linestyle="--", linewidth=1.1,
                         label=f"{name} {tolerances[0]:g}")
    else:  # per-output tolerances differ: a step per tensor
        axis.step(x, tolerances, where="mid", color=LIMIT_COLOUR, linestyle="--", linewidth=1.1, label=name)
    axis.set_ylim(floor / 2, ceiling * 2)


def _scatter_positive(axis: Any, points: list[tuple[int, float | None]], style: dict) -> None:
    shown = [(i, v) for i, v in points if v is not None and math.isfinite(v) and v > 0]
    if shown:
        axis.scatter(*zip(*shown), **style)


def _mark_divergence(top: Any, bottom: Any, profile: LayerProfile) -> None:
    divergence = profile.divergence
    if not divergence:
        return
    row = next((r for r in profile.rows if r.tensor == divergence.get("tensor")), None)
    if row is None:
        return
    for axis in (top, bottom):
        axis.axvline(row.index, color=FAIL_COLOUR, linewidth=1, alpha=0.5, zorder=0)
    label = plain(f"first divergence: {divergence_label(divergence)}", 80)
    value = row.max_abs if math.isfinite(row.max_abs) and row.max_abs > 0 else top.get_ylim()[1] / 10
    left = row.index > (profile.rows[0].index + profile.rows[-1].index) / 2
    top.annotate(label, xy=(row.index, value), xytext=(row.index, 0.93), textcoords=("data", "axes fraction"),
                 ha="right" if left else "left", va="top", fontsize=8, color=FAIL_COLOUR,
                 bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor=FAIL_COLOUR, alpha=0.9),
                 arrowprops=dict(arrowstyle="->", color=FAIL_COLOUR))


def _label_x(axis: Any, rows: list) -> None:
    if len(rows) <= LABELLED_TICKS:
        axis.set_xticks([row.index for row in rows], [plain(row.op_type or "?", 20) + ("*" if row.is_output else "")
                                                      for row in rows], rotation=90, fontsize=7)
        axis.set_xlabel("tensors in graph order, by the op type computing them (* a model output)", fontsize=9)
    else:
        axis.set_xlabel(f"tensor index in graph order ({len(rows)} compared tensors)", fontsize=9)
