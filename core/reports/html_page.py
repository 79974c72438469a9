"""Building blocks of cmpx's HTML pages (the --report-html report; any page of several reports, such as a sweep's
summary, is made from the same parts): escaping, elements, tables that sort with JavaScript and read as plain
tables without it, images inline as data URIs, and ``render_page``, which makes one self-contained document.

Everything is text until it is made ``Markup`` by these functions: any ``str`` they are given is escaped, so a
tensor named ``<script>`` shows as text. The page carries its style and script inline, and a Content Security
Policy that allows nothing else: no request leaves the page when it is opened (images are data: URIs), and no
script but the page's own (by its hash) can run.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union


class Markup(str):
    """HTML made by this module (or by a caller who escaped what it holds): inserted as is."""


Content = Union[Markup, str, int, float, None, Iterable[Any]]


def escape(content: Content) -> Markup:
    """``content`` as HTML: Markup as is, None as nothing, an iterable joined, anything else as escaped text."""
    if isinstance(content, Markup):
        return content
    if content is None:
        return Markup("")
    if isinstance(content, (str, int, float)):
        return Markup(html.escape(str(content), quote=True))
    return Markup("".join(escape(part) for part in content))


def element(tag: str, *content: Content, **attributes: Any) -> Markup:
    """``<tag attributes>content</tag>``; attribute names take ``_`` for ``-`` (``data_sort``), a trailing ``_``
    is dropped (``class_``); False and None attributes are left out, True ones written bare."""
    parts = [tag]
    for name, value in attributes.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{escape(str(value))}"')
    return Markup(f"<{' '.join(parts)}>{escape(content)}</{tag}>")


def void(tag: str, **attributes: Any) -> Markup:
    """An element without content (``img``, ``meta``)."""
    return Markup(element(tag, **attributes)[: -len(f"</{tag}>")])


@dataclass(frozen=True)
class Cell:
    """A table cell: ``content`` shown, ``sort`` the key the table sorts by (a number sorts as a number),
    ``class_`` a style (``num``, ``pass``, ``fail``), ``title`` a tooltip."""

    content: Content
    sort: str | float | int | None = None
    class_: str | None = None
    title: str | None = None


@dataclass(frozen=True)
class Row:
    """A table row with a style of its own (``table`` also takes plain sequences of cells)."""

    cells: Iterable[Any]
    class_: str | None = None


def table(headers: Iterable[str], rows: Iterable[Iterable[Any] | Row], *, sortable: bool = True,
          row_class: str | None = None, caption: Content = None, id_: str | None = None,
          class_: str | None = None) -> Markup:
    """A table with a header row; cells are ``Cell``s or plain content. ``sortable`` tables sort by a column
    when its header is clicked (JavaScript); without JavaScript they are the same table, unsorted."""
    head = element("thead", element("tr", [element("th", h, scope="col") for h in headers]))
    body = []
    for row in rows:
        style = row_class
        if isinstance(row, Row):
            row_cells, style = row.cells, " ".join(filter(None, (row_class, row.class_)))
        else:
            row_cells = row
        cells = []
        for cell in row_cells:
            if not isinstance(cell, Cell):
                cell = Cell(cell, class_="num" if isinstance(cell, (int, float)) and not isinstance(cell, bool)
                            else None)
            cells.append(element("td", cell.content, class_=cell.class_, title=cell.title,
                                 data_sort=None if cell.sort is None else _sort_key(cell.sort)))
        body.append(element("tr", cells, class_=style or None))
    classes = " ".join(filter(None, ("sortable" if sortable else None, class_)))
    return element("table", element("caption", caption) if caption is not None else None, head,
                   element("tbody", body), class_=classes or None, id=id_)


def _sort_key(value: str | float | int) -> str:
    if isinstance(value, float):
        return "Infinity" if value != value else repr(value)  # NaN sorts last, as the largest error
    return str(value)


def key_values(pairs: Iterable[tuple[str, Content]]) -> Markup:
    """A two-column table of names and values."""
    return element("table", element("tbody", [element("tr", element("th", k, scope="row"), element("td", v))
                                              for k, v in pairs]), class_="keys")


def image(png: bytes, alt: str, caption: Content = None, id_: str | None = None, *,
          panels: Sequence[bytes] = ()) -> Markup:
    """A PNG inline as a data: URI, in a figure with its caption. With ``panels`` (the figure cut into its
    side-by-side panels) those are shown instead, side by side where the page is wide enough and one under the
    other where it is not; a figure without them scrolls sideways on a narrow page instead of shrinking."""
    def img(data: bytes, text: str) -> Markup:
        return void("img", src="data:image/png;base64," + base64.b64encode(data).decode("ascii"), alt=text,
                    loading="lazy")

    shown = (element("div", [img(panel, f"{alt} (panel {i} of {len(panels)})") for i, panel in
                             enumerate(panels, 1)], class_="panels two" if len(panels) == 2 else "panels") if panels
             else img(png, alt))
    return element("figure", shown, element("figcaption", caption) if caption is not None else None, id=id_,
                   class_=None if panels else "wide")


def section(title: Content, *content: Content, id_: str | None = None, level: int = 2) -> Markup:
    return element("section", element(f"h{level}", title), *content, id=id_)


def details(summary: Content, *content: Content, open_: bool = False) -> Markup:
    """A block that can be folded (no JavaScript needed)."""
    return element("details", element("summary", summary), *content, open=open_)


def badge(text: str, passed: bool | None) -> Markup:
    """A verdict: green if passed, red if not, grey if None."""
    return element("span", text, class_="badge " + {True: "pass", False: "fail", None: "none"}[passed])


def render_page(title: str, body: Iterable[Content], *, navigation: Mapping[str, str] | None = None,
                footer: Content = None) -> str:
    """One self-contained HTML document: ``navigation`` maps section ids to the labels of a table of contents."""
    nav = element("nav", element("ul", [element("li", element("a", label, href=f"#{anchor}"))
                                        for anchor, label in navigation.items()])) if navigation else None
    policy = (f"default-src 'none'; img-src data:; style-src '{_digest(STYLE)}'; script-src '{_digest(SCRIPT)}'; "
              "base-uri 'none'; form-action 'none'")
    head = element("head", void("meta", charset="utf-8"),
                   void("meta", http_equiv="Content-Security-Policy", content=policy),
                   void("meta", name="viewport", content="width=device-width, initial-scale=1"),
                   element("title", title), element("style", Markup(STYLE)))
    main = element("main", list(body), element("footer", footer) if footer else None)
    page = element("html", head, element("body", element("div", nav, main, class_="layout"),
                                         element("script", Markup(SCRIPT))), lang="en")
    return "<!DOCTYPE html>\n" + page + "\n"


def _digest(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


STYLE = """
:root { --pass: #1a7f37; --fail: #cf222e; --muted: #57606a; --line: #d0d7de; --head: #f6f8fa; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1f2328;
       margin: 0; } .layout { display: flex; }
