"""The OpenVINO plugin as a user gets it: installed, found through its entry point, compared with ONNX Runtime
on the example models, through cmpx's own pytest plugin."""

import re
from pathlib import Path

import pytest

pytest.importorskip("cmpx_openvino", reason="install it: pip install -e examples/plugins/cmpx-openvino")
pytest.importorskip("openvino", reason="the plugin needs the openvino package")

EXAMPLES = Path(__file__).resolve().parents[3] / "models"


def test_it_is_found_through_its_entry_point(cmpx_cli):
    result = cmpx_cli("plugins")
    assert re.search(r"openvino\s+OpenVINO runtime .*\[plugin openvino \(cmpx-openvino 0\.1\.0\)\]", result.output)


@pytest.mark.parametrize("model, extra", [("conv.onnx", ()), ("dynamic_identity.onnx", ("--input-shapes", "X:[1,2,4,4]"))])
def test_it_agrees_with_onnx_runtime_on_the_example_models(cmpx_cli, model, extra):
    result = cmpx_cli("run", EXAMPLES / model, "--backend", "openvino", "--backend", "onnxrt", *extra,
                      "--atol", "1e-5", "--rtol", "1e-4")
    assert result.exit_code == 0, result.output
    assert "openvino vs onnxrt (reference)" in result.output


def test_bf16_differs_by_a_plausible_amount(cmpx_cli):
    args = ("run", EXAMPLES / "conv.onnx", "--backend", "openvino", "--openvino-precision", "bf16", "--backend",
            "onnxrt")
    capabilities = __import__("openvino").Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if "BF16" not in capabilities:
        result = cmpx_cli(*args)
        assert result.exit_code == 3 and "has no BF16 support" in result.output
        return
    strict = cmpx_cli(*args)
    loose = cmpx_cli(*args, "--atol", "5e-2", "--rtol", "5e-2")
    assert loose.exit_code == 0, loose.output
    worst = float(re.search(r"Y: max abs ([0-9.e-]+)", loose.output).group(1))
    assert 1e-6 < worst < 5e-2  # bf16 keeps 8 bits of mantissa
    assert strict.exit_code in (0, 1)


def test_an_unsupported_precision_is_a_clear_load_error(cmpx_cli):
    capabilities = __import__("openvino").Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if "FP16" in capabilities:
        pytest.skip("this CPU runs f16; the error path needs one that does not")
    result = cmpx_cli("run", EXAMPLES / "conv.onnx", "--backend", "openvino", "--openvino-precision", "f16",
                      "--backend", "onnxrt")
    assert result.exit_code == 3
    assert "PrecisionUnsupported: CPU has no FP16 support" in result.output


@pytest.fixture
def ir_model(tmp_path):
    """conv.onnx converted to OpenVINO IR (conv.xml + conv.bin), weights kept in float32."""
    import openvino

    path = tmp_path / "conv.xml"
    openvino.save_model(openvino.convert_model(str(EXAMPLES / "conv.onnx")), str(path), compress_to_fp16=False)
    return path


