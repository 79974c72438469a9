"""--local-error: each compared node run alone on the reference's values of its inputs, ranked; through the real CLI
and API with real workers."""

import json
from pathlib import Path

import pytest

from cmpx.reports.profile import layer_profiles
from cmpx.testing import models as modelgen

MODELS = Path(__file__).resolve().parent / "models"
FAULTY = {"node20_BatchNormalization", "node45_Softmax"}


@pytest.fixture
def two_faults(tmp_path):
    """onnx.reference computes the BatchNormalization (node 20) and the axis-less Softmax (node 45) of this
    60-node opset-9 chain wrongly; ONNX Runtime computes every node right."""
    return modelgen.save(modelgen.two_faults(), tmp_path / "two_faults.onnx")


def _local_errors(report_path):
    document = json.loads(Path(report_path).read_text())
    (pair,) = document["pairs"]
    return document, pair["local_errors"]


def test_the_two_faulty_nodes_rank_first_and_every_other_node_passes_alone(run_cli, two_faults, tmp_path):
    report = tmp_path / "report.json"
    result = run_cli("run", two_faults, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all", "--local-error",
                     "--report-json", report)
    assert result.exit_code == 1, result.output
    document, errors = _local_errors(report)
    assert len(errors) == 60  # every compared node, the model output's included
    assert {e["node"] for e in errors[:2]} == FAULTY
    assert all(e["passed"] is False for e in errors[:2])
    assert all(e["passed"] is True for e in errors[2:]), [e for e in errors[2:] if not e["passed"]]
    assert [e["max_abs"] for e in errors] == sorted((e["max_abs"] for e in errors), reverse=True)
    assert errors[0]["max_abs"] > 1e-2 and max(e["max_abs"] for e in errors[2:]) < 1e-5
    assert set(errors[0]) >= {"tensor", "node", "op_type", "max_abs", "max_rel", "passed"}
    # the run itself fails from node 20 on: all but the two faulty nodes there only inherit their error
    inheriting = {e["node"] for e in errors if e["inheriting"]}
    assert len(inheriting) == 38 and all(int(n[4:].split("_")[0]) > 20 for n in inheriting)
    assert "node45_Softmax" not in inheriting
    # the text report: the section, the faulty nodes first, the count of those that only inherit
    section = result.output[result.output.index("Local error of onnxrt vs onnxref"):]
    lines = section.splitlines()
    assert "2 of 60 node output(s) fail on their own, 38 only inherit an error" in lines[0]
    assert {line.split("(")[1].split(",")[0] for line in lines[1:3]} == FAULTY
    assert all(line.lstrip().startswith("FAILED") for line in lines[1:3])
    assert "... 50 more" in section
    # the per-layer profile draws them
    (profile,) = layer_profiles(document)
    assert profile.has_local_errors and sum(row.local is not None for row in profile.rows) == 60


def test_the_api_has_them_on_the_pair(two_faults):
    import cmpx

    report = cmpx.run(two_faults, ["onnxrt", "onnxref"], mark_all=True, local_error=True)
    errors = report.pair("onnxrt").local_errors
    assert {e.node for e in errors if e.passed is False} == FAULTY
    assert report.pair("onnxrt").local_error_seconds > 0
    assert "Local error of onnxrt vs onnxref" in report.text()


def test_a_saved_reference_run_feeds_the_nodes(run_cli, two_faults, tmp_path):
    golden = tmp_path / "golden"
    saved = run_cli("run", two_faults, "--backend", "onnxref", "--mark-all", "--save-outputs", golden)
    assert saved.exit_code == 0, saved.output
    report = tmp_path / "report.json"
    result = run_cli("run", two_faults, "--backend", "onnxrt", "--load-outputs", golden, "--mark-all",
                     "--local-error", "--report-json", report)
    assert result.exit_code == 1, result.output
    _, errors = _local_errors(report)
    assert {e["node"] for e in errors if e["passed"] is False} == FAULTY
    assert len(errors) == 60


