"""--report-html: the whole run as one self-contained HTML page, made from the --report-json document (so a saved
JSON report can be rendered again) and the pictures cmpx.reports.figures drew.

Sections: the verdict and the run (model, backends with their frameworks' versions, options, seed, cmpx version),
the summary per pair, the next steps (cmpx.reports.html_advice), backend failures with the tail of their
stderr, the first divergence, the per-layer error profile, the backends against the fp64 oracle, the error
plots, every pair/iteration/output with its statistics, and the warnings. Readable without
JavaScript (which only makes the tables sortable); every name from a model or a file is escaped.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from cmpx.errors import ExitCode
from cmpx.outputs import write_file
from cmpx.outcome.report_data import VERDICTS
from cmpx.reports.figures import Picture
from cmpx.reports.html_advice import next_steps_section
from cmpx.reports.html_page import Cell, Content, Markup, Row, badge, details, element, key_values, render_page, \
    section, table
from cmpx.reports.html_oracle import oracle_section
from cmpx.reports.html_results import REL_BEYOND_ATOL, divergence_section, fmt, layers_section, num, pair_title, \
    plots_section, results_section, verdict_cell
from cmpx.reports.profile import divergence_label, layer_profiles
from cmpx.reports.text_lines import all_empty_line


def verdict_text(document: Mapping[str, Any]) -> str:
    """The report's own verdict words (``Report.verdict``); documents written before it had them, by exit code."""
    if document.get("interrupted"):
        return VERDICTS[ExitCode.INTERRUPTED]
    code = int(document["exit_code"])
    return document.get("verdict") or (VERDICTS[ExitCode(code)] if code in set(ExitCode) else f"exit {code}")


def render_report(document: Mapping[str, Any], pictures: Sequence[Picture] = (), *, plots: bool = True,
                  figures_left_out: int = 0, generated: datetime.datetime | None = None) -> str:
    """The HTML page of one run's document (``Report.to_dict()``). ``plots``: whether plots were drawn (a report
    without them says how to get them)."""
    generated = generated or datetime.datetime.now().astimezone()
    model = document.get("model") or "saved runs"
    verdict = verdict_text(document)
    body: list[Content] = [element("h1", "cmpx report: ", element("code", model)), verdict_line(document)]
    navigation: dict[str, str] = {}

    def add(anchor: str, label: str, part: Markup | None) -> None:
        if part is not None:
            navigation[anchor] = label
            body.append(part)

    profiles = layer_profiles(document)
    add("summary", "Summary", summary_section(document))
    add("next", "Next steps", next_steps_section(document))
    add("failures", "Backend failures", failures_section(document))
    add("divergence", "First divergence", divergence_section(document, pictures))
    add("layers", "Per-layer error", layers_section(profiles, pictures))
    add("oracle", "Oracle", oracle_section(document))
    add("plots", "Error plots", plots_section(document, pictures, figures_left_out))
    if not plots:
        body.append(element("p", "This report has no plots: they need matplotlib (pip install 'cmpx[plots]').",
                            class_="note"))
    add("results", "Results", results_section(document))
    add("warnings", "Warnings", warnings_section(document))
    add("run", "Run", run_section(document))
    footer = element("span", f"cmpx {document.get('cmpx_version', '?')}, report written "
                             f"{generated.strftime('%Y-%m-%d %H:%M:%S %Z').strip()}")
    return render_page(f"cmpx: {verdict} | {model}", body, navigation=navigation, footer=footer)


def write_html_report(path: str, document: Mapping[str, Any], pictures: Sequence[Picture] = (), *,
                      plots: bool = True, figures_left_out: int = 0) -> None:
    page = render_report(document, pictures, plots=plots, figures_left_out=figures_left_out)
    write_file("--report-html", path, lambda f: f.write(page))


