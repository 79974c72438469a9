"""cmpx reduce through the real CLI, real workers and real backends: what it keeps, what it writes, and that what it
writes fails by itself."""

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from cmpx.testing import models as modelgen

MODELS = Path(__file__).resolve().parent / "models"


def _kept(path):
    return [node.name for node in onnx.load(str(path)).graph.node]


def _candidates(output):
    return [line for line in output.splitlines() if line.startswith("candidate ")]


def test_the_two_fault_chain_reduces_to_one_node_that_still_fails(run_cli, tmp_path):
    model = modelgen.save(modelgen.two_faults(), tmp_path / "two_faults.onnx")
    out = tmp_path / "reduced.onnx"
    result = run_cli("reduce", model, "--backend", "onnxrt", "--backend", "onnxref", "-o", out)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1].endswith(
        "kept 1 of 60 node(s): node20_BatchNormalization (BatchNormalization)")
    lines = _candidates(result.output)
    assert 0 < len(lines) <= 2 * math.ceil(math.log2(60))
    assert all(re.search(r"\((end|start|linear)\): .*: (passed|FAILED \(mismatch: .*\)) \(\d+\.\d s\) \| nodes left: "
                         r"\d+$", line) for line in lines), lines
    assert "reproduce: cmpx run" in result.output
    assert _kept(out) == ["node20_BatchNormalization"]
    inputs, outputs = tmp_path / "reduced.inputs", tmp_path / "reduced.outputs"
    again = run_cli("run", out, "--backend", "onnxrt", "--load-inputs", inputs, "--load-outputs", outputs)
    assert again.exit_code == 1, again.output
    assert "FAILED  t20" in again.output and "onnxrt vs onnxref@reduced" in again.output
    # the reference computes the node as it did inside the model: the written run pins the disagreement down
    reference = run_cli("run", out, "--backend", "onnxref", "--load-inputs", inputs, "--load-outputs", outputs)
    assert reference.exit_code == 0, reference.output


def test_a_reduction_whose_reader_goes_away_still_writes_the_reduced_model(tmp_path):
    """``cmpx reduce ... | head -1``: the lines after the reader closed the pipe are dropped, not the reduction
    (it ended at the next line, exit 1 as a mismatch, with nothing written). So for precision and tolerances."""
    model = modelgen.save(modelgen.two_faults(), tmp_path / "two_faults.onnx")
    out = tmp_path / "reduced.onnx"
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "reduce", str(model), "--backend", "onnxrt",
                                "--backend", "onnxref", "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline()
    process.stdout.close()  # as head -1 does
    errors = process.communicate(timeout=120)[1].decode()
    assert process.returncode == 1 and "rror" not in errors, errors
    assert _kept(out) == ["node20_BatchNormalization"]


