"""Seeing a sweep: summary.html in a real browser (headless Chromium, skipped saying why where it is missing),
``cmpx sweep diff OLD NEW``, junit.xml and summary.md for CI, and {model} paths whose folders do not exist yet.

Two real local sweeps of the tiny zoo (tests/sweep_zoo.py) are shared by the module: OLD, the zoo's two runs over
three models (conv and matmul mismatch in fp16), and NEW, two models with the reference run at zero tolerance
(conv's tiny error is now a mismatch: a new failure) and the fp16 run loosened (conv passes: fixed)."""

import dataclasses
import json
import math
import re
import xml.etree.ElementTree as ET
from urllib.parse import unquote

import pytest

from browser import Dom, dump_dom
from cmpx.sweep.diff import compare
from cmpx.sweep.summary import SweepSummary
from cmpx.sweep.tables import classnames
from conftest import run_cmpx
from sweep_zoo import VERDICTS, summary, verdicts, write_zoo

NEW_RUNS = """
[defaults]
args = ["--iterations", "1"]

[[runs]]
name = "ref"
args = "--backend onnxrt --backend onnxref --atol 0 --rtol 0"

[[runs]]
name = "fp16"
args = "--backend onnxrt:fp16 --backend onnxrt --mark-all --atol 1e-2 --rtol 1e-1"
"""


# One test process runs this module: its sweeps are run once per test process.
pytestmark = pytest.mark.xdist_group("sweep-view")

@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweeps")
    (root / "old").mkdir()
    (root / "new").mkdir()
    old = run_cmpx("sweep", write_zoo(root / "old"), "--out", root / "OLD", "--jobs", "2")
    assert old.returncode == 1, old.stdout + old.stderr
    new = run_cmpx("sweep", write_zoo(root / "new", NEW_RUNS, names=("conv", "gather")), "--out", root / "NEW",
                   "--jobs", "2")
    assert new.returncode == 1, new.stdout + new.stderr
    assert verdicts(root / "OLD") == VERDICTS and "summary.html" in old.stdout
    return root


@pytest.fixture
def chromium(headless_chromium):
    if headless_chromium is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return headless_chromium


def _grid(dom):
    """The grid's rows as (model, [(verdict, classes, href, text)...]), in the page's order."""
    rows = []
    for tr in dom.find(id_="grid").find("tbody").find_all("tr"):
        cells = tr.find_all("td")
        rows.append((cells[0].text, [(c.find("a").text, c.classes, c.find("a").attrs.get("href"), c.text)
                                     for c in cells[1:]]))
    return rows


def test_the_overview_in_a_browser_shows_each_cell_failures_first_and_links_each_cells_page(sweeps, chromium):
    out = sweeps / "OLD"
    dom = dump_dom(chromium, out / "summary.html")
    assert dom.find(id_="verdict").text.startswith("6 cells (3 model(s) x 2 run(s)): 4 passed, 2 mismatch | exit 1")
    grid = dom.find(id_="grid")
    assert grid.attrs.get("data-sortable") == "ready" and [b.text for b in grid.find_all("button")] == [
        "model", "ref", "fp16"]  # the page's script ran: each header sorts
    rows = _grid(dom)
    assert [model for model, _ in rows] == ["zoo/matmul.onnx", "zoo/conv.onnx", "zoo/gather.onnx"]  # failures
    # first, the largest relative error (matmul's 0.24 against conv's 0.13) before
    document = {(c["model"], c["run"]): c for c in summary(out)["cells"]}
    for model, cells in rows:
        for run, (word, classes, href, text) in zip(("ref", "fp16"), cells):
            cell = document[(model, run)]
            assert word == cell["verdict"] and {"passed": "v-pass", "mismatch": "v-mismatch"}[word] in classes
            assert f"rel {cell['worst_rel']:.3g}" in text
            page = out / unquote(href)  # a relative link to the cell's own page, which a browser renders
            assert page.resolve() == (out / cell["report"]).parent.resolve() / "report.html"
    conv = dict(zip(("ref", "fp16"), dict(rows)["zoo/conv.onnx"]))
    assert conv["fp16"][3].endswith("conv0 (Conv)")  # where the error first enters
    cell_page = dump_dom(chromium, out / unquote(conv["fp16"][2]))
    assert cell_page.find(id_="verdict").text.startswith("FAILED (mismatch)")
    problems = dom.find(id_="problems-table").find("tbody").find_all("tr")
    assert [(r.find_all("td")[0].text, r.find_all("td")[1].text) for r in problems] == [
        ("zoo/matmul.onnx", "fp16"), ("zoo/conv.onnx", "fp16")]
    assert "node conv0 (Conv)" in problems[1].find_all("td")[5].text


@pytest.mark.parametrize("clicks, order", [
    (["model"], ["zoo/conv.onnx", "zoo/gather.onnx", "zoo/matmul.onnx"]),
    (["fp16"], ["zoo/matmul.onnx", "zoo/conv.onnx", "zoo/gather.onnx"]),  # gravest, then the largest error first
    (["fp16", "fp16"], ["zoo/gather.onnx", "zoo/conv.onnx", "zoo/matmul.onnx"])])
