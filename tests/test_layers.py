"""Per-layer comparison: marking, the first divergence, saved mark-all runs, external data."""

import json
import re

import pytest

from cmpx.testing import models as modelgen

BACKENDS = ("--backend", "onnxrt", "--backend", "onnxref")


@pytest.fixture
def twins(tmp_path):
    """A 12-layer chain and its twin with one weight of layer 6 perturbed."""
    base = modelgen.save(modelgen.matmul_chain(layers=12, size=16), tmp_path / "base.onnx")
    perturbed = modelgen.save(modelgen.matmul_chain(layers=12, size=16, perturb=6), tmp_path / "perturbed.onnx")
    return base, perturbed


def test_the_first_divergence_is_the_perturbed_layer_through_a_saved_run(run_cli, twins, tmp_path):
    base, perturbed = twins
    saved = tmp_path / "golden"
    first = run_cli("run", base, *BACKENDS, "--mark-all", "--save-outputs", saved)
    assert first.exit_code == 0, first.output
    later = run_cli("run", perturbed, "--backend", "onnxrt", "--mark-all", "-v", "--load-outputs", saved,
                    "--reference", "onnxref@golden", "--report-json", tmp_path / "r.json")
    assert later.exit_code == 1, later.output
    assert re.search(r"first divergence: mm6 \(MatMul_6, MatMul\): max abs [0-9.e-]+ at", later.output)
    assert re.search(r"PASSED  mm5: ", later.output) and re.search(r"PASSED  t5: ", later.output)
    assert re.search(r"FAILED  t6: ", later.output)
    report = json.loads((tmp_path / "r.json").read_text())
    # -v also writes each backend's described outputs: the pair's record is the first of kind "pair"
    divergence = next(r for r in report["results"] if r["kind"] == "pair")["first_divergence"]
    assert report["pairs"][0]["first_divergence"]["tensor"] == "mm6"
    assert (divergence["tensor"], divergence["node"], divergence["op_type"]) == ("mm6", "MatMul_6", "MatMul")
    assert divergence["metrics"][0]["data"]["abs"]["max"] > 1e-6


def test_against_saved_outputs_alone_no_layer_is_blamed(run_cli, twins, tmp_path):
    """Saved without marks, only the model's outputs are compared: the error may enter at any layer, so no first
    divergence is named (the output's own node was, with its statistics printed again), as in a live run."""
    base, perturbed = twins
    saved = tmp_path / "golden"
    assert run_cli("run", base, *BACKENDS, "--save-outputs", saved).exit_code == 0
    later = run_cli("run", perturbed, "--backend", "onnxrt", "--load-outputs", saved, "--reference", "onnxref@golden",
                    "--report-json", tmp_path / "r.json")
    assert later.exit_code == 1, later.output
    assert re.search(r"FAILED  Y: ", later.output) and "first divergence" not in later.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["pairs"][0]["first_divergence"] is None
    assert next(r for r in report["results"] if r["kind"] == "pair")["first_divergence"] is None


def test_an_output_the_saved_run_lacks_is_not_where_the_error_enters(run_cli, twins, tmp_path):
    """Y left out of the saved run (saved as a Polygraphy run with its own --onnx-outputs is): missing, which
    fails the run, but no value says the error enters there; the first divergence is looked for among the values
    compared (S after it, here, with mm2 passing before)."""
    base, perturbed = twins
    saved = tmp_path / "golden"
    assert run_cli("run", base, *BACKENDS, "--onnx-outputs", "mm2", "--onnx-exclude-outputs", "Y", "--save-outputs",
                   saved).exit_code == 0
    later = run_cli("run", perturbed, "--backend", "onnxrt", "--onnx-outputs", "mm2", "--load-outputs", saved,
                    "--reference", "onnxref@golden")
    assert later.exit_code == 1, later.output
    assert re.search(r"FAILED  Y: missing in onnxref@golden", later.output), later.output
    assert "first divergence: Y" not in later.output
    assert re.search(r"first divergence: S \(sum, ReduceSum\): max abs", later.output), later.output