def test_ctrl_c_writes_the_smallest_failing_subgraph_seen(tmp_path):
    """Interrupted after a candidate failed, cmpx reduce writes that candidate (it wrote nothing, losing minutes of
    search), says it is unfinished, and exits 130; reducing what it wrote goes on from there. Each run here takes a
    second (a backend that sleeps in inference) so that the interrupt lands in the middle of the search."""
    import signal

    from conftest import REPO, interruptible

    model = modelgen.save(modelgen.two_faults(), tmp_path / "two_faults.onnx")
    out = tmp_path / "reduced.onnx"
    slow = ["--backend", "faulty", "-p", "cmpx_test_faulty", "--faulty-fault", "infer:sleep"]
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "reduce", str(model), *slow, "--backend", "onnxref",
                                "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=interruptible)
    printed = []
    for line in process.stdout:
        printed.append(line)
        if re.match(r"candidate \d+ \(.*\): .*FAILED.*nodes left: \d+$", line.strip()):
            break
    process.send_signal(signal.SIGINT)
    printed.append(process.communicate(timeout=60)[0])
    said = "".join(printed)
    assert process.returncode == 130, said
    left = int(re.findall(r"nodes left: (\d+)", said)[-1])
    assert re.search(rf"interrupted after \d+ candidate\(s\): wrote the smallest failing subgraph seen, {left} of "
                     rf"60 node\(s\), to {re.escape(str(out))}", said), said
    assert 0 < len(_kept(out)) == left < 60
    again = subprocess.run([sys.executable, "-m", "cmpx", "run", str(out), "--backend", "onnxref", "--load-inputs",
                            str(tmp_path / "reduced.inputs"), "--load-outputs", str(tmp_path / "reduced.outputs")],
                           capture_output=True, text=True, cwd=REPO, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr  # what was written is the reference's own run


def test_the_reduced_models_data_as_polygraphy_json_makes_polygraphy_fail_on_it_too(run_cli, tmp_path):
    """#29 item 6: --save-inputs/--save-outputs ending in .json write Polygraphy's files, and cmpx prints the
    polygraphy run line that checks the reduced model; Polygraphy fails on it as cmpx does."""
    model = modelgen.save(modelgen.two_faults(), tmp_path / "two_faults.onnx")
    out, inputs, outputs = tmp_path / "reduced.onnx", tmp_path / "in.json", tmp_path / "golden.json"
    result = run_cli("reduce", model, "--backend", "onnxrt", "--backend", "onnxref", "-o", out, "--save-inputs",
                     inputs, "--save-outputs", outputs, "--atol", "1e-4")
    assert result.exit_code == 1, result.output
    assert f"wrote {out}, its inputs {inputs} and onnxref's outputs {outputs}" in result.output
    assert not (tmp_path / "reduced.inputs").exists() and not (tmp_path / "reduced.outputs").exists()
    line = next(l for l in result.output.splitlines() if l.startswith("with Polygraphy: "))
    fresh = tmp_path / "fresh.onnx"
    same = run_cli("reduce", model, "--backend", "onnxrt", "--backend", "onnxref", "-o", fresh, "--save-inputs", fresh)
    assert same.exit_code == 2 and "-o, --save-inputs and --save-outputs must name three different paths" in same.output
    assert line == (f"with Polygraphy: polygraphy run {out} --onnxrt --load-inputs {inputs} --load-outputs "
                    f"{outputs} --atol 1e-4")
    assert json.loads(outputs.read_text())["polygraphy_class"] == "RunResults"
    words = shlex.split(line.removeprefix("with Polygraphy: "))
    polygraphy = subprocess.run([os.path.join(os.path.dirname(sys.executable), "polygraphy"), *words[1:]],
                                capture_output=True, text=True, timeout=300)
    assert polygraphy.returncode != 0, polygraphy.stdout + polygraphy.stderr
    assert "FAILED" in polygraphy.stdout + polygraphy.stderr
    assert "t20" in polygraphy.stdout + polygraphy.stderr  # the output it compared, by name


def test_a_crash_on_one_op_type_reduces_to_that_node(run_cli, tmp_path):
    model = modelgen.save(modelgen.two_faults(24, batchnorm_at=None, softmax_at=13), tmp_path / "chain.onnx")
    out = tmp_path / "crash.onnx"
    result = run_cli("reduce", model, "--backend", "crashing", "--crashing-op", "Softmax", "--backend", "onnxrt",
                     "--fail-on", "crash", "-o", out, plugins=["cmpx_test_crashing"])
    assert result.exit_code == 1, result.output
    assert "full model: FAILED (crash: crashing signal SIGSEGV during infer)" in result.output
    assert result.output.strip().splitlines()[-1].endswith("kept 1 of 24 node(s): node13_Softmax (Softmax)")
    assert any("passed" in line for line in _candidates(result.output))  # the candidates without it
    # the crash is the Softmax's, not the backend's on any model: a node unlike it passes
    assert "(check): 1 node: node0_Add (Add), unlike the node(s) kept: passed" in result.output
    assert _kept(out) == ["node13_Softmax"]
    again = run_cli("run", out, "--backend", "crashing", "--load-inputs", tmp_path / "crash.inputs",
                    plugins=["cmpx_test_crashing"])
    assert again.exit_code == 3 and "SIGSEGV" in again.output


def test_a_full_model_that_shows_both_a_crash_and_a_mismatch_fails_on_either(run_cli, tmp_path):
    """Three backends: one crashes on the Softmax (node 13), the other two disagree from the BatchNormalization
    (node 5) on. Failing means either, by default; the first failing part is the BatchNormalization's mismatch."""
    model = modelgen.save(modelgen.two_faults(16, batchnorm_at=5, softmax_at=13), tmp_path / "chain.onnx")
    out = tmp_path / "r.onnx"
    result = run_cli("reduce", model, "--backend", "crashing", "--crashing-op", "Softmax", "--backend", "onnxrt",
                     "--backend", "onnxref", "-o", out, plugins=["cmpx_test_crashing"])
    assert result.exit_code == 1, result.output
    assert "| failing means: either (what the full model showed)" in result.output
    assert result.output.strip().splitlines()[-1].endswith("kept 1 of 16 node(s): node5_BatchNormalization "
                                                            "(BatchNormalization)")
    assert "(check)" not in result.output  # what is kept fails by a mismatch: no backend failure to check


def test_a_backend_that_fails_on_any_model_is_not_reduced_to_the_first_node(run_cli, tmp_path):
    """A backend that cannot run here (as TensorRT without a GPU) fails every candidate the same way, down to the
    first node: one more candidate, a node unlike it, fails too, so nothing is written and the exit is 3."""
    model = modelgen.save(modelgen.two_faults(12, batchnorm_at=None, softmax_at=None), tmp_path / "chain.onnx")
    out = tmp_path / "r.onnx"
    result = run_cli("reduce", model, "--backend", "faulty", "--faulty-fault", "load:raise", "--backend", "onnxrt",
                     "-o", out, plugins=["cmpx_test_faulty"])
    assert result.exit_code == 3, result.output
    assert "candidate 5 (check): 1 node: node1_Mul (Mul), unlike the node(s) kept: FAILED (error" in result.output
    assert result.output.strip().splitlines()[-1] == (
        "cannot reduce: faulty failed the same way on node1_Mul (Mul) alone: it fails on any model, not because of "
        "a part of this one (exit 3)")
    assert not out.exists() and not (tmp_path / "r.inputs").exists()


def test_an_fp16_failure_of_a_real_network(run_cli, tmp_path):
    """fp16 against fp32 on the first stages of an exported RegNet: the subgraph kept fails in fp16 by itself,
    and the same subgraph in fp32 matches the reference's saved outputs: the error is fp16's."""
    out = tmp_path / "fp16.onnx"
    tolerances = ("--atol", "1e-3", "--rtol", "1e-3")
    result = run_cli("reduce", MODELS / "regnet_stages12.onnx", "--backend", "onnxrt:fp16", "--backend", "onnxrt",
                     "--input-shapes", "input:[1,3,32,32]", *tolerances, "-o", out)
    assert result.exit_code == 1, result.output
    kept = _kept(out)
    assert 1 <= len(kept) < 37
    assert result.output.strip().splitlines()[-1].startswith(f"{len(_candidates(result.output))} candidate(s) in")
    # the command printed to reproduce it carries the tolerances it failed at
    assert re.search(r"reproduce: cmpx run \S+ --backend onnxrt:fp16 --load-inputs \S+ --load-outputs \S+ --atol 1e-3 "
                     r"--rtol 1e-3  -> FAILED", result.output), result.output
    written = ("--load-inputs", tmp_path / "fp16.inputs", "--load-outputs", tmp_path / "fp16.outputs", *tolerances)
    fp16 = run_cli("run", out, "--backend", "onnxrt:fp16", *written)
    assert fp16.exit_code == 1, fp16.output
    fp32 = run_cli("run", out, "--backend", "onnxrt", *written)
    assert fp32.exit_code == 0, fp32.output


def test_keep_fp32_follows_each_candidate_and_the_reproduce_line(run_cli, tmp_path):
    """--keep-fp32 names nodes or op types of the full model: a candidate without them runs (it is not 'could not
    run' for naming what was cut away), and the printed reproduce line keeps those the written model has, so it
    runs what was checked."""
    out = tmp_path / "kept.onnx"
    result = run_cli("reduce", MODELS / "regnet_stages12.onnx", "--backend", "onnxrt:fp16", "--backend", "onnxrt",
                     "--input-shapes", "input:[1,3,32,32]", "--atol", "1e-3", "--rtol", "1e-3", "--keep-fp32", "Add",
                     "Relu", "-o", out)
    assert result.exit_code == 1, result.output
    assert "could not run" not in result.output, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("reproduce: "))
    assert "  -> FAILED" in line, line
    kept_types = {node.op_type for node in onnx.load(str(out)).graph.node}
    shown = line.partition("--keep-fp32 ")[2].split(" --")[0].split()
    assert shown == [op for op in ("Add", "Relu") if op in kept_types] != [], (line, kept_types)
    words = shlex.split(line.removeprefix("reproduce: cmpx ").partition("  -> ")[0])
    again = run_cli(*words)  # the command as printed runs and fails as the check did
    assert again.exit_code == 1, again.output


