"""Wrong results cmpx itself computed (issue #26): each test reproduces one through the real CLI with real
workers and fails on the code before its fix. A comparison tool must never be the source of a difference."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from cmpx.testing import models


def _verdict(output: str) -> str:
    return output.strip().splitlines()[-1]


def _save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, path)  # (the checker wants a shape on every output; these have none on purpose)
    return str(path)


def _graph(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _passthrough(tmp_path) -> str:
    """Outputs [Y, X] where X is also the model's input."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
    return _save(_graph([helper.make_node("Relu", ["X"], ["Y"])], [x],
                        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3]), x]), tmp_path / "pass.onnx")


def test_an_output_that_is_also_an_input_is_read_from_onnxrt_as_fed(run_cli, tmp_path):
    model = _passthrough(tmp_path)
    against_reference = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--atol", "0",
                                "--rtol", "0", "--iterations", "2")
    assert against_reference.exit_code == 0, against_reference.output
    assert "X: max abs 0 " in against_reference.output
    # the golden holds the fed values, not zeros: a saved onnxrt run passes exactly against the reference
    saved = run_cli("run", model, "--backend", "onnxrt", "--save-outputs", tmp_path / "golden",
                    "--save-inputs", tmp_path / "inputs")
    assert saved.exit_code == 0, saved.output
    loaded = run_cli("run", model, "--backend", "onnxref", "--load-outputs", tmp_path / "golden",
                     "--load-inputs", tmp_path / "inputs", "--atol", "0", "--rtol", "0")
    assert loaded.exit_code == 0, loaded.output
    assert "2 output(s), 12 element(s) compared" in _verdict(loaded.output)


def test_an_output_that_is_also_an_input_differs_between_onnxrt_runs_when_the_inputs_do(run_cli, tmp_path):
    # onnxrt against onnxrt was a false pass (zeros on both sides): a changed input shows in the comparison
    model = _passthrough(tmp_path)
    first = run_cli("run", model, "--backend", "onnxrt", "--save-outputs", tmp_path / "a", "--seed", "1")
    assert first.exit_code == 0, first.output
    second = run_cli("run", model, "--backend", "onnxrt", "--load-outputs", tmp_path / "a", "--seed", "2")
    assert second.exit_code == 1, second.output
    assert "FAILED  X:" in second.output


def _unknown_rank_reshape(tmp_path) -> str:
    """Polygraphy's tests/models/reshape.onnx in kind: a Reshape to a shape computed from the input's, through a
    Compress, so that ONNX Runtime knows neither the output's shape nor its rank (it reports [])."""
    data = helper.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 5, 5])
    nodes = [helper.make_node("Shape", ["data"], ["s"]), helper.make_node("Slice", ["s", "zero1", "one"], ["n"]),
             helper.make_node("Concat", ["n", "minus1"], ["wanted"], axis=0),
             helper.make_node("Greater", ["wanted", "zero"], ["positive"]),
             helper.make_node("Compress", ["wanted", "positive"], ["kept"]),
             helper.make_node("Concat", ["kept", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["data", "shape"], ["R"])]
    constants = [numpy_helper.from_array(np.array(v, np.int64), name) for name, v in
                 [("zero1", [0]), ("one", [1]), ("minus1", [-1]), ("zero", 0)]]
    return _save(_graph(nodes, [data], [helper.make_tensor_value_info("R", TensorProto.FLOAT, None)], constants),
                 tmp_path / "reshape.onnx")


def test_an_output_of_unknown_rank_is_not_bound_as_a_scalar(run_cli, tmp_path):
    model = _unknown_rank_reshape(tmp_path)
    import onnxruntime

    assert onnxruntime.InferenceSession(model).get_outputs()[0].shape == []  # the case: rank unknown to ORT
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref",
                     "--input-shapes", "data:[2,3,5,5]", "--iterations", "2", "--save-outputs", tmp_path / "saved")
    assert result.exit_code == 0, result.output
    assert "2 output(s), 300 element(s) compared" in _verdict(result.output)
    marked = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref",
                     "--input-shapes", "data:[2,3,5,5]", "--mark-all")
    assert marked.exit_code == 0, marked.output
    assert "shape mismatch" not in marked.output
    from cmpx.saved.opening import open_saved

    saved = open_saved(str(tmp_path / "saved"), "outputs").sources
    assert [tuple(source.load(i)["R"].shape) for source in saved for i in range(2)] == [(2, 75)] * 2 * len(saved)


