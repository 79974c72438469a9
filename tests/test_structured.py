"""Issue 17, finding 3: outputs that are not tensors (a scikit-learn classifier's ZipMap: a sequence of maps) are
compared structurally, travel without pickle, are saved and loaded, listed and excludable; a backend that cannot
produce one leaves it not comparable while the tensor outputs are still compared."""

import json
import re
from importlib.util import find_spec

import numpy as np
import pytest

import cmpx
from cmpx.structured import StructureError, Structured, check_skeleton, difference, flatten, locate
from conftest import REPO

SKL = str(REPO / "tests" / "models" / "real" / "skl_pipeline.onnx")
ZIPMAP = "seq(map(int64,tensor(float32)))"


def test_a_zipmap_flattens_to_its_values_and_a_constant_size_structure():
    rows = [{2: 0.25, 0: 0.5, 1: 0.25}] * 1000  # keys in any order: sorted, so that values line up by key
    flat = flatten(rows)
    assert flat.skeleton == ["seq*", 1000, ["map*", [0, 1, 2], ["t", []]]]
    assert flat.values.shape == (3000,) and list(flat.values[:3]) == [0.5, 0.25, 0.25]
    assert locate(flat.skeleton, 3 * 417 + 2) == "[417][2]"
    mixed = flatten([np.ones((2, 3), np.float32), np.zeros(4, np.float32), None])
    assert mixed.skeleton == ["seq", [["t", [2, 3]], ["t", [4]], ["none"]]] and mixed.size == 10
    assert locate(mixed.skeleton, 7) == "[1](1,)"
    check_skeleton(mixed.skeleton, 10)


@pytest.mark.parametrize("value, message", [
    ([{"a": 1.0, 2: 2.0}], "neither all integers nor all strings"),
    ([np.array(["x", "y"])], "<U1 values"),
    ({0: object()}, "object"),
])
def test_what_cannot_be_flattened_says_why(value, message):
    with pytest.raises(StructureError, match=message):
        flatten(value)


@pytest.mark.parametrize("skeleton, values, message", [
    (["seq*", 2, ["t", [3]]], 5, "describes 6 values, and 5 are stored"),
    (["map", [1, 2], [["t", []]]], 1, "malformed map"),
    (["tuple", []], 0, "malformed structure"),
    (["seq", [["t", [-1]]]], 0, "malformed t"),
])
def test_a_saved_structure_is_checked_before_use(skeleton, values, message):
    with pytest.raises(StructureError, match=re.escape(message)):
        check_skeleton(skeleton, values)


def test_differences_name_where_and_what():
    four = flatten([{0: 1.0, 1: 2.0}] * 4).skeleton
    assert difference(four, flatten([{0: 1.0, 1: 2.0}] * 3).skeleton) == "the top: 4 items vs reference 3"
    assert difference(four, flatten([{0: 1.0, 2: 2.0}] * 4).skeleton) == "[0]: keys [0, 1] vs reference [0, 2]"
    assert difference(flatten([np.ones(2), None]).skeleton, flatten([np.ones(2), np.ones(1)]).skeleton) == \
        "[1]: nothing (an empty optional) vs reference a tensor"
    assert difference(four, four) is None


def test_the_zipmap_pipeline_runs_on_onnx_runtime_and_the_reference_evaluator(run_cli):
    result = run_cli("run", SKL, "--backend", "onnxrt", "--backend", "onnxref", "--input-shapes", "input:[5,8]",
                     "--iterations", "2")
    assert result.exit_code == 0, result.output
    assert "PASSED  output_probability:" in result.output
    assert "a sequence of 5 maps of 3 keys: same structure, 15 value(s) compared in order" in result.output
    assert "4/4 outputs passed (40 elements)" in result.output  # 5 labels and 15 probabilities, twice


def test_a_structural_difference_fails_naming_where(run_cli, tmp_path):
    saved = tmp_path / "golden"
    assert run_cli("run", SKL, "--backend", "onnxrt", "--save-outputs", saved).exit_code == 0
    manifest = saved / "cmpx-run.jsonl"
    records = [json.loads(line) for line in manifest.read_text().splitlines()]
    entry = next(t for t in records[1]["tensors"] if t["name"] == "output_probability")
    assert entry["structure"] == ["seq*", 1, ["map*", [0, 1, 2], ["t", []]]]  # as the worker sent it
    assert np.load(saved / entry["file"], allow_pickle=False).shape == (3,)
    entry["structure"] = ["seq*", 1, ["map*", [0, 1, 7], ["t", []]]]
    manifest.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    result = run_cli("run", SKL, "--backend", "onnxref", "--load-outputs", saved)
    assert result.exit_code == 1, result.output
    assert "FAILED  output_probability: structure differs at [0]: keys [0, 1, 2] vs reference [0, 1, 7]" in \
        result.output
    assert "PASSED  output_label" in result.output


