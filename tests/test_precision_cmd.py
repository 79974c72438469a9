"""cmpx precision through the real CLI, real workers and real backends: on models with planted precision-sensitive
nodes it keeps exactly them, and an independent cmpx run with the list written passes (and fails without any one
of them); Ctrl-C writes the best set so far; bad input is one line, exit 2, before any inference."""

import re
import signal
import subprocess
import sys

import onnx
import pytest

from cmpx.precision.search import candidate_bound, shrink_bound
from cmpx.testing import models as modelgen
from conftest import REPO, interruptible

FP16 = ["--backend", "onnxref:fp16", "--reference", "onnxref", "--val-range", "X:[1,2.5]", "--atol", "1e-2",
        "--rtol", "2e-2"]
INT8 = ["--backend", "onnxrt:int8", "--reference", "onnxrt", "--atol", "1e-2", "--rtol", "5e-2"]
CANDIDATE = re.compile(r"^candidate \d+ \((grow|shrink|check)\): keep \d+/\d+ \(.*\): (passed|FAILED \(.*\)) "
                       r"\(\d+\.\d s\) \| best: (\d+|-)$")


def _listed(path):
    return [line.strip() for line in open(path) if line.strip() and not line.startswith("#")]


def _candidates(output):
    return [line for line in output.splitlines() if line.startswith("candidate ")]


def test_fp16_keeps_exactly_the_planted_nodes_and_a_run_with_the_list_passes(run_cli, tmp_path):
    model = modelgen.save(modelgen.fp16_islands(), tmp_path / "islands.onnx")
    out = tmp_path / "kept.txt"
    result = run_cli("precision", model, *FP16, "-o", out)
    assert result.exit_code == 0, result.output
    assert _listed(out) == list(modelgen.FP16_SENSITIVE)  # in graph order
    lines = _candidates(result.output)
    assert all(CANDIDATE.match(line) for line in lines), lines
    assert 0 < len(lines) <= candidate_bound(14, 4)
    assert "nothing kept: FAILED" in result.output and "all 14 nodes kept: passed" in result.output
    assert "in float32: 4 of 14 node(s) the fp16 transform changes (14 in the model)" in result.output
    assert "in float32: no multiply-accumulates (no MatMul, Gemm or Conv)" in result.output
    assert "PASSED | 1 comparison(s)" in result.output  # the checking run's own report, with its statistics
    assert result.output.strip().endswith("verdict: PASSED with the list (" + str(out) + ") (exit 0)")
    transformed = onnx.load(str(tmp_path / "kept.fp16.onnx"))
    assert {n.name for n in transformed.graph.node} >= set(modelgen.FP16_SENSITIVE)
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in transformed.graph.initializer)
    # checked independently: the list passes, and without its first node it fails
    again = run_cli("run", model, *FP16[:2], "--backend", "onnxref", *FP16[4:], "--keep-fp32", f"@{out}")
    assert again.exit_code == 0, again.output
    fewer = tmp_path / "fewer.txt"
    fewer.write_text("\n".join(_listed(out)[1:]) + "\n")
    failing = run_cli("run", model, *FP16[:2], "--backend", "onnxref", *FP16[4:], "--keep-fp32", f"@{fewer}")
    assert failing.exit_code == 1, failing.output


def test_int8_leaves_exactly_the_outlier_matmul_unquantized(run_cli, tmp_path):
    model = modelgen.save(modelgen.int8_outlier(), tmp_path / "outlier.onnx")
    out = tmp_path / "unquantized.txt"
    result = run_cli("precision", model, *INT8, "-o", out)
    assert result.exit_code == 0, result.output
    assert _listed(out) == list(modelgen.INT8_SENSITIVE)
    # the reference ran once, alone; every later run compared against its saved outputs
    assert "the reference's outputs, saved once (onnxrt alone" in result.output
    assert "FAILED (mismatch: onnxrt:int8 vs onnxrt@reference: Y)" in result.output
    assert "unquantized: 1 of 5 node(s) the int8 transform changes" in result.output
    assert "256 of 768 float weight elements (33.3%)" in result.output
    assert "unquantized: 1024 of 3072 multiply-accumulates of MatMul, Gemm and Conv (33.3%)" in result.output
    assert len(_candidates(result.output)) <= candidate_bound(5, 1)
    again = run_cli("run", model, *INT8[:2], "--backend", "onnxrt", *INT8[4:], "--no-quantize", f"@{out}")
    assert again.exit_code == 0, again.output
    quantized = onnx.load(str(tmp_path / "unquantized.int8.onnx")).graph.node
    assert [n.op_type for n in quantized if n.name == "outlier_matmul"] == ["MatMul"]
    assert "W2" in {i for n in quantized if n.name == "outlier_matmul" for i in n.input}  # its weights unquantized


