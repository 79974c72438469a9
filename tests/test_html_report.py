"""--report-html: one self-contained page, readable without JavaScript, rendered in a real browser (headless
Chromium; the browser tests are skipped, saying why, where it is not installed)."""

import base64
import hashlib
import json
import re
import shlex
import struct
import sys

import pytest

import cmpx
from browser import Dom, dump_dom, screenshot
from cmpx.reports.html_page import SCRIPT, STYLE, Cell, element, render_page, table
from cmpx.testing import models as modelgen

EXAMPLE = "examples/models/conv.onnx"
HOSTILE = ['<script>document.body.setAttribute("data-pwned", "1")</script>',
           '<img src=x onerror="document.body.setAttribute(\'data-pwned\', \'2\')">',
           'q" onmouseover="document.body.setAttribute(\'data-pwned\', \'3\')']


@pytest.fixture
def chromium(headless_chromium):
    if headless_chromium is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; .ci/run installs it)")
    return headless_chromium


@pytest.fixture(scope="module")
def failing_marked_run(cmpx_here, tmp_path_factory):
    """The shipped example on its fp16 graph against fp32, every tensor compared: fails, and the error enters at
    the Conv. Made once for the module's browser tests, which only read it."""
    directory = tmp_path_factory.mktemp("failing_marked_run")
    page, document = directory / "r.html", directory / "r.json"
    result = cmpx_here("run", EXAMPLE, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--mark-all",
                       "--report-html", page, "--report-json", document)
    assert result.returncode == 1 and f"wrote the HTML report to {page}" in result.stdout, result.stdout
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
    assert len(dom.find_all("figure")) == 4  # the divergence (conv), the per-layer profile, Y and Z
    images = dom.find_all("img")
    assert len(images) == 1 + 3 * 3  # the profile whole; each output's three panels apart (a narrow page stacks them)
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
    assert len(plain.find_all("img")) == 10


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


def _cells(row):
    return [td.text for td in row.find_all("td")]


def test_the_next_steps_say_what_the_text_report_says_and_the_command_runs_it_again(chromium, run_cli, tmp_path):
    page, saved = tmp_path / "r.html", tmp_path / "r.json"
    result = run_cli("run", EXAMPLE, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--mark-all", "--local-error",
                     "--report-html", page, "--report-json", saved)
    assert result.exit_code == 1, result.output
    document = json.loads(saved.read_text())
    dom = dump_dom(chromium, page)
    steps = dom.find("section", id_="next")
    [hint] = [line.split("hint: ", 1)[1] for line in result.output.splitlines() if "pass with" in line]
    assert "pass with --atol 0.002 or --rtol 0.02" in hint  # as the text report words it, from the same function
    assert [li.text for li in steps.find("ul", class_="hints").find_all("li")] == [hint]

    lines = result.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Local error of "))
    headline = lines[start].split("): ", 1)[1]
    listed = [line.split()[1] for line in lines[start + 1:] if line.startswith(("  FAILED  ", "  PASSED  "))]
    assert steps.find("p", class_="local-headline").text.startswith(headline)
    rows = steps.find_all("tr", class_="local-row")
    assert [_cells(r)[1] for r in rows] == listed == ["conv", "Y", "Z"]  # ranked as the text report lists them
    assert all(_cells(r)[0] == "FAILED" and "failed" in r.classes for r in rows)

    [pair] = dom.find_all("tr", class_="pair-row")
    assert _cells(pair)[7] == f"{document['pairs'][0]['worst_rel_beyond_atol']:.3g}"
    assert _cells(pair)[8] == "1 of 1 (iteration 0)"  # not a bare 0 beside FAILED

    command = steps.find("pre", class_="command").text
    assert command == document["command"] and command.startswith("cmpx run examples/models/conv.onnx --backend ")
    words = shlex.split(command)
    again = run_cli(*words[1:])  # what the page says runs the same comparison (and writes the same reports)
    assert again.exit_code == 1 and hint in again.output, again.output
    assert json.loads(saved.read_text())["pairs"][0]["worst_abs"] == document["pairs"][0]["worst_abs"]


def test_a_second_independent_fault_shows_in_the_local_error_ranking(chromium, run_cli, models, tmp_path):
    page = tmp_path / "r.html"
    result = run_cli("run", models.two_faults, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all",
                     "--local-error", "-q", "--report-html", page)
    assert result.exit_code == 1, result.output
    rows = dump_dom(chromium, page).find("section", id_="next").find_all("tr", class_="local-row")
    failing = [_cells(r)[3] for r in rows if _cells(r)[0] == "FAILED"]
    assert sorted(failing) == ["BatchNormalization", "Softmax"]  # both faults, failing on their own, listed first
    assert [_cells(r)[0] for r in rows[:2]] == ["FAILED", "FAILED"]


def test_the_page_at_820_px_stacks_what_does_not_fit_and_stays_readable(chromium, failing_marked_run, tmp_path):
    page, _ = failing_marked_run
    probe = """<script>
      var body = document.body, main = document.querySelector("main");
      body.setAttribute("data-viewport", window.innerWidth);
      body.setAttribute("data-page-width", document.documentElement.scrollWidth);
      body.setAttribute("data-main-left", Math.round(main.getBoundingClientRect().left));
      body.setAttribute("data-panels", Array.from(document.querySelectorAll(".panels img"),
                                                  i => Math.round(i.getBoundingClientRect().width)).join(" "));
      body.setAttribute("data-wide", Array.from(document.querySelectorAll("figure.wide img"),
                                                i => Math.round(i.getBoundingClientRect().width)).join(" "));
    </script>"""
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    probed = tmp_path / "probe.html"
    probed.write_text(text.replace("</body>", probe + "</body>"))
    dom = dump_dom(chromium, probed, width=820)
    body = dom.find("body").attrs
    assert int(body["data-viewport"]) == 820
    assert int(body["data-page-width"]) <= 820  # wide tables scroll inside themselves, not the page
    assert int(body["data-main-left"]) < 30  # the navigation goes on top instead of taking a column
    natural = [struct.unpack(">II", base64.b64decode(i.attrs["src"].split(",", 1)[1])[16:24])[0]
               for f in dom.find_all("div", class_="panels") for i in f.find_all("img")]
    shown = [int(w) for w in body["data-panels"].split()]
    assert len(shown) == len(natural) == 9 and all(s >= 0.75 * n for s, n in zip(shown, natural))  # not shrunk
    assert int(body["data-wide"]) >= 960  # the profile keeps a readable size and scrolls sideways