def test_it_is_listed_and_can_be_left_out_or_marked_around(run_cli):
    listed = run_cli("tensors", SKL)
    assert listed.exit_code == 0, listed.output
    assert re.search(rf"output_probability\s+ZipMap\s+ZipMap\s+{re.escape(ZIPMAP)}\s+-\s+output, compared "
                     "structurally", listed.output)
    left_out = run_cli("run", SKL, "--backend", "onnxrt", "--backend", "onnxref", "--onnx-exclude-outputs",
                       "output_probability")
    assert left_out.exit_code == 0, left_out.output
    assert "1/1 outputs passed" in left_out.output and "output_probability" not in left_out.output
    marked = run_cli("run", SKL, "--backend", "onnxrt", "--backend", "onnxref", "--onnx-outputs", "output_label",
                     "probability_tensor")
    assert marked.exit_code == 0, marked.output
    assert "3/3 outputs passed" in marked.output
    named = run_cli("run", SKL, "--backend", "onnxrt", "--backend", "onnxref", "--onnx-outputs",
                    "output_probability", "label")  # a model output is compared anyway, whatever its type
    assert named.exit_code == 0, named.output
    assert "3/3 outputs passed" in named.output
    untyped = run_cli("run", SKL, "--backend", "onnxrt", "--backend", "onnxref", "--onnx-outputs", "probabilities")
    assert untyped.exit_code == 2, untyped.output
    assert "--onnx-outputs: 'probabilities' cannot be marked: shape inference gives no tensor type for it " \
           "(Normalizer Normalizer" in untyped.output


def test_a_backend_without_sequences_leaves_that_output_not_comparable_and_compares_the_rest(run_cli, cmpx_models):
    if find_spec("openvino") is None or find_spec("cmpx_openvino") is None:
        pytest.skip("needs the OpenVINO plugin: pip install -e examples/plugins/cmpx-openvino")
    result = run_cli("run", cmpx_models.sequence(), "--backend", "openvino", "--backend", "onnxrt", "--backend",
                     "onnxref")
    assert result.exit_code == 0, result.output
    assert "NOT COMPARED  S: openvino does not produce it (a seq(tensor(float32)))" in result.output
    assert "openvino vs onnxrt: 1/1 iterations passed (100%), 1/1 outputs passed" in result.output
    assert "onnxrt vs onnxref: 1/1 iterations passed (100%), 2/2 outputs passed" in result.output
    alone = run_cli("run", cmpx_models.sequence(), "--backend", "openvino", "--backend", "onnxrt")
    assert alone.exit_code == 0, alone.output
    assert "warning: output S was not compared: openvino does not produce it" in alone.output


def test_a_tensor_output_returned_as_text_fails_and_the_others_are_compared(run_cli, cmpx_models):
    result = run_cli("run", cmpx_models.matmul_chain(), "--backend", "onnxrt", "--backend", "faulty",
                     "--faulty-fault", "infer:string-output", plugins=["cmpx_test_faulty"])
    assert result.exit_code == 1, result.output
    assert "FAILED  S: faulty returned it in a form cmpx cannot compare: it is a tensor of <U" in result.output
    assert "PASSED  Y:" in result.output
    fast = run_cli("run", cmpx_models.matmul_chain(), "--backend", "onnxrt", "--backend", "faulty", "--faulty-fault",
                   "infer:string-output", "--iterations", "3", "--fail-fast", plugins=["cmpx_test_faulty"])
    assert fast.exit_code == 1, fast.output
    assert "stopped at the first mismatch (--fail-fast)" in fast.output and "[iteration 1]" not in fast.output


def test_the_api_reports_not_comparable_outputs_per_pair(cmpx_models):
    if find_spec("openvino") is None or find_spec("cmpx_openvino") is None:
        pytest.skip("needs the OpenVINO plugin: pip install -e examples/plugins/cmpx-openvino")
    report = cmpx.run(cmpx_models.sequence(), ["openvino", "onnxrt"])
    (pair,) = report.pairs
    assert pair.not_comparable == [("S", "openvino does not produce it (a seq(tensor(float32)))")]
    assert report.to_dict()["results"][0]["not_comparable"] == [
        {"output": "S", "reason": "openvino does not produce it (a seq(tensor(float32)))"}]


def test_structured_values_survive_a_saved_run_round_trip(tmp_path):
    from cmpx.saved.cmpx_format import RunWriter, read_cmpx_run

    value = flatten([{"cat": 0.75, "dog": 0.25}, {"cat": 0.5, "dog": 0.5}])
    writer = RunWriter(str(tmp_path / "run"), "outputs", "m.onnx")
    writer.add("b", 0, {"p": value, "label": np.array([0, 1])}, None)
    writer.close()
    (source,) = read_cmpx_run(str(tmp_path / "run")).sources
    loaded = source.load(0)["p"]
    assert isinstance(loaded, Structured) and loaded.skeleton == value.skeleton
    assert np.array_equal(loaded.values, value.values)


def test_optionals_compare_whether_held_or_empty_and_openvino_leaves_them_not_comparable(run_cli, cmpx_models):
    # the reference evaluator holds an optional in a one-element list, ONNX Runtime as the value or None: the
    # onnxref backend gives them as ONNX Runtime does, so the two compare
    result = run_cli("run", cmpx_models.optional(), "--backend", "onnxrt", "--backend", "onnxref")
    assert result.exit_code == 0, result.output
    assert "3/3 outputs passed (6 elements)" in result.output
    assert "an empty optional: same structure, 0 value(s) compared in order" in result.output
    if find_spec("openvino") is None or find_spec("cmpx_openvino") is None:
        pytest.skip("needs the OpenVINO plugin: pip install -e examples/plugins/cmpx-openvino")
    with_openvino = run_cli("run", cmpx_models.optional(), "--backend", "onnxrt", "--backend", "openvino")
    assert with_openvino.exit_code == 0, with_openvino.output
    assert "NOT COMPARED  E: openvino does not produce it (an optional(tensor(float32)))" in with_openvino.output
    assert "1/1 outputs passed (3 elements)" in with_openvino.output