def test_bf16_on_the_reference_evaluator_keeps_only_the_rounding_pair(run_cli, tmp_path):
    # bfloat16 keeps float32's range, so x**16 no longer overflows as in float16: only x + 65504 - 65504 (its sum
    # rounds to 8 bits of mantissa) must stay in float32, both of its nodes (ONNX Runtime's CPU runs no bfloat16)
    model = modelgen.save(modelgen.fp16_islands(), tmp_path / "islands.onnx")
    out = tmp_path / "kept.txt"
    bf16 = ["--backend", "onnxref:bf16", "--reference", "onnxref", "--val-range", "X:[1,2.5]", "--atol", "1e-2",
            "--rtol", "5e-2"]
    result = run_cli("precision", model, *bf16, "-o", out)
    assert result.exit_code == 0, result.output
    assert _listed(out) == ["add_big", "sub_big"]
    assert "in float32: 2 of 14 node(s) the bf16 transform changes" in result.output
    transformed = onnx.load(str(tmp_path / "kept.bf16.onnx"))
    assert any(t.data_type == onnx.TensorProto.BFLOAT16 for t in transformed.graph.initializer)
    plain = ["run", model, "--backend", "onnxref:bf16", "--backend", "onnxref", *bf16[4:]]
    assert run_cli(*plain, "--keep-fp32", f"@{out}").exit_code == 0
    assert run_cli(*plain, "--keep-fp32", "add_big").exit_code == 1  # the pair is needed whole


def test_fp8_leaves_exactly_the_three_matmuls_unquantized(run_cli, tmp_path):
    # float8 E4M3 rounds to 3 bits of mantissa: at rtol 5e-2 every quantized MatMul costs too much, outlier or not;
    # the Relu is not needed
    model = modelgen.save(modelgen.int8_outlier(), tmp_path / "outlier.onnx")
    out = tmp_path / "unquantized.txt"
    fp8 = ["--backend", "onnxref:fp8", "--reference", "onnxref", "--atol", "1e-2", "--rtol", "5e-2"]
    result = run_cli("precision", model, *fp8, "-o", out)
    assert result.exit_code == 0, result.output
    assert _listed(out) == ["first_matmul", "outlier_matmul", "last_matmul"]
    # every node fails on its own here, so the search shrinks from all kept (by halves, the least suspect first)
    assert "most failing on their own: shrinking from all kept" in result.output
    assert 0 < len(_candidates(result.output)) <= shrink_bound(5, 3), result.output
    assert "unquantized: 3072 of 3072 multiply-accumulates of MatMul, Gemm and Conv (100.0%)" in result.output
    plain = ["run", model, "--backend", "onnxref:fp8", "--backend", "onnxref", *fp8[4:]]
    assert run_cli(*plain, "--no-quantize", f"@{out}").exit_code == 0
    assert run_cli(*plain, "--no-quantize", "first_matmul", "outlier_matmul").exit_code == 1


def test_max_candidates_stops_the_search_with_the_smallest_set_seen_passing(run_cli, tmp_path):
    model = modelgen.save(modelgen.int8_outlier(), tmp_path / "outlier.onnx")
    out = tmp_path / "unquantized.txt"
    # the reference is the backend without a transform, whatever the order and without --reference
    result = run_cli("precision", model, "--backend", "onnxrt", "--backend", "onnxrt:int8", *INT8[4:], "-o", out,
                     "--max-candidates", "2", "--live-reference")
    assert len(_candidates(result.output)) == 2, result.output
    assert "saved once" not in result.output and "@reference" not in result.output  # the reference ran every time
    assert "stopped at --max-candidates 2" in result.output and "onnxrt:int8 against onnxrt" in result.output
    assert result.exit_code == 0 and "outlier_matmul" in _listed(out), result.output


@pytest.mark.parametrize("when", [r"^candidate .*best: \d+$", r"^all 14 nodes kept: passed"])
def test_ctrl_c_writes_the_smallest_set_seen_passing_and_exits_130(tmp_path, when):
    # the second: during the ranking run, before any candidate, every node kept has been seen passing
    model = modelgen.save(modelgen.fp16_islands(), tmp_path / "islands.onnx")
    out = tmp_path / "kept.txt"
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "precision", str(model), *FP16, "-o", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                               preexec_fn=interruptible)
    seen = []
    for line in process.stdout:
        seen.append(line)
        if re.search(when, line.strip()):
            process.send_signal(signal.SIGINT)
            break
    printed = "".join(seen) + process.stdout.read()
    assert process.wait(timeout=60) == 130, printed
    assert "interrupted after" in printed and "wrote the smallest set seen passing" in printed
    assert set(modelgen.FP16_SENSITIVE) <= set(_listed(out)), printed
    assert "interrupted after" in open(out).readline()


