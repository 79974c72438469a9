"""Models exported from real architectures the way users export them (tests/models/real/, remade by
make_corpus.py there), run with no options on ONNX Runtime, the reference evaluator and OpenVINO, with --mark-all,
and with fp16 and int8: the verdicts are asserted, not just the exit codes (issue 17)."""

import re
from importlib.util import find_spec

import pytest

import cmpx
from conftest import REPO

REAL = REPO / "tests" / "models" / "real"
# model -> its outputs; every one has dynamic dimensions, and the transformers take integer ids
MODELS = {"bert": ("last_hidden_state", "pooler_output"), "gpt2": ("logits",), "cnn": ("logits",),
          "vit": ("last_hidden_state", "pooler_output"), "skl_pipeline": ("output_label", "output_probability"),
          "external/model": ("logits",)}
EVERY_BACKEND = ["onnxrt", "onnxref", "openvino"]

needs_openvino = pytest.mark.skipif(find_spec("openvino") is None or find_spec("cmpx_openvino") is None,
                                    reason="needs the OpenVINO plugin: pip install -e examples/plugins/cmpx-openvino")


def path(name: str) -> str:
    return str(REAL / f"{name}.onnx")


def tally(report: cmpx.Report, backend: str, reference: str):
    return next(t for t in report.tallies if (t.backend, t.reference) == (backend, reference))


@needs_openvino
@pytest.mark.parametrize("name", MODELS)
def test_defaults_on_every_backend(name):
    report = cmpx.run(path(name), EVERY_BACKEND)
    outputs = len(MODELS[name])
    first = tally(report, "onnxrt", "onnxref")
    assert first.passed and first.outputs == outputs and first.elements > 0, report.text()
    if name == "skl_pipeline":  # OpenVINO has no ai.onnx.ml operators; the other two still compare both outputs
        assert report.exit_code == cmpx.ExitCode.BACKEND_FAILED, report.text()
        assert "No conversion rule found for operations: ai.onnx.ml.LinearClassifier, ai.onnx.ml.Scaler" in \
            report.failures["openvino"].detail
        return
    assert report.exit_code == cmpx.ExitCode.PASSED, report.text()
    second = tally(report, "onnxref", "openvino")
    assert second.passed and second.outputs == outputs and second.worst_abs < 1e-5, report.text()


@needs_openvino
@pytest.mark.parametrize("name", MODELS)
def test_mark_all_compares_every_layer_on_every_backend(name):
    report = cmpx.run(path(name), EVERY_BACKEND, mark_all=True)
    marked = len(report.plan.mark)
    assert marked > 1
    layers = tally(report, "onnxrt", "onnxref")
    assert layers.passed and layers.outputs == marked + len(MODELS[name]), report.text()
    assert layers.first_divergence is None  # nothing diverges between two correct fp32 runtimes
    if name == "skl_pipeline":  # OpenVINO has no ai.onnx.ml operators: it fails to load, the others compare
        assert report.exit_code == cmpx.ExitCode.BACKEND_FAILED, report.text()
        return
    openvino = tally(report, "onnxref", "openvino")  # OpenVINO keeps the ONNX tensor names: it marks them all
    assert openvino.passed and openvino.outputs == openvino.outputs_compared == marked + len(MODELS[name]), \
        report.text()
    assert not any("cannot mark" in warning for warning in report.warnings), report.warnings


@pytest.mark.parametrize("name", [name for name in MODELS if name != "skl_pipeline"])
def test_fp16_and_int8_differ_plausibly_and_the_hints_are_what_was_measured(name):
    report = cmpx.run(path(name), ["onnxrt:fp16", "onnxrt:int8", "onnxrt"], reference="onnxrt")
    assert report.exit_code == cmpx.ExitCode.MISMATCH, report.text()  # at the fp32 default tolerances
    fp16, int8 = tally(report, "onnxrt:fp16", "onnxrt"), tally(report, "onnxrt:int8", "onnxrt")
    assert fp16.outputs == int8.outputs == len(MODELS[name])
    assert 1e-6 < fp16.worst_abs < 1e-2 and 1e-4 < int8.worst_abs < 1 and fp16.worst_abs < int8.worst_abs
    text = report.text()
    for pair in (fp16, int8):
        hint = re.search(rf"the model outputs of {re.escape(pair.backend)} vs onnxrt pass with --atol ([0-9.e+-]+)",
                         text)
        assert hint and pair.worst_abs <= float(hint.group(1)) < 2 * pair.worst_abs, text


def test_the_scikit_learn_pipeline_in_fp16_and_refused_in_int8():
    report = cmpx.run(path("skl_pipeline"), ["onnxrt:fp16", "onnxrt"])
    assert report.exit_code == cmpx.ExitCode.PASSED, report.text()  # its ai.onnx.ml ops stay in float32
    assert tally(report, "onnxrt:fp16", "onnxrt").outputs == 2
    with pytest.raises(cmpx.UsageError, match="int8: no node of the model could be quantized"):
        cmpx.run(path("skl_pipeline"), ["onnxrt:int8", "onnxrt"])


def test_shared_dimensions_given_once_reach_every_input(run_cli):
    # Issue 17, finding 2, as the report found it: one input's shape given, the others sharing its dimensions
    result = run_cli("run", path("bert"), "--backend", "onnxrt", "--backend", "onnxref", "--input-shapes",
                     "input_ids:[2,16]")
    assert result.exit_code == 0, result.output
    assert "2/2 outputs passed (1088 elements)" in result.output  # [2,16,32] + [2,32]
    assert "dynamic shape" not in result.output
    report = cmpx.run(path("gpt2"), ["onnxrt", "onnxref"], input_shapes={"batch": 3, "sequence": 5})
    assert report.passed and report.tallies[0].elements == 3 * 5 * 100, report.text()


