"""A pass must mean that something was compared (issue #16): pairs that compared nothing fail and say why,
--output-map pairs differently named outputs (names with '=' too), saved runs longer than the run are said,
counts say what was compared, requests that never took effect are named, and one backend alone is described."""

import json
import shlex

import numpy as np
import onnx
from onnx import TensorProto, helper

from cmpx.testing import models
from conftest import REPO

EXAMPLE = REPO / "examples" / "models" / "conv.onnx"


def _saved(run_cli, tmp_path, output_name, directory):
    model = tmp_path / f"{directory}.onnx"
    models.save(models.named_outputs([output_name]), model)
    result = run_cli("run", model, "--onnxrt", "--save-outputs", tmp_path / directory)
    assert result.exit_code == 0, result.output
    return tmp_path / directory


def _verdict(output: str) -> str:
    return output.strip().splitlines()[-1]


def test_saved_runs_with_no_name_in_common_fail_and_the_hinted_output_map_pairs_them(run_cli, tmp_path):
    theirs = _saved(run_cli, tmp_path, "bert/logits=1:0 final", "theirs")  # a name holding '=', ':' and ' '
    ours = _saved(run_cli, tmp_path, "logits", "ours")
    failed = run_cli("run", "--load-outputs", ours, theirs)
    assert failed.exit_code == 1, failed.output
    assert "nothing was compared: onnxrt@ours has logits that onnxrt@theirs lacks; onnxrt@theirs has " \
           "bert/logits=1:0 final that onnxrt@ours lacks" in failed.output
    hint = failed.output.split("say so with ", 1)[1].split(")", 1)[0]
    assert hint == "--output-map 'bert/logits=1:0 final=logits'"  # quoted for the shell
    assert _verdict(failed.output) == ("FAILED (mismatch) | 0 comparison(s) over 1 iteration(s), 0 output(s), "
                                       "0 element(s) compared | exit 1")
    paired = run_cli("run", "--load-outputs", ours, theirs, *shlex.split(hint))
    assert paired.exit_code == 0, paired.output
    assert "1 comparison(s) over 1 iteration(s), 1 output(s), 6 element(s) compared" in _verdict(paired.output)


def test_against_a_saved_run_the_hinted_output_map_names_the_models_outputs_first(run_cli, tmp_path):
    """A live backend (the model's names) against a saved run of other names: --output-map's left side must be
    the model's output, so the hint maps the saved name to it (it said the reverse, which cmpx then refused)."""
    theirs = _saved(run_cli, tmp_path, "output_0", "golden")
    model = tmp_path / "live.onnx"
    models.save(models.named_outputs(["logits"]), model)
    failed = run_cli("run", model, "--onnxrt", "--load-outputs", theirs)
    assert failed.exit_code == 1, failed.output
    hint = failed.output.split("say so with ", 1)[1].split(")", 1)[0]
    assert hint == "--output-map logits=output_0"
    paired = run_cli("run", model, "--onnxrt", "--load-outputs", theirs, *shlex.split(hint))
    assert paired.exit_code == 0, paired.output
    assert "1 output(s), 6 element(s) compared" in _verdict(paired.output)


def test_names_that_match_ignoring_case_get_a_hint(run_cli, tmp_path):
    failed = run_cli("run", "--load-outputs", _saved(run_cli, tmp_path, "Y", "upper"),
                     _saved(run_cli, tmp_path, "y", "lower"))
    assert failed.exit_code == 1
    assert "they match ignoring case: pair them with --output-map y=Y" in failed.output


def test_an_output_map_reading_two_ways_is_refused(run_cli, tmp_path):
    a = _saved(run_cli, tmp_path, "a=b", "one")
    b = _saved(run_cli, tmp_path, "a", "two")
    result = run_cli("run", "--load-outputs", a, b, "--output-map", "a=b=c")
    assert result.exit_code == 2
    assert "--output-map a=b=c: reads 2 ways ('a' from 'b=c'; 'a=b' from 'c')" in result.output


def test_a_saved_run_longer_than_the_run_is_said_in_the_output_and_the_report(run_cli, tmp_path):
    saved = run_cli("run", EXAMPLE, "--onnxref", "--iterations", "3", "--save-outputs", tmp_path / "golden")
    assert saved.exit_code == 0, saved.output
    result = run_cli("run", EXAMPLE, "--onnxrt", "--load-outputs", tmp_path / "golden", "--report-json",
                     tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    assert "onnxref@golden: 1 of its 3 iteration(s) compared (give --iterations 3" in result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert any("holds 3 iteration(s)" in warning for warning in report["warnings"]), report["warnings"]


def test_a_missing_output_is_not_counted_as_compared_and_its_tolerance_is_said_unused(run_cli, tmp_path):
    # Y only in one saved run: the pair fails on it; its per-output tolerance never applied
    model = tmp_path / "two.onnx"
    models.save(models.named_outputs(["Y", "Z"]), model)
    run_cli("run", model, "--onnxrt", "--save-outputs", tmp_path / "both")
    only_z = _saved(run_cli, tmp_path, "Z", "only-z")
    result = run_cli("run", "--load-outputs", tmp_path / "both", only_z, "--atol", "Y:1e-3")
    assert result.exit_code == 1, result.output
    assert "FAILED  Y: missing in onnxrt@only-z" in result.output
    assert "--atol Y:... was never applied: no output named Y was compared" in result.output
    assert "1 output(s), 6 element(s) compared" in _verdict(result.output)  # Z only


def _scalar_model(path):
    graph = helper.make_graph([helper.make_node("Mul", ["X", "X"], ["Y"]), helper.make_node("Shape", ["X"], ["S"])],
                              "scalar", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, []),
                               helper.make_tensor_value_info("S", TensorProto.INT64, [0])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))