def test_external_weights_are_read_where_they_are_and_the_result_stands_alone(run_cli, tmp_path):
    """A model whose weights live in an external file (as models over 2 GB must), reduced into another directory:
    the written model carries the weights its node uses, runs from there, and the source's weights are untouched."""
    source = tmp_path / "source"
    source.mkdir()
    model = modelgen.save_with_external_data(modelgen.two_faults(24, batchnorm_at=9, softmax_at=None), source)
    weights = (source / "weights.bin").read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run_cli("reduce", model, "--backend", "onnxrt", "--backend", "onnxref", "-o", elsewhere / "r.onnx")
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1].endswith("kept 1 of 24 node(s): node9_BatchNormalization "
                                                            "(BatchNormalization)")
    assert (source / "weights.bin").read_bytes() == weights
    written = onnx.load(str(elsewhere / "r.onnx"), load_external_data=False)
    assert {w.name for w in written.graph.initializer} == {"bn_scale", "bn_bias", "bn_mean", "bn_var"}
    assert all(w.data_location == onnx.TensorProto.DEFAULT for w in written.graph.initializer)
    again = run_cli("run", elsewhere / "r.onnx", "--backend", "onnxrt", "--load-inputs", elsewhere / "r.inputs",
                    "--load-outputs", elsewhere / "r.outputs")
    assert again.exit_code == 1 and "FAILED  t9" in again.output, again.output


