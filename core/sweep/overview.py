"""``summary.html``: a sweep at a glance, one self-contained page (cmpx.reports.html_page). Models as rows and runs
as columns, each cell coloured by its verdict with its worst errors and first divergence and linking the cell's
own page (cells/KEY/report.html); the models with a cell that did not pass come first, and a click on a run's
header sorts by it (gravest and largest error first). Then the cells that did not pass, one row each; and, for
``cmpx sweep diff --html``, what changed since another sweep (cmpx.sweep.diff) before all of it.

Links are relative to the page, so the results directory can be moved or archived whole."""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Sequence
from urllib.parse import quote

from cmpx._version import __version__
from cmpx.outputs import write_whole
from cmpx.reports.html_page import Cell, Content, Markup, Row, element, render_page, section, table
from cmpx.sweep.diff import SweepDiff
from cmpx.sweep.store import PAGE as CELL_PAGE
from cmpx.sweep.summary import CLEAN, NOT_COMPARED, NOT_RUN, CellEntry, SweepSummary
from cmpx.sweep.tables import detail, divergence, error_number

SUMMARY_PAGE = "summary.html"
RANKS = {"internal error": 0, "usage error": 0, "backend failed": 0, "infrastructure failure": 0, "interrupted": 0,
         "mismatch": 1, NOT_RUN: 2, NOT_COMPARED: 3, "passed": 3}  # the order of the grid: gravest first
STYLES = {"passed": "v-pass", "mismatch": "v-mismatch", NOT_RUN: "v-none", NOT_COMPARED: "v-none"}  # else v-error


def severity(entry: CellEntry) -> float:
    """A cell's sort key: its verdict's rank, then the larger its worst relative error the smaller (NaN least)."""
    rel = entry.worst_rel if entry.worst_rel is not None else entry.worst_abs
    share = 0.0 if rel is None else 1.0 if math.isnan(rel) or rel == math.inf else rel / (1.0 + abs(rel))
    return RANKS.get(entry.verdict, 0) + 0.999 * (1.0 - share)


class Links:
    """Where the page finds the cells' files: paths relative to the page's directory, as URLs."""

    def __init__(self, out: str, page_dir: str):
        self.out = out
        prefix = os.path.relpath(out, page_dir).replace(os.sep, "/")
        self.prefix = "" if prefix == "." else prefix + "/"

    def href(self, relative: str | None) -> str | None:
        """``relative`` (to the results directory, as summary.json has it) from the page."""
        return None if relative is None else quote(self.prefix + relative)

    def page(self, entry: CellEntry) -> str | None:
        """The cell's HTML page, where it has one."""
        folder = os.path.dirname(entry.log or "")
        if not folder or not os.path.isfile(os.path.join(self.out, folder, CELL_PAGE)):
            return None  # a cell of an older cmpx, or whose page could not be made
        return self.href(f"{folder}/{CELL_PAGE}")


def render_overview(summary: SweepSummary, links: Links, changes: SweepDiff | None = None,
                    generated: datetime.datetime | None = None) -> str:
    generated = generated or datetime.datetime.now().astimezone()
    name = os.path.basename(summary.sweep_file)
    counts = ", ".join(f"{n} {verdict}" for verdict, n in summary.counts.items())
    head = element("p", f"{len(summary.cells)} cells ({len(summary.models)} model(s) x {len(summary.runs)} run(s)): "
                        f"{counts} | exit {int(summary.exit_code)}{' (interrupted)' if summary.interrupted else ''} "
                        f"| {summary.seconds:.1f} s | executor {summary.executor}", id="verdict", class_="verdict")
    body: list[Content] = [element("h1", "cmpx sweep: ", element("code", name)), head]
    navigation = {}
    if changes is not None:
        navigation["changes"] = "Changes"
        body.append(changes_section(changes, links))
    navigation["grid"] = "Models x runs"
    body.append(grid_section(summary, links))
    problems = problems_section(summary, links)
    if problems is not None:
        navigation["problems"] = "Not passed"
        body.append(problems)
    footer = element("span", f"cmpx {__version__}, {summary.sweep_file}, written "
                             f"{generated.strftime('%Y-%m-%d %H:%M:%S %Z').strip()}")
    return render_page(f"cmpx sweep: {counts} | {name}", body, navigation=navigation, footer=footer)


