"""--report-json and --junit: machine-readable results for CI."""

import json
import xml.etree.ElementTree as ET

import pytest

EXAMPLE = "examples/models/conv.onnx"


def test_json_report_records_every_pair_iteration_output_and_failure(run_cli, tmp_path, models):
    report = tmp_path / "r.json"
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty", "--backend",
                     "onnxref", "-p", "cmpx_test_faulty", "--faulty-fault", "infer:segfault", "--iterations", "2",
                     "--atol", "0", "Y:1", "--rtol", "0", "Y:1", "--report-json", report)
    assert result.exit_code == 3
    document = json.loads(report.read_text())  # strict JSON: no NaN literals
    assert document["exit_code"] == 3 and document["passed"] is False and document["iterations"] == 2
    faulty = next(b for b in document["backends"] if b["name"] == "faulty")
    assert faulty["failure"]["kind"] == "crash" and faulty["failure"]["signal"] == "SIGSEGV"
    assert faulty["failure"]["phase"] == "infer" and "injecting segfault" in faulty["failure"]["stderr_tail"]
    [pair] = document["pairs"]
    assert (pair["backend"], pair["reference"], pair["iterations"]) == ("onnxrt", "onnxref", 2)
    first = next(r for r in document["results"] if (r["backend"], r["reference"], r["iteration"]) ==
                 ("onnxrt", "onnxref", 0))
    outputs = {o["name"]: o for o in first["outputs"]}
    assert outputs["Y"]["passed"] is True
    metric = outputs["Y"]["metrics"][0]
    assert metric["metric"] == "simple" and metric["data"]["check"] == "elemwise" and metric["data"]["atol"] == 1
    assert set(metric["data"]["abs"]) >= {"mean", "std", "median", "max", "max_index", "quantiles"}


def test_json_report_writes_non_finite_numbers_as_strings(run_cli, tmp_path, models):
    report = tmp_path / "r.json"
    run_cli("run", models.log_model, "--backend", "onnxrt", "--backend", "onnxref", "--val-range", "[-2,-1]",
            "--report-json", report)
    text = report.read_text()
    assert '"NaN"' in text and "NaN," not in text.replace('"NaN",', "")
    json.loads(text)


def test_junit_has_one_case_per_pair_and_output_and_failures_carry_the_summary(run_cli, tmp_path):
    path = tmp_path / "j.xml"
    result = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--iterations", "2",
                     "--atol", "0", "--rtol", "0", "Z:1", "--junit", path)
    assert result.exit_code == 1
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1" and suite.get("errors") == "0"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert set(cases) == {"Y", "Z"} and cases["Y"].get("classname") == "onnxrt vs onnxref"
    failure = cases["Y"].find("failure")
    assert failure.get("message").startswith("Y: 2/2 iteration(s) failed; first: simple FAILED: max abs")
    assert "iteration 1: simple FAILED" in failure.text
    assert cases["Z"].find("failure") is None


def test_junit_reports_backend_failures_as_errors(run_cli, tmp_path, models):
    path = tmp_path / "j.xml"
    run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty", "-p", "cmpx_test_faulty",
            "--faulty-fault", "load:raise", "--junit", path)
    suite = ET.parse(path).getroot().find("testsuite")
    error = suite.find("testcase[@name='faulty']/error")
    assert suite.get("errors") == "1" and "injected failure during load" in error.get("message")


def test_json_report_names_frameworks_options_seed_and_the_compared_tensors_in_graph_order(run_cli, tmp_path,
                                                                                         models):
    import onnxruntime

    report = tmp_path / "r.json"
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all",
                     "--seed", "5", "--atol", "1e-4", "S:1e-2", "--report-json", report)
    assert result.exit_code == 0, result.output
    document = json.loads(report.read_text())
    assert document["seed"] == 5 and document["model_outputs"] == ["Y", "S"]
    assert document["options"] == {"seed": 5, "atol": ["1e-4", "S:1e-2"], "mark_all": True,
                                   "report_json": str(report)}
    frameworks = {b["name"]: b["framework"] for b in document["backends"]}
    assert frameworks["onnxrt"] == f"onnxruntime {onnxruntime.__version__}"
    assert frameworks["onnxref"].startswith("onnx ")
    assert [(t["name"], t["node"], t["op_type"]) for t in document["tensors"]] == [
        ("mm0", "MatMul_0", "MatMul"), ("t0", "Tanh_0", "Tanh"), ("mm1", "MatMul_1", "MatMul"),
        ("t1", "Tanh_1", "Tanh"), ("mm2", "MatMul_2", "MatMul"), ("Y", "Tanh_2", "Tanh"), ("S", "sum", "ReduceSum")]
    plain = tmp_path / "plain.json"
    run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--report-json", plain)
    assert json.loads(plain.read_text())["tensors"] == []  # nothing marked: no per-layer view


def test_the_summary_line_gives_the_relative_error_where_the_reference_exceeds_atol():
    import numpy as np

    from cmpx.options.argtypes import PerOutput
    from cmpx.comparison.compare import ComparisonSettings, compare_outputs
    from cmpx.reports.text_lines import pair_line as _pair_line  # moved with the state-free lines
    from cmpx.outcome.results import PairTally
    from cmpx_comparators.metrics import ToleranceCheck

    settings = ComparisonSettings([ToleranceCheck(None)], PerOutput(1e-3), PerOutput(1e-3))
    reference = np.array([0.0, 1.0, 2.0], np.float32)
    tally = PairTally("a", "b")
    tally.add(compare_outputs("a", "b", 0, {"out": np.array([1e-4, 1.01, 2.0], np.float32)}, {"out": reference},
                              settings))
    assert tally.worst_rel > 1e11 and tally.worst_rel_beyond_atol == pytest.approx(0.01, rel=1e-4)
    assert _pair_line(tally).endswith(f"worst rel {tally.worst_rel:.3g} (0.01 where |reference| > atol)")
    same = PairTally("a", "b")
    same.add(compare_outputs("a", "b", 0, {"out": reference * 1.01}, {"out": reference}, settings))
    assert "where" not in _pair_line(same)  # no reference at 0: the worst rel is the one that counts
