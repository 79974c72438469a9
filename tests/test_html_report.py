"""--report-html: one self-contained page, readable without JavaScript, rendered in a real browser (headless
Chromium; the browser tests are skipped, saying why, where it is not installed)."""

import base64
import hashlib
import json
import re
import struct
import sys

import pytest

import cmpx
from browser import Dom, dump_dom, find_chromium, screenshot
from cmpx.reports.html_page import SCRIPT, STYLE, Cell, element, render_page, table
from cmpx.testing import models as modelgen

EXAMPLE = "examples/models/conv.onnx"
HOSTILE = ['<script>document.body.setAttribute("data-pwned", "1")</script>',
           '<img src=x onerror="document.body.setAttribute(\'data-pwned\', \'2\')">',
           'q" onmouseover="document.body.setAttribute(\'data-pwned\', \'3\')']


@pytest.fixture
def chromium():
    binary = find_chromium()
    if binary is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return binary


@pytest.fixture
def failing_marked_run(run_cli, tmp_path):
    """The shipped example on its fp16 graph against fp32, every tensor compared: fails, and the error enters at
    the Conv."""
    page, document = tmp_path / "r.html", tmp_path / "r.json"
    result = run_cli("run", EXAMPLE, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--mark-all",
                     "--report-html", page, "--report-json", document)
    assert result.exit_code == 1 and f"wrote the HTML report to {page}" in result.output, result.output
    return page, json.loads(document.read_text())


def _output_names(document):
    return [o["name"] for r in document["results"] for o in r["outputs"]]


def test_the_report_in_a_browser_has_the_verdict_the_divergence_and_a_row_per_output(chromium, failing_marked_run,
                                                                                       tmp_path):
    page, document = failing_marked_run
    dom = dump_dom(chromium, page)
    assert dom.find(id_="verdict").text.startswith("FAILED (mismatch) 1 comparison(s) over 1 iteration(s) | exit 1")
    divergence = dom.find("section", id_="divergence")
    facts = {tr.find("th").text: tr.find("td").text for tr in divergence.find("table").find_all("tr")}
    assert facts == {"tensor": "conv", "node": "conv0", "op type": "Conv", "iteration": "0"}
    rows = dom.find_all("tr", class_="output-row")
    names = [r.find("td").text.removesuffix(" (model output)") for r in rows]
    assert names == ["conv", "Y", "Z"] and sorted(names) == sorted(_output_names(document))  # in graph order
    assert all("failed" in r.classes and r.find_all("td")[1].text == "FAILED" for r in rows)
    images = dom.find_all("img")
    assert len(images) == 4  # the divergence (conv), the per-layer profile, Y and Z
    assert all(i.attrs["src"].startswith("data:image/png;base64,iVBOR") for i in images)
    sortable = dom.find_all("table", class_="sortable")
    assert sortable and all(t.attrs.get("data-sortable") == "ready" and t.find_all("button") for t in sortable)

    without_script = tmp_path / "no-js.html"  # the same page with JavaScript off: its one script taken out
    without_script.write_text(re.sub(r"<script>.*?</script>", "", page.read_text(), flags=re.S))
    plain = dump_dom(chromium, without_script)
    assert not plain.find_all("script") and not plain.find_all("button")
    assert [r.find("td").text for r in plain.find_all("tr", class_="output-row")] == \
        [r.find("td").text for r in rows]
    assert plain.find(id_="verdict").text == dom.find(id_="verdict").text
    assert len(plain.find_all("img")) == 4


def test_a_screenshot_of_the_report(chromium, failing_marked_run, tmp_path):
    import numpy as np
    from PIL import Image

    page, _ = failing_marked_run
    shot = tmp_path / "report.png"
    screenshot(chromium, page, shot, 1280, 1600)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1280, 1600)
    assert len(data) > 60_000  # a page of text, tables and plots; a blank page is a few KB
    top = np.asarray(Image.open(shot).convert("RGB"))[:200]
    badge = int(np.count_nonzero((top == (207, 34, 46)).all(axis=2)))
    assert badge > 500  # the red FAILED badge at the top


def test_sorting_a_column_in_the_browser(chromium, failing_marked_run, tmp_path):
    page, document = failing_marked_run
    errors = {o["name"]: o["metrics"][0]["data"]["abs"]["max"] for r in document["results"]
              for o in r["outputs"]}
    probe = """<script>
      var table = document.querySelector("table.results"), button = table.querySelectorAll("thead button")[3];
      function order() { return Array.from(table.tBodies[0].rows, r => r.cells[0].textContent).join("|"); }
      button.click(); document.body.setAttribute("data-ascending", order());
      button.click(); document.body.setAttribute("data-descending", order());
    </script>"""
    text = page.read_text()  # the page plus a script that clicks "max abs" twice (its policy allows no other)
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text).replace("</body>", probe + "</body>")
    probed = tmp_path / "probe.html"
    probed.write_text(text)
    body = dump_dom(chromium, probed).find("body")
    ascending = sorted(errors, key=errors.get)
    names = lambda attribute: [n.removesuffix(" (model output)") for n in body.attrs[attribute].split("|")]
    assert names("data-ascending") == ascending and names("data-descending") == ascending[::-1]


