"""--save-error-plots: per-output histograms and error against the reference's magnitude from a bounded sample of
elements, the per-layer error profile of marked runs (with local errors overlaid where a report has them), and
file names that are unique, short and portable."""

import json
import math
import re
import struct
import sys

import numpy as np
import pytest

import cmpx
from cmpx.options.argtypes import PerOutput
from cmpx.comparison.compare import ComparisonSettings, compare_outputs
from cmpx.testing import models as modelgen
from cmpx_comparators.errors import error_stats

pytest.importorskip("matplotlib", reason="the error plots need matplotlib (pip install 'cmpx[plots]')")

EXAMPLE = "examples/models/conv.onnx"
BACKENDS = ("--backend", "onnxrt", "--backend", "onnxref")
NAME = re.compile(r"[A-Za-z0-9.+=@_-]+-[0-9a-f]{8}\.png\Z")


def test_a_plot_per_output_and_iteration(run_cli, tmp_path):
    result = run_cli("run", EXAMPLE, *BACKENDS, "--iterations", "2", "--save-error-plots", tmp_path / "plots")
    assert result.exit_code == 0 and "wrote 4 error plot(s)" in result.output
    files = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert [f[: -len("-12345678.png")] for f in files] == ["0-onnxrt-vs-onnxref-Y", "0-onnxrt-vs-onnxref-Z",
                                                           "1-onnxrt-vs-onnxref-Y", "1-onnxrt-vs-onnxref-Z"]
    assert all(NAME.match(f) for f in files)
    assert (tmp_path / "plots" / files[0]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_file_names_are_unique_short_and_portable(run_cli, tmp_path):
    names = ["a/b", "a_b", "A_B", "ü" * 20 + "x" * 300]  # a/b and a_b, case, a name past any file system's limit
    model = modelgen.save(modelgen.named_outputs(names), tmp_path / "names.onnx")
    result = run_cli("run", model, *BACKENDS, "--save-error-plots", tmp_path / "plots")
    assert result.exit_code == 0, result.output
    files = [p.name for p in (tmp_path / "plots").iterdir()]
    assert len(files) == 4 and len({f.lower() for f in files}) == 4  # distinct even on a case-blind file system
    assert all(NAME.match(f) and len(f) <= 100 for f in files), files


def test_without_matplotlib_the_option_says_how_to_get_it(run_cli, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    result = run_cli("run", EXAMPLE, *BACKENDS, "--save-error-plots", tmp_path / "plots")
    assert result.exit_code == 2
    assert "--save-error-plots needs matplotlib: pip install 'cmpx[plots]'" in result.output


def test_the_sample_holds_the_largest_errors_then_a_uniform_sample():
    rng = np.random.default_rng(3)
    reference = rng.standard_normal(100_000).astype(np.float32)
    actual = reference + rng.standard_normal(100_000).astype(np.float32) * 1e-4
    actual[rng.choice(100_000, 30, replace=False)] += 0.5  # 30 large errors
    plain = error_stats(actual, reference, atol=1e-3, rtol=1e-3)
    sampled = error_stats(actual, reference, atol=1e-3, rtol=1e-3, samples=400)
    assert plain.sample is None
    assert (sampled.abs.max, sampled.rel.quantiles, sampled.mismatches) == (plain.abs.max, plain.rel.quantiles,
                                                                            plain.mismatches)
    sample = sampled.sample
    absdiff = np.abs(actual - reference)
    assert sample.worst == 40 and sample.total == 100_000 and sample.magnitude.size <= 400
    assert np.array_equal(sample.abs[:40], np.sort(absdiff)[::-1][:40].astype(np.float64))  # largest first
    assert np.isin(sample.magnitude, np.abs(reference).astype(np.float64)).all()
    np.testing.assert_allclose(sample.rel, sample.abs / sample.magnitude, rtol=1e-6)
    assert sample.magnitude.size > 380  # the uniform part: 360 drawn, less any already among the largest
    assert sum(count for _, _, count in sample.abs_histogram) == 100_000
    widths = [high / low for low, high, _ in sample.abs_histogram if 0 < low < math.inf]
    assert widths and all(w == 2 for w in widths)  # one bin per power of two

    small = error_stats(actual[:50], reference[:50], atol=1e-3, rtol=1e-3, samples=400).sample
    assert (small.worst, small.magnitude.size) == (0, 50)  # a small output: every element


def test_plain_runs_sample_nothing_and_plotting_runs_keep_no_samples(tmp_path):
    plain = cmpx.run(EXAMPLE, ["onnxrt", "onnxref"])
    assert all(m.sample is None for o in plain.pairs[0].outputs for m in o.metrics)
    plotted = cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], iterations=2, save_error_plots=tmp_path / "plots")
    assert len(list((tmp_path / "plots").iterdir())) == 4
    assert all(o.sample is None for p in plotted.pairs for o in p.outputs)  # drawn, then let go