def test_an_output_whose_shape_depends_on_the_values_is_not_bound_to_a_shape_seen_before(run_cli, tmp_path):
    # NonZero's output shape changes with the data at the same input shape: a shape learned from the first
    # iteration must not be bound for the next one (ONNX Runtime then refused the run: exit 3)
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [64])
    model = _save(_graph([helper.make_node("Relu", ["X"], ["Z"]), helper.make_node("NonZero", ["Z"], ["Y"])], [x],
                         [helper.make_tensor_value_info("Y", TensorProto.INT64, None),
                          helper.make_tensor_value_info("Z", TensorProto.FLOAT, [64])]), tmp_path / "nonzero.onnx")
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--iterations", "4",
                     "--val-range", "X:[-1,1]", "--atol", "0", "--rtol", "0")
    assert result.exit_code == 0, result.output
    assert "4 comparison(s) over 4 iteration(s), 8 output(s)" in _verdict(result.output)


def _needs_constraints(tmp_path) -> str:
    """Polygraphy's precision-constraints example in kind (examples/cli/run/08): x flipped by a MatMul with a
    rotated identity, + FP16_MAX, - FP16_MAX, flipped back. In float16 the Add overflows; kept in float32 it does
    not, unless the tensor between the Add and the Sub is rounded to float16 on its way."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])
    flip = numpy_helper.from_array(np.rot90(np.eye(4, dtype=np.float32)).copy(), "flip")
    big = numpy_helper.from_array(np.array(65504, np.float32), "fp16_max")
    nodes = [helper.make_node("MatMul", ["x", "flip"], ["flipped"], name="flip_in"),
             helper.make_node("Add", ["flipped", "fp16_max"], ["added"], name="add"),
             helper.make_node("Sub", ["added", "fp16_max"], ["subtracted"], name="sub"),
             helper.make_node("MatMul", ["subtracted", "flip"], ["y"], name="flip_out")]
    return _save(_graph(nodes, [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 4])],
                        [flip, big]), tmp_path / "needs_constraints.onnx")


def test_keep_fp32_keeps_the_tensor_between_two_kept_nodes_in_float32(run_cli, tmp_path):
    model = _needs_constraints(tmp_path)
    common = ["--backend", "onnxref", "--val-range", "x:[1,2]", "--check-error-stat", "median", "--atol", "1e-2",
              "--rtol", "0"]
    unconstrained = run_cli("run", model, "--backend", "onnxref:fp16", *common)
    assert unconstrained.exit_code == 1, unconstrained.output  # the overflow the example is about
    kept = run_cli("run", model, "--backend", "onnxref:fp16", *common, "--keep-fp32", "Add", "Sub", "--mark-all",
                   "--save-transformed", tmp_path / "transformed", "-v")  # -v: each passing marked tensor listed
    assert kept.exit_code == 0, kept.output
    assert "4 comparison(s)" not in kept.output and "PASSED  added:" in kept.output
    graph = onnx.load(next((tmp_path / "transformed").glob("*.onnx"))).graph
    nodes = {node.name: node for node in graph.node}
    assert list(nodes["sub"].input)[0] == "added" == list(nodes["add"].output)[0]  # no Cast pair between them
    types = {info.name: info.type.tensor_type.elem_type for info in graph.value_info}
    assert types.get("added", TensorProto.FLOAT) == TensorProto.FLOAT


def test_keep_fp32_feeds_a_kept_node_the_float32_input_unrounded(run_cli, tmp_path):
    # a kept node reading a graph input reads it as given, not through float16 and back
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])
    model = _save(_graph([helper.make_node("Mul", ["x", "x"], ["y"], name="square")], [x],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])]), tmp_path / "square.onnx")
    for kind in ("fp16", "bf16"):
        result = run_cli("run", model, "--backend", f"onnxref:{kind}", "--backend", "onnxref", "--keep-fp32", "Mul",
                         "--atol", "0", "--rtol", "0")
        assert result.exit_code == 0, (kind, result.output)
        assert "y: max abs 0 " in result.output


def test_the_models_own_casts_are_never_joined():
    from cmpx.transforms.kept_float32 import join_kept_float32

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16, name="mine16"),
             helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT, name="mine32"),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    model = _graph(nodes, [x], [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])])
    before = model.SerializeToString()
    joined = join_kept_float32(model, {"mine16", "mine32", "relu"})
    assert joined.SerializeToString() == before  # a model rounding to float16 on purpose keeps doing so
    # the same graph where the converter had inserted the Casts: the round trip goes
    inserted = join_kept_float32(_graph(nodes, [x], [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])]),
                                 {"relu"})
    assert [(n.name, list(n.input)) for n in inserted.graph.node] == [("relu", ["x"])]


def _scaled_to_int(tmp_path, name: str, scale: float) -> str:
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])
    nodes = [helper.make_node("Mul", ["X", "k"], ["m"]), helper.make_node("Cast", ["m"], ["Y"], to=TensorProto.INT64)]
    return _save(_graph(nodes, [x], [helper.make_tensor_value_info("Y", TensorProto.INT64, [4])],
                        [numpy_helper.from_array(np.array(scale, np.float32), "k")]), tmp_path / f"{name}.onnx")


def test_an_integer_output_against_an_exact_zero_reference_is_infinitely_far(run_cli, tmp_path):
    zeros, tens = _scaled_to_int(tmp_path, "zeros", 0.0), _scaled_to_int(tmp_path, "tens", 10.0)
    saved = run_cli("run", zeros, "--backend", "onnxrt", "--save-inputs", tmp_path / "in", "--save-outputs",
                    tmp_path / "out", "--val-range", "X:[0.5,0.9]")
    assert saved.exit_code == 0, saved.output
    result = run_cli("run", tens, "--backend", "onnxrt", "--load-inputs", tmp_path / "in", "--load-outputs",
                     tmp_path / "out", "--report-json", tmp_path / "r.json")
    assert result.exit_code == 1, result.output
    assert "max rel inf at" in result.output and "4.5e+15" not in result.output  # not 1 / machine epsilon
    assert "no rtol suffices (an element differs from an exact zero)" in result.output
    import json

    record = json.loads((tmp_path / "r.json").read_text())["results"][0]["outputs"][0]["metrics"][0]["data"]
    assert record["rel"]["max"] == "Infinity"
    # equal integer zeros are no relative error at all (Polygraphy: NaN)
    same = run_cli("run", zeros, "--backend", "onnxrt", "--load-inputs", tmp_path / "in", "--load-outputs",
                   tmp_path / "out", "--atol", "0", "--rtol", "0")
    assert same.exit_code == 0 and "max rel 0 " in same.output, same.output


def _with_infinity(tmp_path) -> str:
    """Y = X / d with d = [1, 0, 1, 1]: [x0, inf, x2, x3] for positive X."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])
    divisor = numpy_helper.from_array(np.array([1, 0, 1, 1], np.float32), "d")
    return _save(_graph([helper.make_node("Div", ["X", "d"], ["Y"])], [x],
                        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])], [divisor]),
                 tmp_path / "inf.onnx")