def test_names_from_the_model_are_text_in_the_browser(chromium, tmp_path):
    model = modelgen.save(modelgen.named_outputs(HOSTILE, intermediate="<b>bold</b>"), tmp_path / "hostile.onnx")
    page = tmp_path / "r.html"
    report = cmpx.run(model, ["onnxrt:fp16", "onnxrt"], mark_all=True, report_html=page)
    assert report.first_divergence.tensor == "<b>bold</b>"
    dom = dump_dom(chromium, page)
    assert "data-pwned" not in dom.find("body").attrs
    assert len(dom.find_all("script")) == 1 and not dom.find_all("b") and not any(
        "onmouseover" in e.attrs or "onerror" in e.attrs for e in dom.find_all())
    assert all(i.attrs["src"].startswith("data:") for i in dom.find_all("img"))
    cells = [r.find("td").text.removesuffix(" (model output)") for r in dom.find_all("tr", class_="output-row")]
    assert sorted(cells) == sorted(HOSTILE + ["<b>bold</b>"])  # every name shown as the text it is
    assert dom.find("section", id_="divergence").find("code").text == "<b>bold</b>"
    assert dom.find("title").text.endswith(str(model))


def test_the_page_is_self_contained_and_allows_nothing_else(tmp_path):
    page = tmp_path / "r.html"
    report = cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], report_html=page)
    text = page.read_text()
    assert report.passed and "PASSED" in Dom(text).find(id_="verdict").text
    links = re.findall(r'\s(?:src|href|action|srcset)="([^"]*)"', text)
    assert links and all(link.startswith(("data:image/png;base64,", "#")) for link in links)
    assert "http://" not in text and "https://" not in text and "@import" not in text
    policies = [m.attrs["content"] for m in Dom(text).find_all("meta") if m.attrs.get("http-equiv")]
    assert len(policies) == 1
    for source in (STYLE, SCRIPT):  # only the page's own style and script, by their hashes
        digest = base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policies[0]
    assert policies[0].startswith("default-src 'none'; img-src data:;")


def test_the_run_header_names_frameworks_options_seed_and_version(tmp_path):
    page = tmp_path / "r.html"
    cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], atol={"Y": 1e-3}, seed=7, report_html=page, compare=["l2"],
             l2_threshold=1, iterations=2)
    run = Dom(page.read_text()).find("section", id_="run")
    facts = {tr.find("th").text: tr.find("td").text for tr in run.find_all("table")[0].find_all("tr")}
    assert facts["cmpx version"] == cmpx.__version__ and facts["seed"] == "7" and facts["model"] == EXAMPLE
    backends = {tr.find_all("td")[0].text: tr.find_all("td")[3].text
                for tr in run.find_all("table")[1].find_all("tr")[1:]}
    import onnx
    import onnxruntime

    assert backends == {"onnxrt": f"onnxruntime {onnxruntime.__version__}", "onnxref": f"onnx {onnx.__version__}"}
    options = {tr.find("th").text: tr.find("td").text for tr in run.find_all("table")[2].find_all("tr")}
    assert options["--atol"] == "Y:0.001" and options["--seed"] == "7"
    assert options["--l2-threshold"] == "1" and options["--iterations"] == "2"  # each option under its own flag


def test_backend_failures_with_their_stderr_and_warnings(run_cli, tmp_path, models):
    page = tmp_path / "r.html"
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty", "--backend",
                     "onnxref", "-p", "cmpx_test_faulty", "--faulty-fault", "infer:segfault", "--report-html", page)
    assert result.exit_code == 3
    dom = Dom(page.read_text())
    assert dom.find(id_="verdict").text.startswith("FAILED (backend failure)")
    failure = dom.find("section", id_="failures")
    facts = {tr.find("th").text: tr.find("td").text for tr in failure.find("table").find_all("tr")}
    assert facts["phase"] == "infer" and facts["signal"] == "SIGSEGV" and facts["kind"] == "crash"
    assert "injecting segfault" in failure.find("pre").text
    assert [r.find("td").text for r in dom.find_all("tr", class_="pair-row")] == ["onnxrt vs onnxref"]


def test_without_matplotlib_the_report_has_no_plots_and_says_so(run_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    page = tmp_path / "r.html"
    result = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--report-html", page)
    assert result.exit_code == 0, result.output
    assert "warning: --report-html: matplotlib is not installed, so the report has no plots" in result.output
    dom = Dom(page.read_text())
    assert not dom.find_all("img") and "has no plots: they need matplotlib" in dom.find("main").text
    assert "matplotlib is not installed" in dom.find("section", id_="warnings").text
    assert len(dom.find_all("tr", class_="output-row")) == 2


@pytest.mark.parametrize("make_path, problem", [
    (lambda tmp: tmp / "missing" / "r.html", ": the directory"), (lambda tmp: tmp, " is a directory; give the path of a file")])
def test_a_report_path_that_cannot_be_written_is_refused_before_any_inference(run_cli, tmp_path, make_path, problem):
    path = make_path(tmp_path)
    result = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--report-html", path)
    assert result.exit_code == 2 and f"--report-html {path}{problem}" in result.output
    assert "loaded" not in result.output


def test_the_building_blocks_escape_every_text():
    hostile = '<script>alert("x")</script>'
    block = table([hostile, "n"], [[Cell(hostile, sort=hostile, title=hostile), 1.5]])
    assert "<script>" not in block and block.count("&lt;script&gt;") == 4  # header, sort key, tooltip, text
    assert element("td", hostile, data_sort='"><b>') == \
        '<td data-sort="&quot;&gt;&lt;b&gt;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;</td>'
    page = render_page(hostile, [element("p", hostile)], navigation={'"x': hostile})
    assert page.count("<script>") == 1 and page.startswith("<!DOCTYPE html>")