def test_external_weights_stay_where_they_are(run_cli, tmp_path):
    """A model whose weights live in an external file (as models over 2 GB must): each node's subgraph reads only
    its own weights, and the result is the same as with the weights inline."""
    model = modelgen.save_with_external_data(modelgen.matmul_chain(layers=4, perturb=2), tmp_path)
    weights = (tmp_path / "weights.bin").read_bytes()
    report = tmp_path / "report.json"
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--mark-all", "--local-error",
                     "--report-json", report)
    assert result.exit_code == 0, result.output
    _, errors = _local_errors(report)
    assert {e["node"] for e in errors} == {f"{op}_{i}" for op in ("MatMul", "Tanh") for i in range(4)} | {"sum"}
    assert all(e["passed"] for e in errors)
    assert (tmp_path / "weights.bin").read_bytes() == weights


def test_an_fp16_graph_of_a_real_network(run_cli, tmp_path):
    """The first two stages of a RegNet exported from torchvision (tests/models/regnet_stages12.onnx), fp16 against
    fp32: every node is measured in the float16 graph, and a node fed only the model's input makes the same
    error alone as in the run (the same computation), so the first node's local error is its error in the run."""
    report = tmp_path / "report.json"
    result = run_cli("run", MODELS / "regnet_stages12.onnx", "--backend", "onnxrt:fp16", "--backend", "onnxrt",
                     "--input-shapes", "input:[1,3,32,32]", "--mark-all", "--local-error", "--atol", "1e-3",
                     "--rtol", "1e-3", "--report-json", report)
    assert result.exit_code == 1, result.output
    document, errors = _local_errors(report)
    assert len(errors) == 37 and all(e["passed"] is not None for e in errors)
    intermediate = [e for e in errors if e["tensor"] not in document["model_outputs"]]
    assert all(e["note"] == "dtypes differ: float16 vs reference float32" for e in intermediate)
    assert all(0 < e["max_abs"] < 1e-2 for e in errors)
    first = next(e for e in errors if e["node"] == "/stem/stem.0/Conv")
    (run_result,) = [r for r in document["results"] if r.get("kind") == "pair"]
    in_run = next(o for o in run_result["outputs"] if o["name"] == first["tensor"])
    assert first["max_abs"] == pytest.approx(in_run["metrics"][0]["data"]["abs"]["max"], rel=1e-6)
    failing = {o["name"] for o in run_result["outputs"] if not o["passed"]}
    assert failing == {e["tensor"] for e in errors if e["accumulated_passed"] is False}
    assert {e["tensor"] for e in errors if e["inheriting"]} == {e["tensor"] for e in errors if e["passed"]} & failing


def test_a_backend_that_crashes_on_a_subgraph_leaves_the_verdict_alone(run_cli, two_faults, tmp_path):
    """The run's own inference passes through; the Softmax's subgraph crashes the worker: the nodes before it are
    measured, it and those after are not, a warning says so, and the run's verdict is the mismatch it found."""
    report = tmp_path / "report.json"
    result = run_cli("run", two_faults, "--backend", "crashing", "--crashing-op", "Softmax", "--crashing-after", "1",
                     "--backend", "onnxref", "--mark-all", "--local-error", "--report-json", report,
                     plugins=["cmpx_test_crashing"])
    assert result.exit_code == 1, result.output
    assert "--local-error: crashing failed on the subgraph of node45_Softmax (Softmax)" in result.output
    _, errors = _local_errors(report)
    by_node = {e["node"]: e for e in errors}
    assert by_node["node20_BatchNormalization"]["passed"] is False
    assert by_node["node44_Neg"]["passed"] is True
    assert "SIGSEGV" in by_node["node45_Softmax"]["note"] and by_node["node45_Softmax"]["passed"] is None
    assert by_node["node50_Mul"]["note"].startswith("not measured: crashing failed on the subgraph of node45")


def test_it_needs_marked_tensors(run_cli, two_faults):
    result = run_cli("run", two_faults, "--backend", "onnxrt", "--backend", "onnxref", "--local-error")
    assert result.exit_code == 2
    assert "--local-error measures each compared node: give --mark-all" in result.output