def test_described_statistics_show_infinities_and_what_the_mean_leaves_out(run_cli, tmp_path):
    from cmpx.comparison.values import value_stats

    assert str(value_stats("y", np.array([1, np.inf, 3, 4], np.float32))) == (
        "y: float32 [4]: min 1, max inf, mean 2.66667, std 1.24722 (over 3 finite value(s); 1 NaN/Inf left out), "
        "0 NaN, 1 Inf")
    assert str(value_stats("y", np.array([np.inf], np.float32))) == (
        "y: float32 [1]: min inf, max inf, no finite value for mean and std, 0 NaN, 1 Inf")
    assert "all NaN" in str(value_stats("y", np.array([np.nan, np.nan], np.float32)))
    described = run_cli("run", _with_infinity(tmp_path), "--backend", "onnxrt", "--val-range", "X:[1,2]")
    assert described.exit_code == 0, described.output
    assert "max inf" in described.output and "1 NaN/Inf left out" in described.output
    assert "min nan" not in described.output


def test_a_validation_failure_is_named_as_one(run_cli, tmp_path):
    import json

    model = _with_infinity(tmp_path)
    alone = run_cli("run", model, "--backend", "onnxrt", "--validate", "--report-json", tmp_path / "r.json")
    assert alone.exit_code == 1, alone.output
    assert "\nFAILED (validation: NaN/Inf in an output) | " in alone.output
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "FAILED (validation: NaN/Inf in an output)"
    both = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--validate", "--strict-infinities")
    assert both.exit_code == 1, both.output  # the same infinity on both sides: a mismatch too, by Polygraphy's rule
    assert _verdict(both.output).startswith("FAILED (mismatch; validation: NaN/Inf in an output) |")