def test_an_ir_model_is_described_by_openvino_and_matches_the_onnx_run(cmpx_cli, tmp_path, ir_model):
    saved = tmp_path / "onnx-run"
    onnx_run = cmpx_cli("run", EXAMPLES / "conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                        "--save-outputs", saved)
    assert onnx_run.exit_code == 0, onnx_run.output
    result = cmpx_cli("run", ir_model, "--backend", "openvino", "--load-outputs", saved, "--atol", "1e-5",
                      "--rtol", "1e-4")
    assert result.exit_code == 0, result.output
    assert "openvino vs onnxrt@onnx-run" in result.output
    assert "PASSED  Y" in result.output and "PASSED  Z" in result.output


def test_an_ir_model_cannot_run_on_onnx_runtime(cmpx_cli, ir_model):
    result = cmpx_cli("run", ir_model, "--backend", "openvino", "--backend", "onnxrt")
    assert result.exit_code == 2
    assert "is a .xml model, which only openvino can load, not onnxrt" in result.output


ZOO = Path(__import__("onnx").__file__).parent / "backend" / "test" / "data" / "light"


@pytest.mark.parametrize("model", ["light_resnet50.onnx", "light_densenet121.onnx", "light_shufflenet.onnx"])
def test_it_agrees_with_onnx_runtime_on_model_zoo_networks(cmpx_cli, model):
    """Real networks (weights replaced by constants) from the onnx wheel: hundreds of nodes, old opsets."""
    if not (ZOO / model).exists():
        pytest.skip(f"this onnx wheel does not ship {model}")
    result = cmpx_cli("run", ZOO / model, "--backend", "openvino", "--backend", "onnxrt", "--atol", "1e-4",
                      "--rtol", "1e-3")
    assert result.exit_code == 0, result.output


def test_it_marks_tensors_like_onnx_runtime(cmpx_cli):
    """Registered with supports_marking: every intermediate tensor of conv.onnx is compared, and agrees."""
    result = cmpx_cli("run", EXAMPLES / "conv.onnx", "--backend", "openvino", "--backend", "onnxrt", "--mark-all",
                      "--atol", "1e-5", "--rtol", "1e-4", "-v")  # -v: every passing tensor on a line of its own
    assert result.exit_code == 0, result.output
    assert "1 marked tensor(s)" in result.output and "PASSED  conv" in result.output


def _two_faults(tmp_path, **kwargs):
    from cmpx.testing import models

    return models.save(models.two_faults(**kwargs), tmp_path / "two_faults.onnx")


def test_local_error_and_reduce_come_free_with_marking(cmpx_cli, tmp_path):
    """A third-party backend that marks tensors gets --local-error and cmpx reduce through the public Backend API
    alone: OpenVINO against onnx.reference on the chain whose BatchNormalization and Softmax the reference computes
    wrongly at opset 9."""
    import json

    model = _two_faults(tmp_path, nodes=30, batchnorm_at=10, softmax_at=22)
    report = tmp_path / "report.json"
    local = cmpx_cli("run", model, "--backend", "openvino", "--backend", "onnxref", "--mark-all", "--local-error",
                     "--report-json", report)
    assert local.exit_code == 1, local.output
    errors = json.loads(report.read_text())["pairs"][0]["local_errors"]
    assert {e["node"] for e in errors[:2]} == {"node10_BatchNormalization", "node22_Softmax"}
    assert all(e["passed"] for e in errors[2:])
    reduced = cmpx_cli("reduce", model, "--backend", "openvino", "--backend", "onnxref", "-o", tmp_path / "r.onnx")
    assert reduced.exit_code == 1, reduced.output
    assert reduced.output.strip().splitlines()[-1].endswith("kept 1 of 30 node(s): node10_BatchNormalization "
                                                            "(BatchNormalization)")


def test_it_runs_sliced_with_the_statistics_of_an_unsliced_run(cmpx_cli, tmp_path):
    """A sliced run (--memory-budget below what the marked tensors take) loads each slice's model in the OpenVINO
    worker, fed its own values of the tensors crossing each cut."""
    import json

    args = ("run", EXAMPLES / "conv.onnx", "--backend", "openvino", "--backend", "onnxrt", "--mark-all", "--atol",
            "1e-5", "--rtol", "1e-4", "--report-json")
    whole = cmpx_cli(*args, tmp_path / "whole.json", "--memory-budget", "1TiB")
    sliced = cmpx_cli(*args, tmp_path / "sliced.json", "--memory-budget", "1")
    assert sliced.exit_code == whole.exit_code == 0, sliced.output
    assert re.search(r"\| sliced: \d+ slices \(memory budget 1 B;", sliced.output)
    reports = [json.loads((tmp_path / name).read_text()) for name in ("whole.json", "sliced.json")]
    assert reports[1]["slicing"]["sliced_backends"] == ["onnxrt", "openvino"]
    # OpenVINO may pick other kernels for a slice than for the whole graph: the same verdicts, errors alike (on conv
    # one element of Z rounds differently, moving the index of an equal maximum)
    verdicts = [[(o["name"], o["passed"]) for r in report["results"] for o in r["outputs"]] for report in reports]
    assert verdicts[0] == verdicts[1] and len(verdicts[0]) == len(reports[0]["tensors"]) == 3
    worst = [report["pairs"][0]["worst_abs"] for report in reports]
    assert worst[1] == pytest.approx(worst[0], rel=1.0)


def test_a_failure_is_summed_up_by_its_telling_line_not_the_source_location(cmpx_cli, tmp_path):
    """OpenVINO's first line is 'Exception from src/inference/src/cpp/core.cpp:105:'; the reason (no conversion
    rule for TreeEnsembleClassifier) is lines below. The summary, sweep lines and summary.md show the reason
    (issue #29, item 10)."""
    pytest.importorskip("skl2onnx")
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.tree import DecisionTreeClassifier

    x = np.random.default_rng(0).random((40, 4)).astype(np.float32)
    tree = DecisionTreeClassifier(max_depth=3).fit(x, (x[:, 0] > 0.5).astype(np.int64))
    model = tmp_path / "tree.onnx"
    model.write_bytes(to_onnx(tree, x[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3})
                      .SerializeToString())
    result = cmpx_cli("run", model, "--backend", "openvino", "--backend", "onnxrt")
    assert result.exit_code == 3, result.output
    summary = [line for line in result.output.splitlines() if line.startswith("  openvino: FAILED during load")]
    assert len(summary) == 1 and "TreeEnsembleClassifier" in summary[0], result.output
    assert "core.cpp" not in summary[0]


def test_it_computes_with_the_threads_omp_num_threads_gives(monkeypatch):
    # A sweep's cell sets OMP_NUM_THREADS to its run's threads (cmpx.sweep.threads); OpenVINO's own threads (TBB)
    # would ignore it. OpenVINO caps the count at the CPUs, so 1 is what shows on any machine of 2 or more.
    import os

    from cmpx_openvino.backend import OpenvinoBackend

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: one thread either way")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    backend = OpenvinoBackend()
    backend.load(str(EXAMPLES / "conv.onnx"))
    assert backend.compiled.get_property("INFERENCE_NUM_THREADS") == 1