def _compare(actual, reference, atol, rtol):
    settings = ComparisonSettings([cmpx_metric()], PerOutput(atol), PerOutput(rtol), samples=2000)
    [output] = compare_outputs("a", "b", 0, {"out": actual}, {"out": reference}, settings).outputs
    return output


def cmpx_metric():
    from cmpx_comparators.metrics import ToleranceCheck

    return ToleranceCheck(None)


def test_the_magnitude_plot_draws_the_element_limit_and_the_failing_elements():
    from cmpx.reports.plots import FAIL_COLOUR, output_figure
    from matplotlib.collections import PathCollection
    from matplotlib.colors import to_rgba

    reference = np.array([0.0, 1e-4, 0.01, 0.5, 1.0, 2.0, 10.0, 100.0], np.float32)
    actual = reference + np.array([1e-6, 2e-3, 1e-4, 5e-4, 2e-3, 1.5e-3, 5e-3, 0.5], np.float32)
    output = _compare(actual, reference, atol=1e-3, rtol=1e-3)
    data = output.metrics[0].data
    figure = output_figure("out", data, output.sample)
    histogram, _, magnitude = figure.axes
    assert histogram.get_xscale() == "log" and magnitude.get_xscale() == magnitude.get_yscale() == "log"
    assert any(list(line.get_xdata()) == [1e-3, 1e-3] for line in histogram.get_lines())  # atol drawn
    [limit] = [line for line in magnitude.get_lines() if line.get_label().startswith("limit")]
    x, y = limit.get_xdata(), limit.get_ydata()
    np.testing.assert_allclose(y, np.maximum(1e-3, 1e-3 * x))  # Polygraphy's rule: beyond both tolerances fails
    points = [c for c in magnitude.collections if isinstance(c, PathCollection)]
    red = sum(len(c.get_offsets()) for c in points if np.allclose(c.get_facecolor()[0][:3], to_rgba(FAIL_COLOUR)[:3]))
    assert red == data["mismatches"] == 3  # at 1e-4, 1 and 100: above atol and above rtol * |reference|


@pytest.fixture
def divergent_run(tmp_path):
    """A mark-all run whose error enters at MatMul_6 (a twin with one weight changed, against a saved run)."""
    base = modelgen.save(modelgen.matmul_chain(layers=8, size=16), tmp_path / "base.onnx")
    perturbed = modelgen.save(modelgen.matmul_chain(layers=8, size=16, perturb=6), tmp_path / "perturbed.onnx")
    cmpx.run(base, ["onnxrt", "onnxref"], mark_all=True, save_outputs=tmp_path / "golden")
    return cmpx.run(perturbed, ["onnxrt"], mark_all=True, load_outputs=[tmp_path / "golden"],
                    reference="onnxref@golden", save_error_plots=tmp_path / "plots",
                    report_json=tmp_path / "r.json")


