"""The fp64 oracle (--oracle, or a backend NAME:fp64): every backend measured against the model in float64, and
each failing pair told which side is closer to the exact value. Real CLI, real workers."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from cmpx.model.graph import TensorGraph, TensorInfo
from cmpx.outcome.oracle import OracleBackend, OracleError, OracleJudgement, times
from cmpx.comparison.oracle import look_for_jump, measure

TWO_FAULTS = "examples/models/two_faults.onnx"
REAL = "tests/models/real"


def report(path) -> dict:
    with open(path) as f:
        return json.load(f)


def judgements(document: dict) -> list[tuple[str, str, dict]]:
    """(backend, reference, judgement) of every pair record."""
    return [(r["backend"], r["reference"], j) for r in document["results"] if r.get("kind", "pair") == "pair"
            for j in r["oracle"]]


def test_the_oracle_names_the_reference_evaluator_where_it_is_wrong_and_where_its_error_jumps(run_cli, tmp_path):
    # onnx.reference 1.23 computes the opset-9 BatchNormalization (node 20) and Softmax (node 45) wrongly; the
    # oracle runs the model raised to opset 19, where it computes them right
    out = tmp_path / "r.json"
    html = tmp_path / "r.html"
    result = run_cli("run", TWO_FAULTS, "--backend", "onnxrt", "--backend", "onnxref", "--oracle", "--mark-all",
                     "--report-json", out, "--report-html", html)
    assert result.exit_code == 1, result.output
    assert "the disagreement is onnxref's" in result.output
    document = report(out)
    assert [(p["backend"], p["reference"]) for p in document["pairs"]] == [("onnxrt", "onnxref")]  # not in the verdict
    found = {j["output"]: j for _, _, j in judgements(document)}
    assert found["Y"]["wrong_side"] == "onnxref" and found["Y"]["closer"] == "onnxrt" and found["Y"]["ratio"] > 1e4
    assert found["Y"]["backend_error"]["max_abs"] < 1e-6 < 0.1 < found["Y"]["reference_error"]["max_abs"]
    assert "t19" not in found and found["t20"]["wrong_side"] == "onnxref"
    summary = {b["backend"]: b for b in document["oracle"]["backends"]}
    assert document["oracle"]["oracle"] == "onnxref:fp64"
    assert summary["onnxref"]["first_jump"]["tensor"] == "t20"
    assert summary["onnxref"]["first_jump"]["op_type"] == "BatchNormalization"
    assert summary["onnxrt"]["first_jump"] is None and summary["onnxrt"]["largest_step"]["step"] < 10
    assert "its error first jumps at t20 (node20_BatchNormalization, BatchNormalization)" in result.output
    assert "precision drift" in result.output
    page = html.read_text()
    assert 'id="oracle"' in page and "the disagreement is onnxref&#x27;s" in page


@pytest.mark.parametrize("model", ["bert", "gpt2", "vit", "cnn"])
def test_on_real_architectures_the_oracle_names_the_fp16_and_int8_side(run_cli, tmp_path, model):
    out = tmp_path / "r.json"
    result = run_cli("run", f"{REAL}/{model}.onnx", "--backend", "onnxrt:fp16", "--backend", "onnxrt:int8",
                     "--backend", "onnxrt", "--reference", "onnxrt", "--oracle", "--report-json", out)
    assert result.exit_code == 1, result.output
    document = report(out)
    found = judgements(document)
    assert {backend for backend, _, _ in found} == {"onnxrt:fp16", "onnxrt:int8"}
    for backend, reference, judgement in found:
        assert judgement["wrong_side"] == backend and judgement["closer"] == reference == "onnxrt", judgement
        assert judgement["ratio"] > 100
        assert judgement["sentence"].endswith(f"the disagreement is {backend.split(':')[1]}'s")
    assert "onnxrt:fp16 is " in result.output and "further from onnxref:fp64 than onnxrt" in result.output


@pytest.mark.parametrize("model", ["cnn", "bert"])  # bert: its attention mask's "minus infinity" is no jump
def test_fp16_drifts_and_no_tensor_of_it_jumps_per_layer(run_cli, tmp_path, model):
    out = tmp_path / "r.json"
    result = run_cli("run", f"{REAL}/{model}.onnx", "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--oracle",
                     "--mark-all", "--report-json", out)
    assert result.exit_code == 1, result.output
    summary = {b["backend"]: b for b in report(out)["oracle"]["backends"]}
    for backend in ("onnxrt:fp16", "onnxrt"):
        assert summary[backend]["layered"] and summary[backend]["first_jump"] is None, summary[backend]
    assert len(summary["onnxrt:fp16"]["tensors"]) > 50  # every marked tensor measured
    assert "its error grows by rounding, a precision drift" in result.output


def test_the_oracle_is_the_verdicts_reference_only_when_named(run_cli, tmp_path):
    out = tmp_path / "r.json"
    named = run_cli("run", TWO_FAULTS, "--backend", "onnxrt", "--backend", "onnxref", "--oracle", "--reference",
                    "onnxref:fp64", "--report-json", out)
    assert named.exit_code == 1, named.output
    document = report(out)
    assert {(p["backend"], p["reference"], p["iterations_passed"]) for p in document["pairs"]} == {
        ("onnxrt", "onnxref:fp64", 1), ("onnxref", "onnxref:fp64", 0)}
    assert judgements(document) == []  # against the oracle itself there is nothing more to say
    assert "pass with --atol" not in named.output  # no tolerance hint for a float64 graph
    assert "against the oracle onnxref:fp64 (float64; the reference of the verdict too)" in named.output
    plain = run_cli("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref", "--oracle")
    assert plain.exit_code == 0, plain.output
    assert "onnxrt vs onnxref (reference)" in plain.output and "vs onnxref:fp64 (reference)" not in plain.output
    assert "against the oracle onnxref:fp64 (float64; not the reference of the verdict unless --reference names " \
        "it)" in plain.output


def test_a_saved_fp64_run_is_the_oracle_of_a_later_run(run_cli, tmp_path):
    saved = tmp_path / "exact"
    first = run_cli("run", TWO_FAULTS, "--backend", "onnxref:fp64", "--save-outputs", saved)
    assert first.exit_code == 0, first.output
    out = tmp_path / "r.json"
    result = run_cli("run", TWO_FAULTS, "--backend", "onnxrt", "--backend", "onnxref", "--load-outputs", saved,
                     "--report-json", out)
    assert result.exit_code == 1, result.output
    document = report(out)
    assert document["oracle"]["oracle"] == f"onnxref:fp64@{saved.name}"
    assert [(p["backend"], p["reference"]) for p in document["pairs"]] == [("onnxrt", "onnxref")]
    assert [j["wrong_side"] for _, _, j in judgements(document)] == ["onnxref"]


def test_a_sliced_run_finds_the_same_jump(run_cli, tmp_path):
    out = tmp_path / "r.json"
    result = run_cli("run", TWO_FAULTS, "--backend", "onnxrt", "--backend", "onnxref", "--oracle", "--mark-all",
                     "--memory-budget", "4KB", "--report-json", out)
    assert result.exit_code == 1, result.output
    document = report(out)
    assert document["slicing"] is not None
    summary = {b["backend"]: b for b in document["oracle"]["backends"]}
    assert summary["onnxref"]["first_jump"]["tensor"] == "t20"


@pytest.mark.parametrize("args, message", [
    (["--oracle", "--load-outputs", "x"], "--oracle runs the model in float64: give the MODEL"),
    (["ENGINE", "--backend", "trt", "--oracle"], "--oracle runs an ONNX model in float64, and "),
])
def test_oracle_misuse_is_refused_before_any_worker(run_cli, tmp_path, args, message):
    engine = tmp_path / "model.engine"
    engine.write_bytes(b"")
    result = run_cli("run", *[str(engine) if word == "ENGINE" else word for word in args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_the_python_api_takes_oracle():
    import cmpx

    report_ = cmpx.run(TWO_FAULTS, ["onnxrt", "onnxref"], oracle=True)
    document = report_.to_dict()
    assert document["oracle"]["oracle"] == "onnxref:fp64"
    assert "the disagreement is onnxref's" in report_.text()


def error(max_abs: float, scale: float = 1.0) -> OracleError:
    return OracleError(max_abs, max_abs / 2, max_abs / scale, scale)


@pytest.mark.parametrize("mine, theirs, sentence", [
    (3.1e-3, 1e-6, "a:fp16 is 3,100× further from O than b: the disagreement is fp16's"),
    (1e-6, 0.5, "b is 500,000× further from O than a:fp16: the disagreement is b's"),
    (1e-6, 1.5e-6, "both are equally far from O (1.5× apart): the reference is as noisy as the backend"),
    (1e-3, 0.0, "b equals O and a:fp16 does not: the disagreement is fp16's"),
    (math.nan, 1e-3, "NaN against O: cannot say which side is closer to the exact value"),
])
def test_the_sentence_of_a_judgement(mine, theirs, sentence):
    judgement = OracleJudgement("y", "a:fp16", "b", "O", error(mine), error(theirs), ("fp16", "b"))
    assert judgement.sentence() == sentence


def test_times_rounds_to_two_digits():
    assert [times(x) for x in (3100.4, 3149, 12.3, 2.46, 1e6)] == ["3,100×", "3,100×", "12×", "2.5×", "1,000,000×"]


def test_a_jump_is_measured_against_what_the_inputs_carried():
    graph = TensorGraph(tuple(TensorInfo(name, f"n_{name}", op, inputs, "float32", None) for name, op, inputs in [
        ("a", "Add", ("x",)), ("b", "Mul", ("a",)), ("c", "Neg", ("b",)), ("d", "Add", ("c", "a"))]), ("x",), ("d",))
    drift = OracleBackend("fp32")
    look_for_jump(graph, drift, 0, {"a": error(1e-7), "b": error(5e-7), "d": error(4e-6)}, None)
    assert drift.jump is None and drift.largest_step == ("d", 8.0)  # through c, which was not measured
    fault = OracleBackend("bug")
    look_for_jump(graph, fault, 3, {"a": error(1e-7), "b": error(1e-2), "d": error(2e-2)}, None)
    assert (fault.jump.tensor, fault.jump.iteration, fault.jump.carried) == ("b", 3, 1e-7)
    half = OracleBackend("half")  # one fp16 rounding on the first node is no jump
    look_for_jump(graph, half, 0, {"a": error(4e-4)}, "fp16")
    assert half.jump is None
    masked = OracleBackend("mask")  # a mask's "minus infinity" written differently is no fault
    look_for_jump(graph, masked, 0, {"a": error(1e35, scale=3.4e38)}, None)
    assert masked.jump is None


def test_an_already_quantized_model_keeps_its_qdq_steps_in_the_oracle(run_cli, tmp_path):
    # the int8 transform's Q/DQ graph, run in float64 with its Q/DQ pairs kept: between them float64, so the
    # dequantized outputs are the same quantization steps as in float32
    saved = tmp_path / "transformed"
    made = run_cli("run", f"{REAL}/cnn.onnx", "--backend", "onnxrt:int8", "--save-transformed", saved)
    assert made.exit_code == 0, made.output
    out = tmp_path / "r.json"
    result = run_cli("run", saved / "cnn.int8.onnx", "--backend", "onnxref", "--backend", "onnxrt", "--oracle",
                     "--mark-all", "--report-json", out)
    assert result.exit_code == 0, result.output
    summary = {b["backend"]: b for b in report(out)["oracle"]["backends"]}
    for backend in ("onnxref", "onnxrt"):
        assert summary[backend]["tensors"]["logits"]["max_abs"] < 1e-6
        assert summary[backend]["first_jump"] is None


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60).flatmap(lambda n: st.tuples(
    arrays(np.float32, n, elements=st.floats(-1e6, 1e6, width=32) | st.just(0.0) | st.just(math.nan)),
    arrays(np.float64, n, elements=st.floats(-1e6, 1e6) | st.just(0.0) | st.just(math.nan)))), st.integers(1, 9))
def test_measuring_chunk_by_chunk_gives_the_whole_tensors_statistics(pair, chunk):
    """The oracle's statistics are measured a chunk at a time (bounded memory on any tensor): the same as numpy's
    over the whole tensor, NaN where numpy gives NaN."""
    actual, exact = pair
    error = np.abs(actual.astype(np.float64) - exact)
    magnitude = np.abs(exact)
    nonzero = magnitude > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = (float(np.max(error)), float(np.mean(error)),
                    float(np.max(error[nonzero] / magnitude[nonzero])) if nonzero.any() else 0.0,
                    float(np.nanmax(magnitude)) if not np.isnan(magnitude).all() else 0.0)
    found = measure(actual, exact, chunk)
    got = (found.max_abs, found.mean_abs, found.max_rel, found.scale)
    assert all((math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
               for a, b in zip(got, expected)), (got, expected)


def test_the_oracle_runs_in_each_cell_of_a_sweep(run_cli, tmp_path):
    """A sweep's run words are checked before there is a model: --oracle (which needs one) was refused there, as
    if no MODEL were given; each cell has its model, and its report holds what the oracle found."""
    (tmp_path / "two_faults.onnx").write_bytes(open(TWO_FAULTS, "rb").read())
    sweep = tmp_path / "sweep.toml"
    sweep.write_text('models = ["two_faults.onnx"]\n[[runs]]\nname = "o"\n'
                     'args = "--backend onnxrt --backend onnxref --oracle"\n')
    result = run_cli("sweep", sweep, "--out", tmp_path / "out", "--jobs", "1")
    assert result.exit_code == 1, result.output  # the reference evaluator's fault, as in a plain run
    reports = list((tmp_path / "out").rglob("report.json"))
    assert len(reports) == 1, reports
    found = judgements(report(reports[0]))
    assert found and all(j["closer"] == "onnxrt" for _, _, j in found), found


def test_a_relative_error_beyond_float64_is_infinite_without_a_numpy_warning():
    """A huge error over a subnormal oracle value overflows the division: the relative error is inf, and numpy's
    raw RuntimeWarning must not reach the user's terminal."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = measure(np.array([1e300]), np.array([1e-300]))
    assert found.max_rel == math.inf and found.max_abs == 1e300