def test_a_click_on_a_header_of_the_overview_sorts_by_it(sweeps, chromium, tmp_path, clicks, order):
    """The page with clicks on its headers: a copy with a script of the test's that clicks, and the policy that would
    block that script taken out."""
    source = (sweeps / "OLD" / "summary.html").read_text()
    source = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", source)
    columns = ["model", "ref", "fp16"]
    script = "".join(f'document.querySelectorAll("#grid thead th button")[{columns.index(c)}].click();'
                     for c in clicks)
    clicked = tmp_path / "clicked.html"
    clicked.write_text(source.replace("</body>", f"<script>{script}</script></body>"))
    assert [model for model, _ in _grid(dump_dom(chromium, clicked))] == order


def test_the_overview_reads_without_javascript_and_escapes_names(sweeps, tmp_path):
    """Without a browser: the page's own source parsed (no script run), and a hostile model name is text."""
    source = (sweeps / "OLD" / "summary.html").read_text()
    dom = Dom(source)
    assert not dom.find_all("button") and [m for m, _ in _grid(dom)][0] == "zoo/matmul.onnx"
    policy = next(m for m in dom.find_all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy")
    assert policy.attrs["content"].startswith("default-src 'none'")  # self-contained: the page may load nothing
    from cmpx.sweep.overview import Links, render_overview

    document = summary(sweeps / "OLD")
    document["cells"][0]["model"] = document["models"][0] = "<script>alert(1)</script>.onnx"
    page = render_overview(SweepSummary.from_document(document), Links(str(sweeps / "OLD"), str(tmp_path)))
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;.onnx" in page
    assert 'href="../' in page  # links relative to where the page is written


def test_sweep_diff_says_what_got_worse_and_exits_1(sweeps, tmp_path):
    old, new = sweeps / "OLD", sweeps / "NEW"
    text = run_cmpx("sweep", "diff", old, new)
    assert text.returncode == 1, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    assert "4 cell(s) in both | 1 new failure, 1 fixed, 2 only in OLD | worse: exit 1" in lines[0]
    assert lines[1:3] == ["new failure (1):", lines[2]] and lines[2].startswith("  zoo/conv.onnx | ref: passed (abs")
    assert lines[2].endswith("[args changed]")  # NEW's ref run has --atol 0 --rtol 0: not the backends' doing
    assert "fixed (1):" in lines and any(l.startswith("  zoo/conv.onnx | fp16: mismatch (abs") for l in lines)
    as_json = run_cmpx("sweep", "diff", old, new, "--json", "--html", tmp_path / "diff.html")
    assert as_json.returncode == 1
    document = json.loads(as_json.stdout)
    assert document["worse"] and document["counts"] == {"new failure": 1, "fixed": 1, "only in OLD": 2}
    assert [(c["model"], c["run"], c["kind"], c["worse"]) for c in document["changes"]] == [
        ("zoo/conv.onnx", "ref", "new failure", True), ("zoo/conv.onnx", "fp16", "fixed", False),
        ("zoo/matmul.onnx", "ref", "only in OLD", False), ("zoo/matmul.onnx", "fp16", "only in OLD", False)]
    assert document["changes"][0]["inputs_changed"] == ["args"] and document["changes"][2]["inputs_changed"] == []
    page = Dom((tmp_path / "diff.html").read_text())
    assert "1 new failure, 1 fixed, 2 only in OLD; something got worse" in page.find(id_="changes-verdict").text
    first = page.find(id_="changes-table").find("tbody").find("tr")
    assert "failed" in first.classes and first.find_all("td")[2].text == "new failure"
    link = first.find("a").attrs["href"]  # relative to the page, into NEW
    assert (tmp_path / unquote(link)).resolve() == (new / "cells" / "zoo__conv.onnx--ref" / "report.html").resolve()

    same = run_cmpx("sweep", "diff", new, new)  # nothing changed: exit 0
    assert same.returncode == 0 and "no change | nothing worse: exit 0" in same.stdout
    fixed_only = run_cmpx("sweep", "diff", new, old)  # conv's ref passes again: fixed; matmul only in NEW
    assert fixed_only.returncode == 1 and "1 new failure, 1 fixed, 2 only in NEW" in fixed_only.stdout


@pytest.mark.parametrize("make, problem", [
    (lambda p: None, "NEW {}: not a directory; give a directory that 'cmpx sweep FILE --out DIR' wrote"),
    (lambda p: p.mkdir(), "NEW {}: no summary.json, so not a cmpx sweep's results"),
    (lambda p: (p.mkdir(), (p / "summary.json").write_text('{"format": "cmpx-report"}')),
     "NEW {}/summary.json: not a cmpx sweep summary; give a directory")])
def test_sweep_diff_of_what_is_not_a_sweeps_results_is_exit_2_naming_the_fix(sweeps, tmp_path, make, problem):
    bad = tmp_path / "bad"
    make(bad)
    result = run_cmpx("sweep", "diff", sweeps / "OLD", bad)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"Error: {problem.format(bad)}") and len(result.stderr.splitlines()) == 1