def test_the_profile_of_a_marked_run_is_in_graph_order_and_marks_the_first_divergence(divergent_run, tmp_path):
    from cmpx.reports.profile import layer_profiles
    from cmpx.reports.profile_plot import profile_figure

    document = json.loads((tmp_path / "r.json").read_text())
    [profile] = [p for p in layer_profiles(document) if p.backend == "onnxrt"]
    order = [f"{kind}{i}" for i in range(8) for kind in ("mm", "t")][:-1] + ["Y", "S"]
    assert [row.tensor for row in profile.rows] == order
    assert [row.passed for row in profile.rows] == [i < order.index("mm6") for i in range(len(order))]
    assert profile.divergence["tensor"] == "mm6" and not profile.has_local_errors
    files = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert any(f.startswith("profile-onnxrt-vs-onnxref@golden-") for f in files)
    assert any(f.startswith("0-onnxrt-vs-onnxref@golden-mm6-") for f in files)  # the divergence's own plot
    figure = profile_figure(profile, "profile")
    top = figure.axes[0]
    assert [t.get_text() for t in top.texts if "first divergence" in t.get_text()] == \
        ["first divergence: mm6 (MatMul_6, MatMul)"]
    assert "local" not in " ".join(top.get_legend_handles_labels()[1])


def test_local_errors_are_overlaid_when_the_report_has_them(divergent_run, tmp_path):
    from cmpx.reports.html_report import render_report
    from cmpx.reports.profile import layer_profiles
    from cmpx.reports.profile_plot import profile_figure
    from browser import Dom

    document = divergent_run.to_dict()
    [pair] = [p for p in document["pairs"] if p["backend"] == "onnxrt"]
    tensors = {t["name"]: t for t in document["tensors"]}
    pair["local_errors"] = [  # what --local-error will add: the error each layer makes on the reference's inputs
        {"tensor": name, "node": tensors[name]["node"], "op_type": tensors[name]["op_type"],
         "max_abs": 0.25 if name == "mm6" else 1e-7, "max_rel": 0.5 if name == "mm6" else 1e-6,
         "passed": name != "mm6"} for name in ("mm5", "mm6", "t6", "mm7")]
    [profile] = [p for p in layer_profiles(document) if p.backend == "onnxrt"]
    local = {row.tensor: row.local for row in profile.rows if row.local is not None}
    assert set(local) == {"mm5", "mm6", "t6", "mm7"} and local["mm6"].max_abs == 0.25 and not local["mm6"].passed
    figure = profile_figure(profile, "profile")
    for axis in figure.axes:
        [overlay] = [c for c in axis.collections if c.get_label().startswith("local error")]
        assert len(overlay.get_offsets()) == 4
    page = Dom(render_report(document))
    table = page.find("section", id_="layers").find_all("table")[0]
    assert [th.text for th in table.find_all("th")][-3:] == ["local max abs", "local max rel", "local verdict"]
    rows = {tr.find_all("td")[1].text: [td.text for td in tr.find_all("td")] for tr in table.find_all("tr")[1:]}
    assert rows["mm6"][-3:] == ["0.25", "0.5", "FAILED"] and rows["mm4"][-3:] == ["–", "–", "–"]


@pytest.mark.parametrize("atol, rtol", [(0, 0), (0, 1e-3), (1e-3, 0)])
def test_zero_tolerances_empty_outputs_and_non_finite_errors_draw_cleanly(atol, rtol):
    import warnings

    from cmpx.reports.plots import output_figure, png_bytes

    cases = [(np.array([np.nan, 1, np.inf, 2, 0], np.float32), np.array([1, np.nan, 1, 2.5, 0], np.float32)),
             (np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)),
             (np.array([1, 5, -3], np.int64), np.array([1, 7, 0], np.int64))]
    for actual, reference in cases:
        output = _compare(actual, reference, atol, rtol)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # matplotlib warns of limits it cannot honour on log axes
            assert png_bytes(output_figure("out", output.metrics[0].data, output.sample))[:4] == b"\x89PNG"


def _texts(axis):
    return [t.get_text() for t in axis.texts]


def test_identical_outputs_say_all_errors_0_instead_of_empty_axes():
    from cmpx.reports.plots import output_figure, png_and_panels

    values = np.linspace(-2, 2, 1000, dtype=np.float32)
    output = _compare(values, values.copy(), atol=1e-3, rtol=1e-3)
    figure = output_figure("out", output.metrics[0].data, output.sample)
    absolute, relative, magnitude = figure.axes
    assert _texts(absolute) == ["all absolute errors 0"] and _texts(relative) == ["all relative errors 0"]
    assert not absolute.patches and not relative.patches  # no bars, and no note on top of the words
    png, panels = png_and_panels(figure)
    assert png[:4] == b"\x89PNG" and len(panels) == 3 and all(p[:4] == b"\x89PNG" for p in panels)
    widths = [struct.unpack(">II", p[16:24]) for p in (png, *panels)]
    assert sum(w for w, _ in widths[1:]) == widths[0][0] and all(h < widths[0][1] for _, h in widths[1:])