@pytest.mark.parametrize("args, message", [
    (["--backend", "onnxref", "--reference", "onnxrt"], "one backend on a reduced-precision model"),
    (["--backend", "onnxref:fp16", "--backend", "onnxrt:fp16", "--reference", "onnxref"],
     "one backend on a reduced-precision model"),
    (FP16 + ["--mark-all"], "cmpx precision does not take --mark-all"),
    (FP16 + ["--keep-fp32", "@missing.txt"], "--keep-fp32 list not found: missing.txt"),
    (FP16 + ["--keep-fp32", "@"], "--keep-fp32: '@' names no file; write the list's path after it: @kept.txt"),
    (FP16 + ["--max-candidates", "0"], "0 is not in the range x>=1"),
])
def test_bad_usage_is_refused_before_anything_runs(run_cli, tmp_path, args, message):
    model = modelgen.save(modelgen.fp16_islands(), tmp_path / "islands.onnx")
    result = run_cli("precision", model, *args, "-o", tmp_path / "kept.txt")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert "nothing kept" not in result.output and not (tmp_path / "kept.txt").exists()


@pytest.mark.parametrize("model_name, output", [("islands.onnx", "islands.onnx"), ("kept.fp16.onnx", "kept.txt")])
def test_an_output_that_would_overwrite_the_model_is_refused(run_cli, tmp_path, model_name, output):
    # -o the model itself, or a list whose transformed model (kept.txt -> kept.fp16.onnx) is the model
    model = tmp_path / model_name
    modelgen.save(modelgen.fp16_islands(), model)
    before = model.read_bytes()
    result = run_cli("precision", model, *FP16, "-o", tmp_path / output)
    assert result.exit_code == 2 and "the model itself; give the node list another path" in result.output, \
        result.output
    assert model.read_bytes() == before and "nothing kept" not in result.output


def test_no_quantize_and_keep_fp32_name_nodes_that_exist(run_cli, tmp_path):
    model = modelgen.save(modelgen.int8_outlier(), tmp_path / "outlier.onnx")
    listed = tmp_path / "list.txt"
    listed.write_text("# a comment\nno_such_node\n")
    for option, backend in (("--no-quantize", "onnxrt:int8"), ("--keep-fp32", "onnxrt:fp16")):
        result = run_cli("run", model, "--backend", backend, "--backend", "onnxrt", option, f"@{listed}")
        assert result.exit_code == 2, result.output
        assert f"{option}: 'no_such_node' is neither a node name nor an op type" in result.output
    # the other transform's option changes nothing there: said, not ignored (an int8 list given to --keep-fp32)
    for option, backend, other in (("--keep-fp32", "onnxrt:int8", "--no-quantize"),
                                   ("--no-quantize", "onnxrt:fp16", "--keep-fp32")):
        result = run_cli("run", model, "--backend", backend, "--backend", "onnxrt", option, "outlier_matmul")
        assert result.exit_code == 2 and f"{option} applies to" in result.output and f"use {other}" in \
            result.output, result.output


def test_a_crash_is_one_more_failing_observation(run_cli, tmp_path):
    # a backend that crashes on every model holding a Sqrt: nothing kept fails, and so does everything kept, which
    # is said (exit 1), not taken for the end of cmpx
    model = modelgen.save(modelgen.fp16_islands(), tmp_path / "islands.onnx")
    result = run_cli("precision", model, "--backend", "crashing:fp16", "--crashing-op", "Sqrt", "--reference",
                     "onnxrt", *FP16[4:], "-o", tmp_path / "kept.txt", plugins=["cmpx_test_crashing"])
    assert result.exit_code == 1, result.output
    assert "nothing kept: FAILED (crash: crashing:fp16 signal SIGSEGV during infer)" in result.output
    assert "all 14 nodes kept: FAILED (crash" in result.output and "does not pass either" in result.output


