"""The per-layer error profile of a run with marked tensors: for each pair, every compared tensor in graph order
with its largest absolute and relative error (the worst over the iterations the report holds), its tolerances and
verdict, the first divergence, and, where the report has them, each tensor's local error (the error a layer adds
itself, given the reference's inputs: per pair ``local_errors`` entries with ``tensor``, ``node``, ``op_type``,
``max_abs``, ``max_rel``, ``passed``).

Built from the --report-json document (``Report.to_dict()``), so a saved report can be drawn again. No numpy, no
matplotlib: the HTML report lists the rows, cmpx.reports.profile_plot draws them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cmpx.reports.json_report import results_of


@dataclass(frozen=True)
class LocalError:
    max_abs: float
    max_rel: float
    passed: bool | None
    max_rel_beyond_atol: float | None = None  # None: no |reference| > atol


@dataclass
class LayerRow:
    """One compared tensor of one pair. ``index`` is its position in graph order."""

    index: int
    tensor: str
    node: str
    op_type: str
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    passed: bool
    iterations: int = 0  # iterations in which it was compared
    is_output: bool = False
    local: LocalError | None = None
    max_rel_beyond_atol: float | None = None  # the largest relative error where |reference| > atol (None: none is)


@dataclass
class LayerProfile:
    backend: str
    reference: str
    iterations: int  # iterations the rows are taken from
    rows: list[LayerRow] = field(default_factory=list)
    divergence: Mapping[str, Any] | None = None  # the pair's first divergence (tensor, node, op_type, iteration)

    @property
    def has_local_errors(self) -> bool:
        return any(row.local is not None for row in self.rows)

    @property
    def failing(self) -> int:
        return sum(not row.passed for row in self.rows)


def number(value: Any) -> float:
    """A number of the document: floats, or the strings "NaN" and "Infinity" of strict JSON; None is NaN."""
    if value is None:
        return math.nan
    return float(value)


def _worse(old: float, new: float) -> float:
    if math.isnan(old) or math.isnan(new):
        return math.nan
    return max(old, new)


def layer_profiles(document: Mapping[str, Any]) -> list[LayerProfile]:
    """One profile per pair of a run that compared intermediate tensors (``document["tensors"]`` lists them in
    graph order); empty for other runs."""
    order = {t["name"]: (i, t.get("node", ""), t.get("op_type", "")) for i, t in enumerate(document.get("tensors")
                                                                                            or ())}
    if not order:
        return []
    outputs = set(document.get("model_outputs") or ())
    profiles = []
    for pair in document.get("pairs", ()):
        results = results_of(document, pair)
        profile = LayerProfile(pair["backend"], pair["reference"], len(results),
                               divergence=pair.get("first_divergence"))
        rows: dict[str, LayerRow] = {}
        for result in results:
            for output in result.get("outputs", ()):
                name = output["name"]
                data = _tolerance_data(output)
                if name not in order or data is None:
                    continue
                max_abs, max_rel = number(data["abs"]["max"]), number(data["rel"]["max"])
                beyond = rel_beyond_atol(data)
                row = rows.get(name)
                if row is None:
                    index, node, op_type = order[name]
                    rows[name] = LayerRow(index, name, node, op_type, max_abs, max_rel, number(data["atol"]),
                                          number(data["rtol"]), bool(output["passed"]), 1, name in outputs,
                                          max_rel_beyond_atol=beyond)
                else:
                    row.max_abs, row.max_rel = _worse(row.max_abs, max_abs), _worse(row.max_rel, max_rel)
                    row.max_rel_beyond_atol = (beyond if row.max_rel_beyond_atol is None else row.max_rel_beyond_atol
                                               if beyond is None else _worse(row.max_rel_beyond_atol, beyond))
                    row.passed = row.passed and bool(output["passed"])
                    row.iterations += 1
        for entry in pair.get("local_errors") or ():
            name = entry.get("tensor")
            if name in rows:
                passed = entry.get("passed")
                beyond = entry.get("max_rel_beyond_atol", entry.get("max_rel"))  # an older document: max_rel
                rows[name].local = LocalError(number(entry.get("max_abs")), number(entry.get("max_rel")),
                                              None if passed is None else bool(passed),
                                              None if beyond is None else number(beyond))
        profile.rows = sorted(rows.values(), key=lambda row: row.index)
        if profile.rows:
            profiles.append(profile)
    return profiles


def rel_beyond_atol(data: Mapping[str, Any]) -> float | None:
    """A tolerance check's largest relative error where |reference| > atol; None where no reference is (or the
    document is older than the statistic)."""
    beyond = data.get("rel_beyond_atol") or {}
    return None if beyond.get("max") is None else number(beyond["max"])


def _tolerance_data(output: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The data of the output's tolerance check (the metric with abs and rel statistics), if it has one."""
    for metric in output.get("metrics", ()):
        data = metric.get("data") or {}
        if isinstance(data.get("abs"), Mapping) and isinstance(data.get("rel"), Mapping) and "atol" in data:
            return data
    return None


def divergence_label(divergence: Mapping[str, Any] | None) -> str:
    """ "tensor (node, op type)" of the first divergence, or ""."""
    if not divergence:
        return ""
    where = ", ".join(part for part in (divergence.get("node"), divergence.get("op_type")) if part)
    return f"{divergence['tensor']} ({where})" if where else str(divergence["tensor"])