def verdict_line(document: Mapping[str, Any]) -> Markup:
    compared = sum(int(p.get("iterations", 0)) for p in document.get("pairs", ()))
    passed = None if document.get("interrupted") else bool(document.get("passed"))
    return element("p", badge(verdict_text(document), passed),
                   f" {compared} comparison(s) over {document.get('iterations', 0)} iteration(s) | exit "
                   f"{document['exit_code']}" + (" | stopped at the first mismatch (--fail-fast)"
                                                 if document.get("stopped_early") else ""),
                   class_="verdict", id="verdict")


def summary_section(document: Mapping[str, Any]) -> Markup:
    rows = []
    for pair in document.get("pairs", ()):
        divergence = pair.get("first_divergence")
        where = divergence_label(divergence)
        passed = bool(pair["iterations"]) and pair["iterations_passed"] == pair["iterations"]
        rows.append(Row([pair_title(pair), verdict_cell(passed),
                         Cell(f"{pair['iterations_passed']}/{pair['iterations']} "
                              f"({100 * float(pair.get('pass_rate') or 0):.0f}%)", pair["iterations_passed"], "num"),
                         Cell(f"{pair['outputs_passed']}/{pair['outputs']}", pair["outputs_passed"], "num"),
                         num(pair.get("elements")), num(pair.get("worst_abs")), num(pair.get("worst_rel")),
                         num(pair.get("worst_rel_beyond_atol")), failing_iterations(pair),
                         Cell(where, class_="name")], None if passed else "failed"))
    parts: list[Content] = [table(["pair (backend vs reference)", "verdict", "iterations passed", "outputs passed",
                                   "elements", "worst abs", "worst rel", REL_BEYOND_ATOL, "failing iterations",
                                   "first divergence"], rows, row_class="pair-row")]
    if not rows:
        parts.append(element("p", "Nothing was compared.", class_="note"))
    elif any(pair.get("worst_rel_beyond_atol") not in (None, pair.get("worst_rel"))
             for pair in document.get("pairs", ())):
        parts.append(element("p", f"“{REL_BEYOND_ATOL}”: the relative error over the elements whose reference "
                                  "exceeds atol in magnitude. Against a reference at or near 0 the relative error "
                                  "explodes (an exact 0 divides by 2.2e-16) while atol passes the element; "
                                  "“worst rel” includes those.", class_="muted"))
    blind = [element("li", f"{pair['backend']} vs {pair['reference']}: {item['output']} cannot fail at these "
                           f"tolerances: every reference value is below atol {fmt(item['atol'])} (largest |reference| "
                           f"{fmt(item['reference_max'])}), so even an output of zeros would pass; "
                           f"--atol {item['output']}:0 lets rtol decide")
             for pair in document.get("pairs", ()) for item in pair.get("cannot_fail") or ()]
    blind += [element("li", all_empty_line(pair["backend"], pair["reference"])) for pair in document.get("pairs", ())
              if pair.get("outputs") and not pair.get("elements")]
    if blind:
        parts.append(element("ul", blind, class_="note cannot-fail"))
    timing = [b for b in document.get("backends", ()) if b.get("kind") == "live"]
    if timing:
        parts.append(table(["backend", "framework", "load s", "mean infer s", "inferences", "status"], [
            Row([b["name"], b.get("framework") or "–", num(b.get("load_seconds")),
                 num((b.get("infer_seconds") or {}).get("mean")), num((b.get("infer_seconds") or {}).get("count")),
                 _status(b)], "failed" if b.get("failure") else None) for b in timing]))
    return section("Summary", *parts, id_="summary")


def failing_iterations(pair: Mapping[str, Any]) -> Cell:
    """ "1 of 1 (iteration 0)", "3 of 50 (iterations 2, 7, 9)", "none": the count first, so that an iteration
    number does not read as a count."""
    failed = int(pair["iterations"]) - int(pair["iterations_passed"])
    listed = pair.get("failing_iterations") or []
    if not failed:
        return Cell("none", 0, "num")
    numbers = ", ".join(map(str, listed[:20])) + (" …" if failed > min(len(listed), 20) else "")
    return Cell(f"{failed} of {pair['iterations']} (iteration{'s' if failed > 1 else ''} {numbers})", failed)