def test_int8_mark_all_reports_the_fused_tensors_as_not_in_the_int8_graph(run_cli):
    # Issue 17, finding 5: the quantizer fuses Conv+Relu (and folds BatchNormalization): the float graph's tensors
    # it removed are counted like other unmatched tensors, never a backend error, and the first divergence is found.
    result = run_cli("run", path("cnn"), "--backend", "onnxrt:int8", "--backend", "onnxrt", "--mark-all",
                     "--show-unmatched")
    assert result.exit_code == 1, result.output  # a mismatch, not a backend failure
    found = re.search(r"(\d+) marked tensor\(s\) not in the int8 graph of onnxrt:int8, not compared", result.output)
    assert found and int(found.group(1)) > 10, result.output
    assert "/stem/stem.1/BatchNormalization_output_0 (only in onnxrt)" in result.output
    assert "first divergence: /stem/stem.0/Conv_output_0 (/stem/stem.0/Conv, Conv)" in result.output
    report = cmpx.run(path("cnn"), ["onnxrt:int8", "onnxrt"], mark_all=True)
    (pair,) = report.to_dict()["results"]
    assert {u["reason"] for u in pair["unmatched"]} == {"not in the int8 graph"}


def test_the_reference_evaluators_int8_graph_with_mark_all_is_compared_not_a_protocol_error(run_cli):
    # Issue 17, finding 6 as found: onnxref:int8 + --mark-all on a CNN raised a 42-million-character error
    result = run_cli("run", path("cnn"), "--backend", "onnxref:int8", "--backend", "onnxrt:int8", "--mark-all",
                     "--onnxrt-optimization", "basic")
    assert result.exit_code == 0, result.output  # the same int8 graph, every tensor it computes compared
    assert "failed during" not in result.output
    assert "69/69 outputs passed" in result.output  # 94 tensors in the float graph, 25 of them fused away
    assert "warning: 25 of 93 marked tensor(s) were never compared (no pair produced them on both sides" in \
        result.output


@needs_openvino
def test_openvino_names_outputs_as_the_model_declares_them(run_cli):
    # Issue 17, finding 7: the fp16 graph's output port is both "logits" and the converter's graph_output_cast_0
    result = run_cli("run", path("cnn"), "--backend", "openvino:fp16", "--backend", "onnxrt", "--atol", "1e-2")
    assert result.exit_code == 0, result.output
    assert "1/1 outputs passed (10 elements)" in result.output
    assert "graph_output_cast_0" not in result.output and "only in" not in result.output


@needs_openvino
def test_a_backend_that_cannot_mark_is_named_with_its_pairs_or_refused(run_cli):
    # Issue 17, finding 9, with a third-party backend that cannot mark (the smallest plugin: docs/plugins.md, In short)
    mine = ["cmpx_test_minimal"]
    warned = run_cli("run", path("cnn"), "--backend", "mine", "--backend", "onnxrt", "--backend", "onnxref",
                     "--mark-all", plugins=mine)
    assert warned.exit_code == 0, warned.output
    assert ("warning: mine cannot mark tensors: mine vs onnxrt compares only the model's outputs, not the "
            "marked tensors (--strict-marking makes this an error)") in warned.output
    strict = run_cli("run", path("cnn"), "--backend", "mine", "--backend", "onnxrt", "--backend", "onnxref",
                     "--mark-all", "--strict-marking", plugins=mine)
    alone = run_cli("run", path("cnn"), "--backend", "onnxrt", "--backend", "mine", "--mark-all", plugins=mine)
    for refused in (strict, alone):
        assert refused.exit_code == 2, refused.output
        assert "mine cannot mark tensors" in refused.output and "loaded" not in refused.output
    assert "no pair of this run would compare a marked tensor" in alone.output


@needs_openvino
def test_a_long_backend_error_is_printed_once(run_cli):
    # Issue 17, finding 10: OpenVINO's conversion errors run to many lines; the summary recalls one: the line that
    # tells why (issue 29, item 10), not the first, which only says where in OpenVINO's source it was raised
    result = run_cli("run", path("skl_pipeline"), "--backend", "onnxrt", "--backend", "openvino")
    assert result.exit_code == 3, result.output
    assert result.output.count("Model wasn't fully converted") == 1  # the whole message, once
    summary = next(line for line in result.output.splitlines() if line.startswith("  openvino: FAILED during load"))
    assert "No conversion rule found for operations" in summary and "core.cpp" not in summary
    assert "(in full above)" in summary


def test_a_huge_worker_error_is_cut_in_the_worker_and_still_tells_the_cause(run_cli):
    # Issue 17, finding 6: tens of megabytes of error text are cut, head and tail kept, the size cut said
    result = run_cli("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--backend", "faulty",
                     "--faulty-fault", "infer:huge-error", plugins=["cmpx_test_faulty"])
    assert result.exit_code == 3, result.output
    assert "ERROR   faulty failed during infer: RuntimeError: injected failure during infer: the real cause" in \
        result.output
    assert re.search(r"\[\.\.\. \d{8} characters cut \.\.\.\]", result.output) and "the end of the message" in \
        result.output
    assert result.output.count("characters cut") == 1 and len(result.output) < 40_000