def test_the_magnitude_legend_says_what_a_point_is():
    from cmpx.reports.plots import output_figure

    reference = np.linspace(0.1, 10, 1000, dtype=np.float32)
    actual = reference * np.float32(1.002)
    output = _compare(actual, reference, atol=1e-3, rtol=1e-3)
    magnitude = output_figure("out", output.metrics[0].data, output.sample).axes[2]
    labels = [t.get_text() for t in magnitude.get_legend().get_texts()]
    assert "element that passes" in labels and "element that fails" in labels
    assert not any(": pass" in label or ": fail" in label for label in labels)  # "all 1,000 elements: pass" read as
    assert "all 1,000 elements" in magnitude.get_title()  # a claim about all of them
    many = np.linspace(0.1, 10, 100_000, dtype=np.float32)
    output = _compare(many * np.float32(1.002), many, atol=1e-3, rtol=1e-3)
    magnitude = output_figure("out", output.metrics[0].data, output.sample).axes[2]
    labels = [t.get_text() for t in magnitude.get_legend().get_texts()]
    assert "one of the 200 largest errors, fails" in labels and "of 100,000 elements" in magnitude.get_title()
    assert any(re.fullmatch(r"element \(1,[0-9]{3} at random of 100,000\) that fails", label) for label in labels)


def test_the_relative_histogram_marks_the_error_where_the_reference_exceeds_atol():
    from cmpx.reports.plots import output_figure

    reference = np.array([0.0, 0.0, 1.0, 2.0, 4.0], np.float32)
    actual = np.array([1e-4, 0.0, 1.01, 2.0, 4.2], np.float32)  # 1e-4 against 0: a relative error of 4.5e11
    output = _compare(actual, reference, atol=1e-3, rtol=1e-3)
    data = output.metrics[0].data
    assert data["rel"]["max"] > 1e11 and data["rel_beyond_atol"] == {"threshold": 1e-3, "elements": 3,
                                                                     "max": pytest.approx(0.05), "max_index": [4]}
    assert "(max rel 0.05 where |reference| > atol 0.001)" in output.metrics[0].summary
    relative = output_figure("out", data, output.sample).axes[1]
    assert "max where |reference| > atol: 0.05\n(3 elements)" in _texts(relative)
    assert any(np.allclose(line.get_xdata(), data["rel_beyond_atol"]["max"]) for line in relative.get_lines())


def test_the_profile_draws_the_relative_error_where_the_reference_exceeds_atol(divergent_run, tmp_path):
    from cmpx.reports.profile import layer_profiles
    from cmpx.reports.profile_plot import profile_figure

    document = json.loads((tmp_path / "r.json").read_text())
    [pair] = [p for p in document["pairs"] if p["backend"] == "onnxrt"]
    [result] = [r for r in document["results"] if r.get("backend") == "onnxrt"]
    for output in result["outputs"]:  # a reference that is 0 where the other is not, as a Relu after fp16 gives
        data = output["metrics"][0]["data"]
        data["rel"]["max"], data["rel_beyond_atol"]["max"] = 1e12, data["rel"]["max"]
    [profile] = [p for p in layer_profiles(document) if p.backend == "onnxrt"]
    assert all(row.max_rel == 1e12 and row.max_rel_beyond_atol < 1e12 for row in profile.rows)
    bottom = profile_figure(profile, "profile").axes[1]
    assert "where |reference| > atol" in bottom.get_ylabel()
    drawn = sorted(float(y) for c in bottom.collections for _, y in c.get_offsets())
    assert drawn and max(drawn) < 1e12 and bottom.get_ylim()[1] < 1e12  # no sawtooth up to 1e12
    assert "relative errors against |reference| ≤ atol are left out (the tables have them)" in _texts(bottom)
    assert pair["worst_rel_beyond_atol"] <= pair["worst_rel"]