def test_a_model_that_passes_has_nothing_to_reduce(run_cli, cmpx_models, tmp_path):
    out = tmp_path / "reduced.onnx"
    result = run_cli("reduce", cmpx_models.matmul_chain(layers=3), "--backend", "onnxrt", "--backend", "onnxref",
                     "-o", out)
    assert result.exit_code == 0, result.output
    assert "the full model passes: nothing to reduce" in result.output
    assert not out.exists() and not (tmp_path / "reduced.inputs").exists()


def test_backends_that_cannot_run_the_model_at_all(run_cli, tmp_path):
    model = modelgen.save(modelgen.two_faults(8, batchnorm_at=None, softmax_at=None), tmp_path / "chain.onnx")
    both = run_cli("reduce", model, "--backend", "crashing", "--crashing-op", "Add", "--backend", "faulty",
                   "--faulty-fault", "infer:segfault", "-o", tmp_path / "r.onnx",
                   plugins=["cmpx_test_crashing", "cmpx_test_faulty"])
    assert both.exit_code == 3, both.output
    assert "no backend that marks tensors ran the full model" in both.output
    # why each backend failed on the full model, in full, before the verdict on the reduction
    assert "  faulty failed during infer: " in both.output and "  crashing failed during infer: " in both.output
    mismatch = run_cli("reduce", model, "--backend", "crashing", "--crashing-op", "Add", "--backend", "onnxrt",
                       "--fail-on", "mismatch", "-o", tmp_path / "r.onnx", plugins=["cmpx_test_crashing"])
    assert mismatch.exit_code == 3, mismatch.output
    assert "the full model shows no mismatch" in mismatch.output


@pytest.mark.parametrize("args, message", [
    (("--backend", "onnxrt", "--backend", "onnxref", "--load-outputs", "x"), "does not take --load-outputs"),
    (("--backend", "onnxrt", "--backend", "onnxref", "--mark-all"), "does not take --mark-all"),
    (("--backend", "onnxrt"), "give at least two --backend"),
    (("--backend", "onnxrt", "--backend", "onnxref", "--atol", "nope"), "--atol"),
])
def test_bad_usage_is_refused_before_anything_runs(run_cli, cmpx_models, tmp_path, args, message):
    result = run_cli("reduce", cmpx_models.conv(), *args, "-o", tmp_path / "r.onnx")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "full model" not in result.output