def test_an_output_computed_from_the_inputs_alone_is_where_its_error_enters(run_cli, tmp_path):
    """Nothing between the inputs and the failing output: its node is named, against saved outputs too."""
    import onnx
    from onnx import TensorProto, helper

    def one_node(op):
        io = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]) for name in "ABC"]
        graph = helper.make_graph([helper.make_node(op, ["A", "B"], ["C"], name=op.lower())], "g", io[:2], io[2:])
        return modelgen.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                             tmp_path / f"{op}.onnx")

    saved = tmp_path / "sums"
    assert run_cli("run", one_node("Add"), "--backend", "onnxrt", "--save-outputs", saved).exit_code == 0
    later = run_cli("run", one_node("Sub"), "--backend", "onnxrt", "--load-outputs", saved)
    assert later.exit_code == 1, later.output
    assert re.search(r"first divergence: C \(sub, Sub\): max abs", later.output)


def test_patterns_files_and_exclusions(run_cli, twins, tmp_path):
    base, _ = twins
    only_mm = run_cli("run", base, *BACKENDS, "--onnx-outputs", "mm*", "--onnx-exclude-outputs", "mm1?")
    assert only_mm.exit_code == 0, only_mm.output
    compared = set(re.findall(r"PASSED  (\w+):", only_mm.output))
    assert compared == {"Y", "S"} | {f"mm{i}" for i in range(10)}
    names = tmp_path / "names.txt"
    names.write_text("# layers to watch\nt3\n\nmm4\n")
    from_file = run_cli("run", base, *BACKENDS, "--onnx-outputs", f"@{names}", "t1")
    assert set(re.findall(r"PASSED  (\w+):", from_file.output)) == {"Y", "S", "t1", "t3", "mm4"}
    polygraphy_spelling = run_cli("run", base, *BACKENDS, "--onnx-outputs", "mark", "all")
    assert "| 23 marked tensor(s)" in polygraphy_spelling.output


def test_a_model_with_external_data(run_cli, tmp_path):
    (tmp_path / "m").mkdir()
    path = modelgen.save_with_external_data(modelgen.matmul_chain(layers=4), tmp_path / "m")
    assert (tmp_path / "m" / "weights.bin").exists()
    result = run_cli("run", path, *BACKENDS, "--mark-all", "-v")
    assert result.exit_code == 0, result.output
    assert "| 7 marked tensor(s)" in result.output and re.search(r"PASSED  mm2:", result.output)
    listed = run_cli("tensors", path)
    assert listed.exit_code == 0 and re.search(r"mm2\s+MatMul_2\s+MatMul\s+float32\s+\[1,8\]", listed.output)


def test_listing_the_tensors_into_head_is_not_a_failure(tmp_path):
    """``cmpx tensors MODEL | head``: the reader goes away after a line; that is exit 0, not click's exit 1 (a
    failure under ``set -o pipefail``). 1,000 tensors: more than a pipe holds, so the listing meets the closed pipe."""
    import subprocess
    import sys

    path = modelgen.save(modelgen.matmul_chain(layers=500, size=2), tmp_path / "long.onnx")
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "tensors", str(path)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout.readline().startswith(b"TENSOR")
    process.stdout.close()
    errors = process.communicate(timeout=60)[1].decode()
    assert process.returncode == 0 and errors == "", errors


def test_tensors_only_one_side_has_are_counted_not_failed(run_cli, models, tmp_path):
    saved = tmp_path / "plain"
    run_cli("run", models.matmul_chain, *BACKENDS, "--save-outputs", saved)
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--mark-all", "--load-outputs", saved,
                     "--reference", "onnxrt@plain", "--show-unmatched")
    assert result.exit_code == 0, result.output
    assert "5 marked tensor(s) only in onnxrt, not compared" in result.output
    assert "    mm0 (only in onnxrt)" in result.output


@pytest.mark.parametrize("args, message", [
    (("--onnx-outputs", "nosuch"), "--onnx-outputs: the model has no markable tensor 'nosuch'; list them with: "
                                   "cmpx tensors"),
    (("--onnx-outputs", "zz*"), "the pattern 'zz*' matches no tensor of the model"),
    (("--onnx-outputs", "@/nonexistent/list.txt"), "--onnx-outputs list not found: /nonexistent/list.txt"),
    (("--onnx-exclude-outputs", "mm0"), "--onnx-exclude-outputs mm0: without --onnx-outputs or --mark-all it leaves "
                                        "out model outputs only, and 'mm0' is not one (the outputs: Y, S)"),
    (("--mark-all", "--atol", "nosuch:1"), "'nosuch' is not one of the model outputs and marked tensors"),
])
def test_marking_errors_come_before_any_worker(run_cli, models, args, message):
    result = run_cli("run", models.matmul_chain, *BACKENDS, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "loaded" not in result.output