def test_a_comparison_that_cannot_fail_says_so_in_every_report(run_cli, tmp_path):
    """An exported efficientnet with random weights outputs ~1e-14: every check passes at any tolerance, silently.
    Y here is X * 1e-14; Z = Relu(X) is an ordinary output."""
    import json

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [8])
    model = _save(_graph([helper.make_node("Mul", ["X", "k"], ["Y"]), helper.make_node("Relu", ["X"], ["Z"])], [x],
                         [helper.make_tensor_value_info(n, TensorProto.FLOAT, [8]) for n in ("Y", "Z")],
                         [numpy_helper.from_array(np.array(1e-14, np.float32), "k")]), tmp_path / "tiny.onnx")
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--iterations", "2",
                     "--report-json", tmp_path / "r.json", "--report-html", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if "cannot fail" in line]
    assert len(warnings) == 1 and warnings[0].startswith("  warning: Y cannot fail at these tolerances: every "
                                                         "reference value is below atol 1e-05"), result.output
    assert "--atol Y:0 lets rtol decide" in warnings[0]
    pair = json.loads((tmp_path / "r.json").read_text())["pairs"][0]
    assert [item["output"] for item in pair["cannot_fail"]] == ["Y"]
    assert 0 < pair["cannot_fail"][0]["reference_max"] < 1e-13
    assert "Y cannot fail at these tolerances" in (tmp_path / "r.html").read_text()
    # with the fix it suggests, Y is compared by rtol and the warning goes
    fixed = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--atol", "Y:0")
    assert fixed.exit_code == 0 and "cannot fail" not in fixed.output, fixed.output