def _status(backend: Mapping[str, Any]) -> Cell:
    failure = backend.get("failure")
    if not failure:
        return Cell("ok", class_="pass")
    return Cell(f"FAILED during {failure.get('phase')}", class_="fail")


def failures_section(document: Mapping[str, Any]) -> Markup | None:
    parts = []
    for backend in document.get("backends", ()):
        failure = backend.get("failure")
        if not failure:
            continue
        facts = [("phase", failure.get("phase")), ("kind", failure.get("kind")), ("message", failure.get("message"))]
        if failure.get("signal"):
            facts.append(("signal", failure["signal"]))
        if failure.get("exit_code") is not None:
            facts.append(("exit code", failure["exit_code"]))
        if failure.get("seconds") is not None:
            facts.append(("timeout", f"{fmt(failure['seconds'])} s"))
        parts.append(element("div", element("h3", backend["name"]), key_values(facts),
                             element("p", "last lines of its stderr:", class_="muted") if failure.get("stderr_tail")
                             else None,
                             element("pre", failure["stderr_tail"]) if failure.get("stderr_tail") else None,
                             details("traceback in the worker", element("pre", failure["remote_traceback"]))
                             if failure.get("remote_traceback") else None, class_="failure"))
    if not parts:
        return None
    return section("Backend failures", element("p", "The other backends were still compared.", class_="muted"),
                   *parts, id_="failures")


def warnings_section(document: Mapping[str, Any]) -> Markup | None:
    items = [element("li", warning) for warning in document.get("warnings", ())]
    items += [element("li", f"{f['backend']} output ", element("code", f["output"]),
                      f" has {f['nan_count']} NaN and {f['inf_count']} Inf; the first at index "
                      f"{tuple(f['first_index'])} (--validate)") for f in document.get("non_finite", ())]
    if not items:
        return None
    return section("Warnings", element("ul", items), id_="warnings")


def run_section(document: Mapping[str, Any]) -> Markup:
    outputs = document.get("model_outputs") or []
    facts: list[tuple[str, Content]] = [
        ("cmpx version", document.get("cmpx_version")), ("model", element("code", document.get("model") or "–")),
        ("model outputs", ", ".join(outputs) if len(outputs) <= 30 else f"{len(outputs)} outputs"),
        ("iterations", document.get("iterations")), ("seed", document.get("seed")),
    ]
    if document.get("tensors"):
        facts.append(("compared tensors", f"{len(document['tensors'])} (marked and outputs)"))
    options = document.get("options") or {}
    backends = []
    for b in document.get("backends", ()):
        if b.get("kind") == "saved":
            backends.append([b["name"], "saved", "–", "–", Cell(b.get("path"), class_="name"), "–"])
        else:
            given = ", ".join(f"{k}={_option_text(v)}" for k, v in (b.get("options") or {}).items()
                              if v not in (None, False, (), []))
            backends.append([b["name"], "live", b.get("backend"), b.get("framework") or "–", given or "–",
                             b.get("transform") or "–"])
    return section("Run", key_values(facts),
                   element("h3", "Backends"),
                   table(["name", "kind", "backend", "framework", "options / path", "transform"], backends,
                         sortable=False),
                   element("h3", "Options"),
                   key_values([(flag, element("code", _option_text(v))) for flag, v in _option_flags(options)])
                   if options else
                   element("p", "defaults only", class_="muted"), id_="run")


def _option_flags(options: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The JSON report's options (by RunRequest field) under the flags that give them; thresholds by metric."""
    from cmpx.options.table import BY_NAME, threshold_flag

    flags = [(BY_NAME[k].flag if k in BY_NAME else k, v) for k, v in options.items() if k != "thresholds"]
    return flags + [(threshold_flag(metric), v) for metric, v in (options.get("thresholds") or {}).items()]


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return " ".join(_option_text(v) for v in value)
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_option_text(v)}" for k, v in value.items())
    return str(value)