nav { position: sticky; top: 0; align-self: flex-start; min-width: 11em; padding: 1.2em 0.8em; font-size: 13px; }
nav ul { list-style: none; padding: 0; margin: 0; } nav li { margin: 0.3em 0; }
nav a { color: var(--muted); text-decoration: none; } nav a:hover { color: #0969da; }
main { padding: 1em 1.6em 2em; max-width: 1500px; min-width: 0; flex: 1; }
h1 { font-size: 1.6em; margin: 0.3em 0; } h2 { font-size: 1.3em; margin-top: 1.8em; border-bottom: 1px solid
  var(--line); padding-bottom: 0.2em; } h3 { font-size: 1.05em; margin-top: 1.4em; }
.verdict { font-size: 1.25em; margin: 0.6em 0 1em; } .muted { color: var(--muted); }
.badge { display: inline-block; padding: 0.1em 0.55em; border-radius: 1em; font-weight: 600; color: white; }
.badge.pass { background: var(--pass); } .badge.fail { background: var(--fail); } .badge.none { background: #6e7781; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
thead th { background: var(--head); position: sticky; top: 0; }
table.keys th { background: var(--head); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.pass { color: var(--pass); font-weight: 600; } td.fail { color: var(--fail); font-weight: 600; }
tr.failed td:first-child { border-left: 3px solid var(--fail); }
td.name { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; overflow-wrap: anywhere;
          min-width: 14em; max-width: 42em; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
pre { background: var(--head); border: 1px solid var(--line); padding: 0.6em; overflow-x: auto; white-space: pre-wrap; }
figure { margin: 0.8em 0 1.4em; } figure img { max-width: 100%; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 12px; margin-top: 0.2em; }
details { margin: 0.4em 0 1em; } summary { cursor: pointer; color: #0969da; }
.note { border-left: 3px solid #bf8700; background: #fff8c5; padding: 0.4em 0.8em; margin: 0.6em 0; }
.failure { border-left: 3px solid var(--fail); padding-left: 0.8em; }
th button { font: inherit; color: inherit; background: none; border: 0; padding: 0; margin: 0; cursor: pointer;
            text-align: left; } th button::after { content: "\\00a0\\2195"; color: var(--muted); }
th[aria-sort="ascending"] button::after { content: "\\00a0\\2191"; }
th[aria-sort="descending"] button::after { content: "\\00a0\\2193"; }
footer { color: var(--muted); font-size: 12px; margin-top: 3em; border-top: 1px solid var(--line); padding-top: 0.5em; }
.panels { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 340px), 1fr));
          border: 1px solid var(--line); background: white; max-width: 1350px; } .panels.two { max-width: 900px; }
.panels img { width: 100%; border: 0; }
pre.command { white-space: pre-wrap; overflow-wrap: anywhere; }
td.cell { min-width: 8em; } td.cell a { color: inherit; } td.cell span { display: block; font-size: 12px; }
td.cell span.where { font-family: ui-monospace, "DejaVu Sans Mono", monospace; overflow-wrap: anywhere; }
td.v-pass { background: #dafbe1; } td.v-mismatch { background: #ffcecb; } td.v-error { background: #ffd8a8; }
td.v-none { background: #eaeef2; color: var(--muted); }
@media (max-width: 1000px) {
  .layout { display: block; } main { padding: 0.6em 0.8em 2em; }
  nav { position: static; padding: 0.6em 0.8em 0; } nav ul { display: flex; flex-wrap: wrap; gap: 0.1em 1.2em; }
  table { display: block; max-width: 100%; overflow-x: auto; } thead th { position: static; }
  td.name { min-width: 9em; }
  figure.wide { overflow-x: auto; } figure.wide img { max-width: none; width: 960px; }
}
@media print { nav { display: none; } thead th { position: static; } }
"""

SCRIPT = """
(function () {
  function key(cell) {
    var raw = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    var number = Number(raw);
    return raw !== "" && !isNaN(number) ? [0, number] : [1, raw.toLowerCase()];
  }
  function compare(a, b) {
    if (a[0] !== b[0]) return a[0] - b[0];
    return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var headers = table.querySelectorAll("thead th");
    headers.forEach(function (th, column) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = th.textContent;
      button.title = "sort by this column";
      th.textContent = "";
      th.appendChild(button);
      button.addEventListener("click", function () {
        var descending = th.getAttribute("aria-sort") === "ascending";
        headers.forEach(function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var order = compare(key(r1.cells[column]), key(r2.cells[column]));
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
    table.setAttribute("data-sortable", "ready");
  });
})();
"""