def test_outputs_that_are_all_empty_pass_saying_that_no_value_was_compared(run_cli, tmp_path, models):
    """A batch of 0 (or an empty NMS result on both sides): the shapes agree, so the run passes, but a CI gate
    must hear that no value was compared; one non-empty output is a comparison."""
    result = run_cli("run", models.dynamic_add, "--backend", "onnxrt", "--backend", "onnxref", "--input-shapes", "N=0",
                     "--report-html", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    assert "1 output(s), 0 element(s) compared" in result.output
    assert "  warning: every output of onnxrt vs onnxref was empty (0 elements): their shapes agree, but no value was " \
           "compared" in result.output
    assert "was empty (0 elements)" in (tmp_path / "r.html").read_text()
    full = run_cli("run", models.dynamic_add, "--backend", "onnxrt", "--backend", "onnxref", "--input-shapes", "N=2")
    assert full.exit_code == 0 and "was empty" not in full.output, full.output


def test_the_telling_line_of_an_error_skips_lines_that_only_say_where_it_was_raised():
    from cmpx.errors import telling_line

    openvino = ("openvino failed during load: RuntimeError: Exception from src/inference/src/cpp/core.cpp:105:\n"
                "Exception from src/inference/src/dev/plugin.cpp:53:\n"
                "Check 'unknown_operators.empty()' failed at src/frontends/onnx/frontend/src/core/graph.cpp:207:\n"
                "OpenVINO does not support the following ONNX operations: ai.onnx.ml.TreeEnsembleClassifier\n")
    assert telling_line(openvino) == ("openvino failed during load: RuntimeError: OpenVINO does not support the "
                                      "following ONNX operations: ai.onnx.ml.TreeEnsembleClassifier")
    transformed = ("openvino:fp16 failed during load: RuntimeError: Exception from src/inference/src/cpp/core.cpp:105:\n"
                   "Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\n"
                   "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted.\nSummary:\n"
                   "-- No conversion rule found for operations: ai.onnx.ml.LinearClassifier\n")
    assert telling_line(transformed) == ("openvino:fp16 failed during load: RuntimeError: No conversion rule found for "
                                         "operations: ai.onnx.ml.LinearClassifier")  # a backend name with a colon
    assert telling_line("ValueError: shapes differ\nmore detail") == "ValueError: shapes differ"
    assert telling_line("\n\nsrc/only.cpp:3:\n") == "src/only.cpp:3:"  # nothing better: the line it has


def test_a_passing_onnxrt_fp16_run_says_it_is_not_true_float16(run_cli, tmp_path):
    """Issue #29, item 7: Polygraphy's example 08 model passes on onnxrt:fp16 (ONNX Runtime's CPU provider computes
    the Add and Sub in float32) and fails on onnxref:fp16, which computes in float16, as TensorRT would."""
    model = _needs_constraints(tmp_path)
    common = ["--backend", "onnxref", "--val-range", "x:[1,2]", "--check-error-stat", "median", "--atol", "1e-2",
              "--rtol", "0"]
    stand_in = run_cli("run", model, "--backend", "onnxrt:fp16", *common)
    assert stand_in.exit_code == 0, stand_in.output
    assert "hint: onnxrt:fp16 passes, but ONNX Runtime's CPU provider has float16 kernels for few ops" in \
        stand_in.output
    assert run_cli("run", model, "--backend", "onnxref:fp16", *common).exit_code == 1


def test_a_natively_float16_model_failing_the_default_tolerances_is_told_what_its_precision_allows(run_cli, tmp_path):
    """Issue #29, item 9: a model exported after .half() fails everywhere at the default 1e-5."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT16, [64])
    weights = numpy_helper.from_array(np.random.default_rng(0).random(64).astype(np.float16), "w")
    model = _save(_graph([helper.make_node("Mul", ["X", "w"], ["m"]), helper.make_node("Exp", ["m"], ["Y"])], [x],
                         [helper.make_tensor_value_info("Y", TensorProto.FLOAT16, [64])], [weights]),
                  tmp_path / "half.onnx")
    failed = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--val-range", "X:[-3,3]")
    assert failed.exit_code == 1, failed.output
    assert "hint: Y is float16 in the model itself, whose neighbouring values are 9.8e-04 apart relative to their " \
           "size: at rtol 1e-05 rounding alone fails; compare it at --rtol 0.002 or more" in failed.output
    hinted = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--val-range", "X:[-3,3]",
                     "--rtol", "0.002")
    assert hinted.exit_code == 0 and "hint: Y is float16" not in hinted.output, hinted.output