def test_an_error_that_grew_by_more_than_the_factor_is_worse(sweeps):
    """The worst error of a cell whose verdict stayed: grown more than --factor is worse, shrunk is better, NaN is
    the largest error; the cells are the real sweep's, with their errors scaled."""
    old = SweepSummary.from_document(summary(sweeps / "OLD"))

    def scaled(by: float) -> SweepSummary:
        cells = [dataclasses.replace(e, run_summary=dataclasses.replace(e.run_summary, pairs=tuple(
            dataclasses.replace(p, worst_abs=p.worst_abs * by, worst_rel=p.worst_rel * by)
            for p in e.run_summary.pairs))) for e in old.cells]
        return dataclasses.replace(old, cells=cells)

    grown = compare(old, scaled(3.0), "a", "b", factor=2.0)
    mismatching = {(e.model, e.run) for e in old.cells if e.verdict == "mismatch" or e.worst_abs}
    assert grown.worse and {(c.cell.model, c.cell.run) for c in grown.changes} == mismatching
    assert {c.kind for c in grown.changes} == {"error grew"}
    assert not compare(old, scaled(1.5), "a", "b", factor=2.0).changes  # within the factor
    assert compare(old, scaled(1.5), "a", "b", factor=1.2).worse
    shrunk = compare(old, scaled(0.1), "a", "b")
    assert not shrunk.worse and {c.kind for c in shrunk.changes} == {"error shrank"}
    assert {c.kind for c in compare(old, scaled(math.nan), "a", "b").changes} == {"error grew"}
    assert not compare(scaled(math.nan), scaled(math.nan), "a", "b").changes

    def exit_codes(codes: dict) -> SweepSummary:
        return dataclasses.replace(old, cells=[dataclasses.replace(e, exit_code=codes.get(e.exit_code, e.exit_code))
                                               for e in old.cells])

    failed = compare(old, exit_codes({1: 3}), "a", "b")  # mismatch -> backend failed: graver
    assert failed.worse and {c.kind for c in failed.changes} == {"verdict changed"}
    recovered = compare(exit_codes({1: 3}), old, "a", "b")  # backend failed -> mismatch: a verdict again
    assert not recovered.worse and {c.kind for c in recovered.changes} == {"verdict changed"}
    lost = compare(old, exit_codes({0: None, 1: None}), "a", "b")  # interrupted before any cell ran
    assert lost.worse and {c.kind for c in lost.changes} == {"no result"} and len(lost.changes) == 6


def test_junit_and_summary_md_for_ci(sweeps):
    out = sweeps / "OLD"
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    cases = {(c.get("file"), c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == set(VERDICTS)
    assert {c.get("classname") for c in cases.values()} == {"zoo.conv", "zoo.gather", "zoo.matmul"}
    failing = cases[("zoo/conv.onnx", "fp16")]
    assert "first divergence: node conv0 (Conv), tensor conv, iteration 0" in failing.find("failure").text
    log = (out / "cells" / "zoo__conv.onnx--fp16" / "log.txt").read_text().splitlines()
    assert failing.find("system-out").text.endswith("\n".join(log[-20:]))  # the tail of the cell's log
    assert cases[("zoo/gather.onnx", "fp16")].find("system-out") is None  # a passing case has none
    table = (out / "summary.md").read_text()
    assert "- zoo/conv.onnx / fp16: onnxrt:fp16 vs onnxrt: " in table
    assert "; first divergence: node conv0 (Conv), tensor conv, iteration 0 (onnxrt:fp16 vs onnxrt)" in table


def test_junit_classnames_split_only_at_folders():
    assert classnames(["bert.onnx", "zoo/resnet50-v1.5.onnx", "a/b.onnx", "a/b.pb"]) == {
        "bert.onnx": "bert", "zoo/resnet50-v1.5.onnx": "zoo.resnet50-v1_5", "a/b.onnx": "a.b_onnx",
        "a/b.pb": "a.b_pb"}


def test_model_paths_whose_folders_do_not_exist_yet_are_made_by_each_cell(tmp_path, run_cli):
    """Issue #31 item 11: every cell failed, naming the internal placeholder for {model}."""
    runs = """
[[runs]]
name = "keep"
args = "--backend onnxrt --iterations 1 --save-outputs saved/{model}/o.json --report-html pages/{run}/{model}.html"
"""
    out = tmp_path / "out"
    result = run_cli("sweep", write_zoo(tmp_path, runs, names=("conv", "gather")), "--out", out)
    assert result.exit_code == 0, result.output
    for name in ("conv", "gather"):
        assert json.loads((tmp_path / "saved" / "zoo" / name / "o.json").read_text())
        assert "cmpx report" in (tmp_path / "pages" / "keep" / "zoo" / f"{name}.html").read_text()
    shared = runs.replace("pages/{run}/{model}.html", "pages/all.html")
    refused = run_cli("sweep", write_zoo(tmp_path, shared, names=("conv", "gather")), "--out", out)
    assert refused.exit_code == 2 and "--report-html pages/all.html would be written by the cell of every model; " \
        "put {model} in the path" in refused.output