def test_scalars_survive_polygraphy_json_and_a_shape_mismatch_counts_as_reached(run_cli, tmp_path):
    _scalar_model(tmp_path / "s.onnx")
    saved = run_cli("run", tmp_path / "s.onnx", "--onnxrt", "--save-inputs", tmp_path / "in.json",
                    "--save-outputs", tmp_path / "out.json")
    assert saved.exit_code == 0, saved.output
    document = json.loads((tmp_path / "out.json").read_text())
    from cmpx.saved.opening import open_saved

    values = open_saved(str(tmp_path / "out.json"), "outputs").sources[0].load(0)
    assert values["Y"].shape == () and values["S"].shape == (0,), document
    again = run_cli("run", tmp_path / "s.onnx", "--onnxrt", "--onnxref", "--load-inputs", tmp_path / "in.json",
                    "--load-outputs", tmp_path / "out.json")
    assert again.exit_code == 0, again.output
    # a marked tensor whose shapes differ failed on its shape: it was reached, not "never compared"
    import cmpx.saved.polygraphy_writer as writer

    document["lst"][0][1][0]["outputs"]["Y"] = writer.encode_array(np.zeros(1, np.float32))
    (tmp_path / "bad.json").write_text(json.dumps(document))
    shaped = run_cli("run", tmp_path / "s.onnx", "--onnxrt", "--load-inputs", tmp_path / "in.json",
                     "--load-outputs", tmp_path / "bad.json", "--onnx-outputs", "Y")
    assert shaped.exit_code == 1
    assert "Y: shape mismatch: [] vs reference [1]" in shaped.output
    assert "none of its" not in shaped.output and "never compared" not in shaped.output


def test_one_backend_alone_is_described_not_compared(run_cli, tmp_path):
    model = tmp_path / "log.onnx"
    models.save(models.log_model(), model)
    described = run_cli("run", model, "--onnxrt", "--val-range", "[-1,1]", "--seed", "3")
    assert described.exit_code == 0, described.output
    assert "[iteration 0] onnxrt outputs" in described.output
    assert "Y: float32 [2, 3]: min" in described.output and " NaN, 0 Inf" in described.output
    assert "one backend, onnxrt: its outputs were described, not compared" in described.output
    assert "hint: outputs hold NaN or Inf (above); --validate fails the run on them" in described.output
    # a person reads the verdict's first word: a run that compared nothing does not say PASSED (exit 0 all the same)
    assert _verdict(described.output) == "NOT COMPARED | 1 iteration(s) of onnxrt described | exit 0"
    assert "PASSED" not in described.output
    validated = run_cli("run", model, "--onnxrt", "--val-range", "[-1,1]", "--seed", "3", "--validate")
    assert validated.exit_code == 1
    assert "described and checked for NaN and Inf (--validate)" in validated.output
    golden = run_cli("run", EXAMPLE, "--onnxrt", "--save-outputs", tmp_path / "golden", "--report-json",
                     tmp_path / "golden.json")
    assert golden.exit_code == 0 and (tmp_path / "golden" / "cmpx-run.jsonl").exists()
    document = json.loads((tmp_path / "golden.json").read_text())
    assert (document["verdict"], document["compared"], document["passed"], document["exit_code"]) == (
        "NOT COMPARED", False, True, 0)
    compared = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", "--report-json", tmp_path / "pair.json")
    document = json.loads((tmp_path / "pair.json").read_text())
    assert (document["verdict"], document["compared"]) == ("PASSED", True), compared.output


def test_one_backend_that_fails_is_not_said_to_be_described(run_cli):
    result = run_cli("run", EXAMPLE, "--backend", "faulty", "--faulty-fault", "load:raise",
                     plugins=["cmpx_test_faulty"])
    assert result.exit_code == 3, result.output
    assert "described" not in result.output and "not compared" not in result.output
    assert "faulty: FAILED during load" in result.output


def test_equal_infinities_say_why_no_tolerance_passes(run_cli, tmp_path):
    model = tmp_path / "log.onnx"
    models.save(models.log_model(), model)
    result = run_cli("run", model, "--onnxrt", "--onnxref", "--val-range", "[0,0]", "--strict-infinities")
    assert result.exit_code == 1, result.output  # log(0) = -inf on both: Polygraphy's rule fails them
    assert "min tolerance: none: 6 element(s) have a NaN error (NaN on either side or the same infinity on both sides " \
           "with --strict-infinities; --nan-equal counts NaN on both sides as equal)" in result.output
    equal = run_cli("run", model, "--onnxrt", "--onnxref", "--val-range", "[0,0]")
    assert equal.exit_code == 0, equal.output


def test_a_threshold_near_the_value_is_shown_with_the_digits_that_tell_them_apart(run_cli, tmp_path):
    result = run_cli("run", EXAMPLE, "--onnxrt", "--backend", "onnxrt:fp16", "--compare", "cosine",
                     "--cosine-threshold", "0.99999999999999")
    assert result.exit_code == 1, result.output
    line = next(line for line in result.output.splitlines() if "FAILED  Y: cosine" in line)
    value, threshold = line.split("cosine ", 1)[1].split(" [>= ")
    assert float(value) < 0.99999999999999 and threshold.rstrip("]") == "0.99999999999999"
    assert value != threshold.rstrip("]")


def test_written_reports_are_as_readable_as_any_new_file(run_cli, tmp_path):
    result = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", "--report-json", tmp_path / "r.json",
                     "--save-outputs", tmp_path / "o.json")
    assert result.exit_code == 0
    import os

    umask = os.umask(0)
    os.umask(umask)
    for name in ("r.json", "o.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~umask, name
