"""The HTML report's oracle section, from the --report-json document's ``oracle`` keys (docs/oracle.md): every
backend's largest errors against the fp64 oracle and where they first jump, and each failing output's two sides
against it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmpx.reports.html_page import Cell, Markup, element, section, table
from cmpx.reports.html_results import fmt, num
from cmpx.reports.profile import number

JUDGEMENTS_SHOWN = 500  # rows of the failing outputs' table (the JSON report has every one)


def oracle_section(document: Mapping[str, Any]) -> Markup | None:
    summary = document.get("oracle")
    if not summary:
        return None
    outputs = set(document.get("model_outputs") or ())
    rows = []
    for backend in summary.get("backends", ()):
        tensors = backend.get("tensors") or {}
        measured = {name: e for name, e in tensors.items() if name in outputs or not outputs}
        worst = max(measured.items(), key=lambda item: _largest(item[1]["max_abs"]), default=None)
        rows.append([Cell(backend["backend"], class_="name"), Cell(worst[0] if worst else "–", class_="name"),
                     num(worst[1]["max_abs"] if worst else None), num(worst[1]["mean_abs"] if worst else None),
                     _layer_text(backend)])
    judgements = [(record, j) for record in document.get("results", ()) if record.get("kind", "pair") == "pair"
                  for j in record.get("oracle") or ()]
    judged = [[Cell(f"{r['backend']} vs {r['reference']}", class_="name"), num(r.get("iteration")),
               Cell(j["output"], class_="name"), Cell(j.get("closer") or "neither", class_="name"),
               num(j.get("ratio")), num(j["backend_error"]["max_abs"]), num(j["reference_error"]["max_abs"]),
               j.get("sentence")] for r, j in judgements[:JUDGEMENTS_SHOWN]]
    left = len(judgements) - len(judged)
    return section(
        f"Against the oracle ({summary['oracle']})",
        element("p", "Every backend measured against the model computed in float64 (not the reference of the "
                     "verdict unless --reference names it). For each failing output, the side further from the "
                     "oracle is the one that disagrees; within 2× of each other, both are as far.", class_="muted"),
        table(["backend", "worst output", "max abs error", "mean abs error", "per layer"], rows),
        table(["pair", "iteration", "output", "closer to exact", "ratio", "backend's max abs", "reference's max abs",
               "verdict"], judged, caption=f"{len(judgements)} failing output(s) measured"
                                           + (f", the first {len(judged)} shown" if left else ""))
        if judged else element("p", "No failing output to judge.", class_="muted"),
        id_="oracle")


def _layer_text(backend: Mapping[str, Any]) -> str:
    if not backend.get("layered"):
        return "– (no marked tensors)"
    jump = backend.get("first_jump")
    if jump:
        where = ", ".join(p for p in (jump.get("node"), jump.get("op_type")) if p)
        return (f"jumps at {jump['tensor']} ({where}): {fmt(jump.get('step'))}× what its inputs carried — a "
                "fault there")
    step = backend.get("largest_step")
    return "no jump: a precision drift" + (f" (largest step {fmt(step['step'])}× at {step['tensor']})" if step else "")


def _largest(value: Any) -> float:
    found = number(value)
    return float("inf") if found != found else found
