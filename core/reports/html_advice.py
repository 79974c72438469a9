"""The HTML report's "Next steps": what the text report tells the user to do next, from the --report-json document
and worded by cmpx.reports.advice (the tolerances that pass a transformed pair, the --local-error ranking), and the
command line that runs the same comparison again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmpx.reports.advice import hinted, local_error_numbers, lowered, measured_tolerance, pass_options, \
    rank_local_errors, tolerance_hint
from cmpx.reports.html_page import Cell, Content, Markup, Row, element, section, table
from cmpx.reports.html_results import pair_title, verdict_cell
from cmpx.reports.json_report import results_of
from cmpx.outcome.results import LocalError


def next_steps_section(document: Mapping[str, Any]) -> Markup | None:
    parts: list[Content] = []
    hints = [element("li", hint) for pair in document.get("pairs", ()) if (hint := tolerance_hint_of(document, pair))]
    if hints:
        parts.append(element("ul", hints, class_="hints"))
    for pair in document.get("pairs", ()):
        if pair.get("local_errors") is not None:
            parts.append(local_errors_block(pair))
    if document.get("command"):
        parts += [element("h3", "Run it again"), element("pre", document["command"], class_="command")]
    if not parts:
        return None
    return section("Next steps", *parts, id_="next")


def tolerance_hint_of(document: Mapping[str, Any], pair: Mapping[str, Any]) -> str | None:
    """The text report's hint for a pair whose one side runs a lower-precision graph and whose model outputs fail: the
    tolerances that pass them, as measured over the iterations the document holds."""
    transforms = {b["name"]: b.get("transform") for b in document.get("backends", ()) if b.get("transform")}
    lower = lowered(transforms)
    backend, reference = pair["backend"], pair["reference"]
    if not hinted(backend in lower, reference in lower):
        return None
    model_outputs = set(document.get("model_outputs") or ())
    marked = bool(document.get("tensors"))
    atol, rtol = measured_tolerance((0.0, 0.0), (
        (bool(metric.get("passed")), metric.get("data") or {}) for result in results_of(document, pair)
        for output in result.get("outputs", ()) if not marked or output["name"] in model_outputs
        for metric in output.get("metrics", ())))
    options = pass_options(atol, rtol)
    if not options:
        return None
    transformed = backend if backend in lower else reference
    return tolerance_hint(transformed, transforms[transformed], backend, reference, options)


def local_errors_block(pair: Mapping[str, Any]) -> Markup:
    """--local-error: the nodes ranked as the text report lists them (those failing on their own first), so that a
    second, independent fault shows beside the first."""
    ranking = rank_local_errors([LocalError.from_dict(record) for record in pair["local_errors"]])
    rows = []
    for error in ranking.shown:
        what = error.note if error.passed is None else local_error_numbers(error)
        if error.subgraph_nodes > 1:
            what += f" (with {error.subgraph_nodes - 1} uncompared node(s))"
        rows.append(Row([verdict_cell(error.passed), Cell(error.tensor, class_="name"), Cell(error.node, class_="name"),
                         error.op_type, what, "yes: fails in the run" if error.inheriting else ""],
                        "failed" if error.passed is False else None))
    seconds = pair.get("local_error_seconds")
    return element("div", element("h3", f"Local error of {pair_title(pair)}"),
                   element("p", ranking.headline() + " (each node run on the reference's values of its inputs, "
                                "iteration 0" + (f"; {float(seconds):.2f} s" if seconds is not None else "") + ").",
                           class_="local-headline"),
                   table(["local verdict", "tensor", "node", "op type", "local error", "inheriting"], rows,
                         row_class="local-row", sortable=False),
                   element("p", f"{ranking.more} more: every node is in the per-layer table and the JSON report "
                                "(local_errors).", class_="muted") if ranking.more else None, class_="local-errors")