def test_it_will_not_overwrite_the_model_or_its_weights(run_cli, tmp_path):
    """-o the model itself (by another spelling), its weights file, or a path whose OUT.data (where weights over
    1 GiB go) is its weights file."""
    model = str(tmp_path / "model.onnx")
    onnx.save(modelgen.two_faults(8, batchnorm_at=3, softmax_at=None), model, save_as_external_data=True,
              location="r.onnx.data", size_threshold=0)
    before = (Path(model).read_bytes(), (tmp_path / "r.onnx.data").read_bytes())
    for out in (tmp_path / "." / "model.onnx", tmp_path / "r.onnx.data", tmp_path / "r.onnx"):
        result = run_cli("reduce", model, "--backend", "onnxrt", "--backend", "onnxref", "-o", out)
        assert result.exit_code == 2, result.output
        assert result.output.startswith("Error: ") and len(result.output.strip().splitlines()) == 1, result.output
        assert "which the model being reduced reads; write the reduced model elsewhere" in result.output
    assert (Path(model).read_bytes(), (tmp_path / "r.onnx.data").read_bytes()) == before


def test_a_missing_model_or_reference_is_one_line_before_anything_runs(run_cli, tmp_path):
    for args in (("nope.onnx", "--backend", "onnxrt", "--backend", "onnxref"),
                 (modelgen.save(modelgen.two_faults(4, None, None), tmp_path / "m.onnx"), "--backend", "onnxrt",
                  "--backend", "onnxref", "--reference", "nobody")):
        result = run_cli("reduce", *args, "-o", tmp_path / "r.onnx")
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert "model file not found" in result.output or "--reference 'nobody'" in result.output


def test_it_will_not_write_into_a_run_already_there(run_cli, cmpx_models, tmp_path):
    (tmp_path / "r.inputs").mkdir()
    (tmp_path / "r.inputs" / "keep.txt").write_text("mine")
    result = run_cli("reduce", cmpx_models.conv(), "--backend", "onnxrt", "--backend", "onnxref", "-o",
                     tmp_path / "r.onnx")
    assert result.exit_code == 2, result.output
    assert "r.inputs" in result.output


def test_help_names_its_options_and_takes_the_run_options(run_cli):
    result = run_cli("reduce", "--help")
    assert result.exit_code == 0
    assert "--fail-on [mismatch|crash|any]" in result.output and "-o, --output" in result.output
    assert "Every option of 'cmpx run'" in result.output


def test_weights_in_another_directory_with_external_data_dir(run_cli, tmp_path):
    """--external-data-dir (weights not beside the model): reduce cuts candidates with those weights, and
    --local-error runs its subgraphs with them; neither needs the option on the reduced model."""
    source = tmp_path / "source"
    source.mkdir()
    model = Path(modelgen.save_with_external_data(modelgen.two_faults(24, batchnorm_at=9, softmax_at=None), source))
    weights = tmp_path / "weights"
    weights.mkdir()
    (source / "weights.bin").rename(weights / "weights.bin")
    result = run_cli("reduce", model, "--backend", "onnxrt", "--backend", "onnxref", "--external-data-dir", weights,
                     "-o", tmp_path / "r.onnx")
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1].endswith("kept 1 of 24 node(s): node9_BatchNormalization "
                                                            "(BatchNormalization)")
    again = run_cli("run", tmp_path / "r.onnx", "--backend", "onnxrt", "--load-inputs", tmp_path / "r.inputs",
                    "--load-outputs", tmp_path / "r.outputs")
    assert again.exit_code == 1 and "FAILED  t9" in again.output, again.output
    local = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--external-data-dir", weights,
                    "--mark-all", "--local-error")
    assert local.exit_code == 1, local.output
    assert "1 of 24 node output(s) fail on their own" in local.output, local.output
    assert "  FAILED  t9 (node9_BatchNormalization, BatchNormalization): max abs " in local.output