def test_a_reference_that_fails_on_the_model_itself_stops_it_with_exit_3(run_cli, tmp_path):
    model = modelgen.save(modelgen.fp16_islands(), tmp_path / "islands.onnx")
    result = run_cli("precision", model, "--backend", "onnxref:fp16", "--reference", "faulty", "--faulty-fault",
                     "load:raise", *FP16[4:], "-o", tmp_path / "kept.txt", plugins=["cmpx_test_faulty"])
    assert result.exit_code == 3, result.output
    assert "cannot search: the reference faulty failed on the model itself (error during load)" in result.output
    assert "candidate" not in result.output and not (tmp_path / "kept.txt").exists()


def test_names_a_list_line_would_misread_round_trip_through_the_written_file(run_cli, tmp_path):
    # x + 65504 - 65504 in float16 loses x; its nodes are named '#add' (a comment line as it is) and ' sub ' (spaces
    # stripped as it is): the list cmpx precision writes must give --keep-fp32 those exact names back
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from cmpx.precision.nodes import write_node_list

    big = numpy_helper.from_array(np.array([65504.0], np.float32), "big")
    graph = helper.make_graph([helper.make_node("Add", ["X", "big"], ["a"], name="#add"),
                               helper.make_node("Sub", ["a", "big"], ["Y"], name=" sub ")], "odd names",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])], [big])
    model = tmp_path / "odd names.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    listed = tmp_path / "kept.txt"
    write_node_list(str(listed), ["#add", " sub "], ["a header"])
    run = ["run", model, "--backend", "onnxref:fp16", "--backend", "onnxref", "--val-range", "X:[1,2]"]
    result = run_cli(*run, "--keep-fp32", f"@{listed}")
    assert result.exit_code == 0, result.output
    listed.write_text('"#add\n')
    broken = run_cli(*run, "--keep-fp32", f"@{listed}")
    assert broken.exit_code == 2 and "kept.txt line 1: '\"#add' starts with '\"' but is not one JSON string" in \
        broken.output, broken.output


def test_unnamed_nodes_that_no_list_can_keep_are_named_in_the_verdict(run_cli, tmp_path):
    # exp(x) of x in [10, 12] overflows float16's precision and its nodes have no name: no list can keep them, and
    # the verdict says so instead of only 'no named node'
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Exp", ["X"], ["e"]), helper.make_node("Log", ["e"], ["Y"])],
                              "unnamed", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])])
    model = tmp_path / "unnamed.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    result = run_cli("precision", model, "--backend", "onnxref:fp16", "--reference", "onnxref", "--val-range",
                     "X:[10,12]", "-o", tmp_path / "kept.txt")
    assert result.exit_code == 1, result.output
    assert "2 node(s) the transform changes have no name and no list can keep them (name the model's nodes)" in \
        result.output


def test_a_keep_fp32_word_that_names_a_node_keeps_that_node_not_every_node_of_its_op_type(run_cli, tmp_path):
    # skl2onnx names a pipeline's first MatMul 'MatMul' (the next ones MatMul1...): the list cmpx precision writes
    # names that node, and --keep-fp32 must keep it alone, as --no-quantize does, not every MatMul
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weights = [numpy_helper.from_array(np.eye(4, dtype=np.float32), name) for name in ("W0", "W1")]
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W0"], ["h"], name="MatMul"),
                               helper.make_node("MatMul", ["h", "W1"], ["Y"], name="MatMul1")], "skl-like",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])], weights)
    model = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(model))
    result = run_cli("run", model, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--atol", "1e-2", "--keep-fp32",
                     "MatMul", "--save-transformed", tmp_path / "saved")
    assert result.exit_code == 0, result.output
    types = {i.name: i.data_type for i in onnx.load(str(tmp_path / "saved" / "mlp.fp16.onnx")).graph.initializer}
    assert types == {"W0": onnx.TensorProto.FLOAT, "W1": onnx.TensorProto.FLOAT16}


def test_the_transformed_model_of_a_model_with_external_data_reads_weight_files_of_its_own(run_cli, tmp_path):
    # the quantizer names its weight file after the model (model.int8.onnx.data): the model written beside each
    # list must read a file of its own, or the next list's model in that folder replaces its weights
    model = modelgen.save_with_external_data(modelgen.int8_outlier(), tmp_path)
    original = (tmp_path / "weights.bin").read_bytes()
    result = run_cli("precision", model, *INT8, "-o", tmp_path / "kept.txt")
    assert result.exit_code == 0, result.output
    written = onnx.load(str(tmp_path / "kept.int8.onnx"), load_external_data=False)
    locations = {e.value for t in written.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"kept.int8.onnx.data"} and (tmp_path / "weights.bin").read_bytes() == original
    again = run_cli("run", tmp_path / "kept.int8.onnx", "--backend", "onnxrt", "--backend", "onnxref")
    assert again.exit_code == 0, again.output
