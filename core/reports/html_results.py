"""The result sections of the HTML report, from the --report-json document: the first divergence, the per-layer
error profile, the error plots, and every pair, iteration and output with its statistics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.reports.figures import Picture
from cmpx.reports.html_page import Cell, Markup, Row, badge, details, element, image, key_values, section, table
from cmpx.reports.json_report import results_of
from cmpx.reports.profile import LayerProfile, number, rel_beyond_atol

REL_BEYOND_ATOL = "worst rel, |ref| > atol"  # the relative error where it means something (the JSON's key)
STATISTICS = (("mean", "mean"), ("std", "std"), ("min", "min"), ("median", "median"), ("p90", "0.9"),
              ("p95", "0.95"), ("p99", "0.99"), ("max", "max"))


def fmt(value: Any) -> str:
    """A number as the text report writes it (3 significant digits); None as a dash."""
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or isinstance(value, int):
        return f"{value:,}"
    return f"{value:.3g}"


def num(value: Any, class_: str = "num") -> Cell:
    """A numeric cell that sorts by its value (NaN as the largest)."""
    return Cell(fmt(value), None if value is None else number(value), class_)


def verdict_cell(passed: bool | None) -> Cell:
    text = {True: "PASSED", False: "FAILED", None: "–"}[passed]
    return Cell(text, {True: 1, False: 0, None: 2}[passed], {True: "pass", False: "fail", None: None}[passed])


def pair_title(pair: Mapping[str, Any]) -> str:
    return f"{pair['backend']} vs {pair['reference']}"


def tolerance_data(output: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for metric in output.get("metrics", ()):
        data = metric.get("data") or {}
        if isinstance(data.get("abs"), Mapping) and "atol" in data:
            return data
    return None


def picture_figure(picture: Picture) -> Markup:
    return image(picture.png, picture.caption, picture.caption, panels=picture.panels)


def divergence_section(document: Mapping[str, Any], pictures: Sequence[Picture]) -> Markup | None:
    parts = []
    for pair in document.get("pairs", ()):
        divergence = pair.get("first_divergence")
        if not divergence:
            continue
        findings = [element("li", element("code", m.get("metric")), ": ", m.get("summary"))
                    for m in divergence.get("metrics", ())]
        picture = next((p for p in pictures if p.kind == "output" and p.tensor == divergence["tensor"]
                        and (p.backend, p.reference) == (pair["backend"], pair["reference"])), None)
        parts.append(element("div", element("h3", pair_title(pair)), key_values([
            ("tensor", element("code", divergence["tensor"])), ("node", element("code", divergence.get("node"))),
            ("op type", divergence.get("op_type")), ("iteration", divergence.get("iteration"))]),
            element("p", "The first tensor in graph order that fails while every compared tensor it is computed "
                         "from passes: the error enters here.", class_="muted"),
            element("ul", findings) if findings else None,
            picture_figure(picture) if picture else None, class_="divergence"))
    if not parts:
        return None
    return section("First divergence", *parts, id_="divergence")


def layers_section(profiles: Sequence[LayerProfile], pictures: Sequence[Picture]) -> Markup | None:
    if not profiles:
        return None
    parts = []
    for profile in profiles:
        picture = next((p for p in pictures if p.kind == "profile"
                        and (p.backend, p.reference) == (profile.backend, profile.reference)), None)
        headers = ["#", "tensor", "node", "op type", "max abs", "max rel", "max rel, |ref| > atol", "atol", "rtol",
                   "verdict"]
        if profile.has_local_errors:
            headers += ["local max abs", "local max rel", "local verdict"]
        rows = []
        for row in profile.rows:
            cells = [num(row.index), Cell(row.tensor, class_="name"), Cell(row.node, class_="name"), row.op_type,
                     num(row.max_abs), num(row.max_rel), num(row.max_rel_beyond_atol), num(row.atol), num(row.rtol),
                     verdict_cell(row.passed)]
            if profile.has_local_errors:
                local = row.local
                cells += [num(local.max_abs if local else None), num(local.max_rel if local else None),
                          verdict_cell(local.passed if local else None)]
            rows.append(Row(cells, None if row.passed else "failed"))
        iterations = f" (the worst of {profile.iterations} iterations)" if profile.iterations > 1 else ""
        summary = (f"{len(profile.rows)} tensors in graph order, {profile.failing} failing{iterations}"
                   + ("; with each layer's local error" if profile.has_local_errors else ""))
        parts += [element("h3", f"{profile.backend} vs {profile.reference}"),
                  picture_figure(picture) if picture else None,
                  details(summary, table(headers, rows, row_class="layer-row"), open_=picture is None)]
    return section("Per-layer error", *parts, id_="layers")


def plots_section(document: Mapping[str, Any], pictures: Sequence[Picture], left_out: int) -> Markup | None:
    model_outputs = set(document.get("model_outputs") or ())  # an intermediate tensor's figure is the divergence's
    outputs = [p for p in pictures if p.kind == "output" and (not model_outputs or p.tensor in model_outputs)]
    if not outputs:
        return None
    parts = [element("p", "Per output: histograms of the absolute and relative errors (bins of one power of two; "
                          "dashed: the tolerance), and the absolute error of sampled elements against the "
                          "reference's magnitude, with the element-wise limit max(atol, rtol·|reference|): an "
                          "element fails above it. For each pair and output, the iteration with the largest error.",
                     class_="muted")]
    for pair in document.get("pairs", ()):
        mine = [p for p in outputs if (p.backend, p.reference) == (pair["backend"], pair["reference"])]
        if mine:
            parts.append(element("h3", pair_title(pair)))
            parts += [picture_figure(p) for p in mine]
    if left_out:
        parts.append(element("p", f"{left_out} more output figure(s) are not shown here (the failing ones and those "
                                  "with the largest errors are); --save-error-plots writes every one.", class_="note"))
    return section("Error plots", *parts, id_="plots")


def results_section(document: Mapping[str, Any]) -> Markup:
    parts = []
    outputs = set(document.get("model_outputs") or ())
    order = {t["name"]: i for i, t in enumerate(document.get("tensors") or ())}  # a marked run: graph order
    marked = bool(order)
    for pair in document.get("pairs", ()):
        parts.append(element("h3", pair_title(pair)))
        for result in results_of(document, pair):
            passed = result.get("passed")
            parts.append(element("h4", f"iteration {result['iteration']} ",
                                 badge("PASSED" if passed else "FAILED", passed)))
            parts.append(outputs_table(result, outputs if marked else set(), order))
            unmatched = result.get("unmatched") or ()
            if unmatched:
                parts.append(element("p", f"{len(unmatched)} marked tensor(s) only one side produced, not "
                                          "compared: ", ", ".join(f"{u['tensor']} (only in {u['only_in']}"
                                                                   + (f"; {u['reason']}" if u.get("reason") else "")
                                                                   + ")" for u in unmatched[:20]),
                                     " …" if len(unmatched) > 20 else "", class_="muted"))
            for output in result.get("not_comparable") or ():
                parts.append(element("p", f"{output['output']} not compared: {output['reason']}", class_="muted"))
            statistics = statistics_table(result)
            if statistics is not None:
                parts.append(details(f"error statistics of iteration {result['iteration']}", statistics))
    if document.get("results_dropped"):
        parts.append(element("p", f"{document['results_dropped']} pair-iteration(s) of this long run are not listed "
                                  "(their totals are in the summary).", class_="note"))
    if not parts:
        parts.append(element("p", "Nothing was compared.", class_="note"))
    return section("Results", *parts, id_="results")


def outputs_table(result: Mapping[str, Any], model_outputs: set[str], order: Mapping[str, int]) -> Markup:
    """One row per compared output: the tolerance check's numbers in columns (its full finding as the tooltip of
    the verdict), and in "notes" what the columns do not say: other metrics, dtype remarks, why it failed early."""
    rows = []
    listed = sorted(result.get("outputs", ()), key=lambda o: order.get(o["name"], len(order)))
    for output in listed:
        data = tolerance_data(output)
        tolerance = next((m for m in output.get("metrics", ()) if m.get("data") is data), None) if data else None
        notes = [f"{m['metric']}: {m.get('summary', '')} [{m.get('criterion', '')}]"
                 for m in output.get("metrics", ()) if m is not tolerance]
        if output.get("note"):
            notes.append(output["note"])
        name = output["name"] + (" (model output)" if output["name"] in model_outputs else "")
        verdict = verdict_cell(output["passed"])
        if tolerance is None or data is None:
            cells = ["–", num(None), num(None), num(None), num(None), num(output.get("elements")), "–"]
        else:
            verdict = Cell(verdict.content, verdict.sort, verdict.class_, title=tolerance.get("summary"))
            needed = data.get("min_tolerance") or {}
            cells = [tolerance.get("criterion"), num(data["abs"].get("max")), num(data["rel"].get("max")),
                     num(rel_beyond_atol(data)), num(data.get("mismatches")), num(output.get("elements")),
                     f"atol {fmt(needed.get('atol'))} or rtol {fmt(needed.get('rtol'))}"]
        rows.append(Row([Cell(name, class_="name"), verdict, *cells, "; ".join(notes)],
                        None if output["passed"] else "failed"))
    headers = ["output", "verdict", "check", "max abs", "max rel", "max rel, |ref| > atol", "beyond both", "elements",
               "passes at", "notes"]
    return table(headers, rows, row_class="output-row", class_="results")


def statistics_table(result: Mapping[str, Any]) -> Markup | None:
    rows = []
    for output in result.get("outputs", ()):
        data = tolerance_data(output)
        if data is None:
            continue
        for kind in ("abs", "rel"):
            stats = data[kind]
            quantiles = stats.get("quantiles") or {}
            values = [stats.get(key) if key in stats else quantiles.get(key) for _, key in STATISTICS]
            rows.append([Cell(output["name"], class_="name"), kind, *[num(v) for v in values],
                         num(stats.get("nan_count"))])
    if not rows:
        return None
    return table(["output", "error", *[label for label, _ in STATISTICS], "NaN"], rows)