def test_a_candidate_of_identities_on_weights_compares_them(run_cli, tmp_path):
    """Exporters start graphs with Identity nodes on weights: a candidate made of them takes no graph input. Its
    inputs run has iterations without tensors, and it compares the weights: under fp16 they are rounded, a real
    difference, kept with its tensor named. Before, the inputs run read back as no iteration, the candidate compared
    nothing, and that counted as failing ('FAILED (mismatch: )'), even for weights fp16 keeps exactly."""
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.linspace(0.3, 3.3, 4).astype(np.float32), "W")  # not exact in fp16
    nodes = [helper.make_node("Identity", ["W"], ["W2"], name="id0"),
             helper.make_node("Mul", ["X", "W2"], ["m"], name="mul"),
             helper.make_node("Exp", ["m"], ["Y"], name="exp")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])], [weight])
    model = tmp_path / "idfirst.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    result = run_cli("reduce", model, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "-o", tmp_path / "r.onnx")
    assert result.exit_code == 1, result.output
    assert "1 node: id0 (Identity): FAILED (mismatch: onnxrt:fp16 vs onnxrt: W2)" in result.output, result.output
    assert "(mismatch: )" not in result.output and "-> FAILED (mismatch: onnxrt:fp16 vs onnxrt@r: W2)" in \
        result.output, result.output


def test_a_model_without_inputs_saves_and_loads_its_iterations(run_cli, tmp_path):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph([helper.make_node("Identity", ["W"], ["Y"])], "g", [],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])],
                              [numpy_helper.from_array(np.arange(4, dtype=np.float32), "W")])
    model = tmp_path / "noin.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    saved = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--iterations", "2",
                    "--save-inputs", tmp_path / "in")
    assert saved.exit_code == 0, saved.output
    loaded = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--load-inputs", tmp_path / "in")
    assert loaded.exit_code == 0, loaded.output
    assert "over 2 iteration(s), 2 output(s)" in loaded.output, loaded.output


def test_printed_commands_run_as_printed_in_either_tool():
    """Per-output tolerances after one flag (Polygraphy keeps only the last of a repeated flag, so the default
    would check the rest), quoted paths, and the model type Polygraphy cannot tell from a name without .onnx."""
    from cmpx.reduce.command_lines import polygraphy_command
    from cmpx.options.request import RunRequest
    from cmpx.options.words import request_words
    from cmpx.options.table import COMPARISON

    words = request_words(RunRequest(atol=("1e-9", "M:1")), (COMPARISON,))
    assert words[:3] == ["--atol", "1e-9", "M:1"] and words.count("--atol") == 1
    line = polygraphy_command("my dir/reduced", "in.json", "g$old.json", ["onnxrt"], words)
    assert line == ("polygraphy run 'my dir/reduced' --model-type onnx --onnxrt --load-inputs in.json --load-outputs "
                    "'g$old.json' --atol 1e-9 M:1")
    assert polygraphy_command("r.onnx", "in", "g.json", ["onnxrt"], []) is None  # a cmpx run Polygraphy cannot read
    assert polygraphy_command("r.onnx", "i.json", "g.json", ["onnxref"], []) is None  # no such Polygraphy runner


def test_node_lists_from_files_apply_to_the_full_model_and_every_candidate(run_cli, tmp_path):
    """--keep-fp32 @FILE and --no-quantize @FILE (what cmpx precision writes) are read by cmpx reduce: the fp16
    model with x + 65504 - 65504 kept in float32 by a file reduces to the other planted island (power16), not to
    sub_big, where it reduces without the file; the int8 model with its outlier MatMul left out by a file passes."""
    pair = tmp_path / "pair.txt"
    pair.write_text("# kept by cmpx precision\nadd_big\nsub_big\n")
    islands = modelgen.save(modelgen.fp16_islands(), tmp_path / "islands.onnx")
    result = run_cli("reduce", islands, "--backend", "onnxref:fp16", "--backend", "onnxref", "--val-range",
                     "X:[1,2.5]", "--atol", "1e-2", "--rtol", "2e-2", "--keep-fp32", f"@{pair}", "-o",
                     tmp_path / "r.onnx")
    assert result.exit_code == 1, result.output
    assert result.output.strip().endswith("kept 1 of 14 node(s): power16 (Mul)"), result.output
    outlier = tmp_path / "outlier.txt"
    outlier.write_text("outlier_matmul\n")
    model = modelgen.save(modelgen.int8_outlier(), tmp_path / "outlier.onnx")
    result = run_cli("reduce", model, "--backend", "onnxrt:int8", "--backend", "onnxrt", "--atol", "1e-2", "--rtol",
                     "5e-2", "--no-quantize", f"@{outlier}", "-o", tmp_path / "r2.onnx")
    assert result.exit_code == 0 and "the full model passes: nothing to reduce" in result.output, result.output