def grid_section(summary: SweepSummary, links: Links) -> Markup:
    entries = {(e.model, e.run): e for e in summary.cells}
    rows = []
    for model in summary.models:
        mine = [entries.get((model, run)) or CellEntry(model, run) for run in summary.runs]
        rows.append((min(severity(e) for e in mine), model, Row(
            [Cell(element("code", model), sort=model, class_="name"), *(_grid_cell(e, links) for e in mine)])))
    rows.sort(key=lambda row: (row[0], row[1]))
    note = element("p", "Each cell: its verdict (a link to the cell's report), the worst absolute and relative "
                        "errors of its pairs, and the node where the error first enters. Models with a cell that "
                        "did not pass first; click a header to sort by that run.", class_="muted")
    return section("Models x runs", note, table(["model", *summary.runs], [row for _, _, row in rows],
                                                 id_="grid", class_="grid"), id_="grid-section")


def _grid_cell(entry: CellEntry, links: Links) -> Cell:
    word = element("a", entry.verdict, href=links.page(entry) or links.href(entry.report or entry.log))
    errors = (element("span", f"abs {error_number(entry.worst_abs)} rel {error_number(entry.worst_rel)}",
                      class_="errors") if entry.worst_abs is not None else None)
    found = entry.first_divergence
    node = element("span", found[1].node + (f" ({found[1].op_type})" if found[1].op_type else ""),
                   class_="where") if found and found[1].node else None
    return Cell([element("strong", word), errors, node], sort=severity(entry),
                class_="cell " + STYLES.get(entry.verdict, "v-error"),
                title=None if entry.verdict in (*CLEAN, NOT_RUN) else detail(entry))


def problems_section(summary: SweepSummary, links: Links) -> Markup | None:
    problems = sorted((e for e in summary.cells if e.verdict not in (*CLEAN, NOT_RUN)), key=severity)
    if not problems:
        return None
    rows = [Row([Cell(element("code", e.model), sort=e.model, class_="name"), e.run,
                 Cell(e.verdict, sort=severity(e), class_="fail"), *_errors(e), divergence(e) or "", detail(e),
                 _files(e, links)]) for e in problems]
    return section(f"Not passed ({len(problems)})", table(
        ["model", "run", "verdict", "worst abs", "worst rel", "first divergence", "what", "files"], rows,
        id_="problems-table"), id_="problems")


def changes_section(changes: SweepDiff, links: Links) -> Markup:
    """What changed since the other sweep (cmpx sweep diff --html): the worse first."""
    counts = ", ".join(f"{n} {kind}" for kind, n in changes.counts().items()) or "no change"
    head = element("p", f"From {changes.old_dir} to {changes.new_dir}: {changes.compared} cell(s) in both; {counts}; "
                        f"{'something got worse' if changes.worse else 'nothing got worse'} (error factor "
                        f"{changes.factor:g}).", id="changes-verdict")
    rows = [Row([Cell(element("code", c.cell.model), class_="name"), c.cell.run,
                 Cell(c.kind.replace("OLD", "the old sweep").replace("NEW", "the new sweep"),
                      class_="fail" if c.worse else None), c.describe(),
                 _files(c.new, links) if c.new is not None else ""], class_="failed" if c.worse else None)
            for c in changes.changes]
    return section("Changes", head, table(["model", "run", "change", "old -> new", "files"], rows,
                                          id_="changes-table") if rows else None, id_="changes")


def _errors(entry: CellEntry) -> Sequence[Cell]:
    return [Cell(error_number(v) if v is not None else "", sort=v if v is not None else -1.0, class_="num")
            for v in (entry.worst_abs, entry.worst_rel)]


def _files(entry: CellEntry, links: Links) -> Markup:
    found = [(label, href) for label, href in (("page", links.page(entry)), ("json", links.href(entry.report)),
                                               ("log", links.href(entry.log))) if href]
    return Markup(" ".join(element("a", label, href=href) for label, href in found))


def write_overview(out: str, summary: SweepSummary) -> None:
    write_whole("--out", os.path.join(out, SUMMARY_PAGE), render_overview(summary, Links(out, out)))
