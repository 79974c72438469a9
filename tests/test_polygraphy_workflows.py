"""Polygraphy's workflows as its users write them (issue #16): its command lines, its files both ways, top-k and
index comparison, and the "Coming from Polygraphy" table (docs/polygraphy.md), every row of which runs here
(Polygraphy's side too, where it runs without a GPU)."""

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from cmpx.comparison.postprocess import top_k_indices
from conftest import REPO

POLYGRAPHY = os.path.join(os.path.dirname(sys.executable), "polygraphy")
EXAMPLE = REPO / "examples" / "models" / "conv.onnx"
DATA_SCRIPT = "import numpy as np\ndef load_data():\n    for i in range(2):\n        yield {'X': np.full((1, 3, 8, 8), 0.1 * i, np.float32)}\n"


def _table_rows():
    text = (REPO / "docs" / "polygraphy.md").read_text()
    section = text[text.index("# Coming from Polygraphy"):text.index("## What differs on purpose")]
    rows = []
    for line in section.splitlines():
        cells = re.findall(r"`((?:polygraphy|cmpx) run [^`]*)`", line)
        if len(cells) >= 2 and cells[0].startswith("polygraphy"):
            rows.append((cells[0], cells[-1]))
    return rows


def _run(command: str, cwd) -> subprocess.CompletedProcess:
    words = shlex.split(command)
    assert words[0] == "polygraphy", command
    return subprocess.run([POLYGRAPHY, *words[1:]], capture_output=True, text=True, cwd=cwd, timeout=300)


def _chains(rows):
    """The table's rows in chains: a row that loads what an earlier row saved runs after it, in its chain; the
    chains are independent (each its own test, so that a parallel suite spreads them)."""
    chains: list[list[tuple[str, str]]] = []
    saved: dict[str, int] = {}  # a path a row writes -> its chain
    for row in rows:
        words = shlex.split(row[1])
        read = [words[i + 1] for i, word in enumerate(words[:-1]) if word.startswith("--load")]
        chain = next((saved[path] for path in read if path in saved), None)
        if chain is None:
            chain = len(chains)
            chains.append([])
        chains[chain].append(row)
        saved.update(dict.fromkeys((words[i + 1] for i, word in enumerate(words[:-1]) if word.startswith("--save")),
                                   chain))
    return chains


def test_the_polygraphy_page_table_has_its_rows():
    rows = _table_rows()
    assert len(rows) >= 14
    assert sum(map(len, _chains(rows))) == len(rows) and len(_chains(rows)) < len(rows)  # some rows read others'


@pytest.mark.parametrize("chain", _chains(_table_rows()), ids=lambda chain: chain[0][1].split(" ", 3)[-1][:40])
def test_the_polygraphy_page_table_runs_row_by_row_in_both_tools(chain, tmp_path, cmpx_here, no_leaks):
    # cmpx's rows run in this process (the same words through the same CLI), Polygraphy's as processes
    for side in ("polygraphy", "cmpx"):
        (tmp_path / side).mkdir()
        shutil.copy(EXAMPLE, tmp_path / side / "model.onnx")
        (tmp_path / side / "data.py").write_text(DATA_SCRIPT)
    for polygraphy, cmpx in chain:
        if "--trt" not in polygraphy:  # no GPU here: Polygraphy's TensorRT runner cannot run
            theirs = _run(polygraphy, tmp_path / "polygraphy")
            assert theirs.returncode == 0, f"{polygraphy}\n{theirs.stdout[-2000:]}{theirs.stderr[-2000:]}"
        with contextlib.chdir(tmp_path / "cmpx"):
            ours = cmpx_here(*shlex.split(cmpx)[1:])
        assert ours.returncode == 0, f"{cmpx}\n{ours.stdout[-3000:]}{ours.stderr[-2000:]}"


def test_polygraphy_reads_what_cmpx_writes_and_cmpx_reads_what_polygraphy_writes(tmp_path, run_cli):
    written = run_cli("run", EXAMPLE, "--onnxrt", "--iters", "2", "--save-inputs", tmp_path / "in.json",
                      "--save-results", tmp_path / "golden.json")
    assert written.exit_code == 0, written.output
    document = json.loads((tmp_path / "golden.json").read_text())
    assert document["polygraphy_class"] == "RunResults" and document["lst"][0][0] == "onnxrt"
    assert len(document["lst"][0][1]) == 2 and document["lst"][0][1][0]["polygraphy_class"] == "IterationResult"
    theirs = subprocess.run([POLYGRAPHY, "run", str(EXAMPLE), "--onnxrt", "--load-inputs", str(tmp_path / "in.json"),
                             "--load-outputs", str(tmp_path / "golden.json")], capture_output=True, text=True,
                            timeout=300)
    assert theirs.returncode == 0 and "Passed: 2/2 iterations" in theirs.stdout + theirs.stderr, theirs.stdout
    subprocess.run([POLYGRAPHY, "run", str(EXAMPLE), "--onnxrt", "--iterations", "3", "--save-inputs",
                    str(tmp_path / "pg-in"), "--save-outputs", str(tmp_path / "pg-out")], check=True,
                   capture_output=True, timeout=300)
    assert sorted(os.listdir(tmp_path / "pg-out")) == [f"{i:010d}.json" for i in range(3)]
    ours = run_cli("run", EXAMPLE, "--onnxrt", "--load-inputs", tmp_path / "pg-in", "--load-outputs",
                   tmp_path / "pg-out")
    assert ours.exit_code == 0, ours.output
    assert "3 comparison(s) over 3 iteration(s)" in ours.output  # every saved iteration, streamed file by file


def _classifier(tmp_path):
    graph = helper.make_graph([helper.make_node("Identity", ["logits_in"], ["logits"])], "cls",
                              [helper.make_tensor_value_info("logits_in", TensorProto.FLOAT, [2, 10])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10])])
    path = tmp_path / "cls.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return path


@pytest.mark.parametrize("tolerance, expected", [("0", 1), ("1", 0)])
def test_top_k_and_indices_give_polygraphys_verdicts(tmp_path, run_cli, tolerance, expected):
    model = _classifier(tmp_path)
    subprocess.run([POLYGRAPHY, "run", str(model), "--onnxrt", "--save-inputs", str(tmp_path / "in.json"),
                    "--save-outputs", str(tmp_path / "golden.json")], check=True, capture_output=True, timeout=300)
    golden = json.loads((tmp_path / "golden.json").read_text())
    from cmpx.saved.polygraphy_writer import encode_array
    from cmpx.saved.opening import open_saved

    values = open_saved(str(tmp_path / "golden.json"), "outputs").sources[0].load(0)["logits"].copy()
    order = np.argsort(-values[0])
    values[0, order[1]], values[0, order[2]] = values[0, order[2]], values[0, order[1]]  # swap ranks 2 and 3
    golden["lst"][0][1][0]["outputs"]["logits"]["values"] = encode_array(values)
    (tmp_path / "swapped.json").write_text(json.dumps(golden))
    args = ["--load-inputs", str(tmp_path / "in.json"), "--load-outputs", str(tmp_path / "swapped.json"),
            "--postprocess", "top-3", "--compare", "indices", "--index-tolerance", tolerance]
    theirs = subprocess.run([POLYGRAPHY, "run", str(model), "--onnxrt", *args], capture_output=True, text=True,
                            timeout=300)
    ours = run_cli("run", model, "--onnxrt", *args)
    assert theirs.returncode == ours.exit_code == expected, ours.output + theirs.stdout[-2000:]


def test_top_k_ranks_unsigned_and_boolean_outputs_correctly_where_polygraphy_does_not():
    assert top_k_indices(np.array([0, 1, 200, 3], np.uint8), 2, -1).tolist() == [2, 3]  # Polygraphy: [0, 2]
    assert top_k_indices(np.array([False, True, True]), 2, -1).tolist() == [1, 2]  # Polygraphy: TypeError
    assert top_k_indices(np.array([1.0, np.nan, 3.0, 2.0]), 3, -1).tolist() == [2, 3, 0]  # NaN last, as there
    x = np.array([[0.1, 0.9, 0.5, 0.9, 0.3], [5, 1, 5, 2, 5]], np.float32)
    assert top_k_indices(x, 3, -1).tolist() == [[1, 3, 2], [0, 2, 4]]  # ties: the lower index first
    assert top_k_indices(np.array([np.iinfo(np.int64).min, 0, 5]), 1, -1).tolist() == [2]


def test_polygraphy_options_cmpx_lacks_are_named_with_what_to_use_instead(run_cli):
    for flag, advice in (("--sequential-runners", "in a worker process of its own"),
                         ("--fp-to-fp16", "--backend NAME:fp16"),
                         ("--save-heatmaps", "--save-error-plots DIR"),
                         ("--precision-constraints", "strongly typed")):
        result = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", flag, "x")
        assert result.exit_code == 2, result.output
        assert f"Error: {flag} is a Polygraphy option that cmpx does not have: " in result.output
        assert advice in result.output


def test_external_data_elsewhere_warm_up_and_a_log_file(run_cli, tmp_path):
    from cmpx.testing import models

    (tmp_path / "model").mkdir()
    (tmp_path / "weights").mkdir()
    onnx.save(models.conv_model(), str(tmp_path / "model" / "m.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    os.rename(tmp_path / "model" / "w.bin", tmp_path / "weights" / "w.bin")
    missing = run_cli("run", tmp_path / "model" / "m.onnx", "--onnxrt", "--onnxref")
    assert missing.exit_code == 2, missing.output  # found missing before any backend starts, and the fix named
    assert missing.output.strip().splitlines() == [
        f"Error: {tmp_path / 'model' / 'm.onnx'} keeps weights in w.bin, which is not beside it "
        f"({tmp_path / 'model' / 'w.bin'} is missing); put it there, or give --external-data-dir DIR, the directory "
        "that holds it"]
    found = run_cli("run", tmp_path / "model" / "m.onnx", "--onnxrt", "--onnxref", "--backend", "onnxrt:fp16",
                    "--ext", tmp_path / "weights", "--atol", "1e-2", "--rtol", "1e-2", "--warm-up", "2",
                    "--log-file", tmp_path / "log.txt", "--mark-all")
    assert found.exit_code == 0, found.output
    log = (tmp_path / "log.txt").read_text()
    assert log.splitlines()[-1] == found.output.strip().splitlines()[-1]  # the same report, in the file too


def test_warm_up_runs_untimed_inferences_first(run_cli, tmp_path):
    stamp = tmp_path / "calls"
    result = run_cli("run", EXAMPLE, "--backend", "faulty", "--backend", "onnxrt", "-p", "cmpx_test_faulty",
                     "--warm-up", "3", "--iterations", "2", env={"CMPX_TEST_FAULT_CALLS": str(stamp)})
    assert result.exit_code == 0, result.output
    assert stamp.read_text().count("call") == 3 + 2  # three warm-ups, then the two compared inferences


@pytest.mark.parametrize("words, said", [
    (["debug", "reduce", "model.onnx"], "'debug' is a Polygraphy command that cmpx does not have: 'polygraphy debug "
                                        "reduce' is 'cmpx reduce MODEL"),
    (["inspect", "model", "model.onnx"], "'cmpx tensors MODEL' lists a model's tensors"),
    (["run", "{conv}", "--onnxrt", "--mode", "bisect"], "--mode is a Polygraphy option that cmpx does not have: "
                                                        "cmpx reduce searches by itself"),
    (["run", "{conv}", "--onnxrt", "--check", "polygraphy", "run"], "--check is a Polygraphy option"),
    (["run", "{conv}", "--onnxrt", "--fail-regex", "x"], "--fail-on mismatch|crash|any"),
    (["run", "{conv}", "--onnxrt", "--model-type", "trt-network-script"], "a TensorRT network script builds its "
                                                                          "network in Python code"),
    (["run", "{script}", "--trt"], "is a Python script (a Polygraphy TensorRT network script builds its network in "
                                   "code)"),
])
def test_polygraphys_other_spellings_say_what_cmpx_does_instead(run_cli, tmp_path, words, said):
    """Issue #29, item 5: 'No such command', a bare 'no such option' and 'not a valid ONNX model ... wire type 3'
    for a network script told a Polygraphy user nothing."""
    script = tmp_path / "define_network.py"
    script.write_text("import tensorrt as trt\n")
    conv = str(REPO / "examples" / "models" / "conv.onnx")
    result = run_cli(*[w.format(conv=conv, script=script) for w in words])
    assert result.exit_code == 2, result.output
    assert said in result.output, result.output
    assert "wire type" not in result.output and "No such command" not in result.output


@pytest.mark.parametrize("model_type", ["onnx", "engine"])
def test_model_type_is_accepted_for_the_types_cmpx_runs(run_cli, model_type):
    result = run_cli("run", REPO / "examples" / "models" / "conv.onnx", "--onnxrt", "--onnxref", "--model-type",
                     model_type)
    assert result.exit_code == 0, result.output  # the model file's suffix decides


def _inputs_json(path, **arrays):
    from polygraphy.json import save_json

    save_json([arrays], str(path))
    return path


def test_data_named_otherwise_than_the_input_is_refused_naming_both_and_the_input_map_pairs_them(run_cli, tmp_path):
    """Polygraphy's example 05 feeds 'x' to an input named 'X' (it pairs by position, with a warning). cmpx keeps
    exact names: the error names both sides and the fix (issue #29, item 1)."""
    data = _inputs_json(tmp_path / "lower.json", x=np.ones((1, 3, 8, 8), np.float32))
    refused = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", "--load-inputs", data)
    assert refused.exit_code == 2, refused.output
    assert "no data for input 'X'; the data holds 'x', which no input is named" in refused.output
    assert "--input-map X=x" in refused.output
    mapped = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", "--load-inputs", data, "--input-map", "X=x")
    assert mapped.exit_code == 0, mapped.output
    wrong = run_cli("run", EXAMPLE, "--onnxrt", "--load-inputs", data, "--input-map", "Q=x")
    assert wrong.exit_code == 2 and "'Q' is not a model input" in wrong.output


def test_saved_inputs_holding_more_than_the_models_feed_its_inputs_with_one_warning(run_cli, tmp_path):
    """Polygraphy's layer-wise inputs (its debug-reduce example) hold intermediate tensors too: they are left out,
    said once (issue #29, item 2)."""
    data = tmp_path / "layerwise.json"
    from polygraphy.json import save_json

    save_json([{"X": np.full((1, 3, 8, 8), i, np.float32), "conv_out": np.zeros(4, np.float32)} for i in range(3)],
              str(data))
    result = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", "--load-inputs", data)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if "no model input, left out" in line]
    assert len(warnings) == 1 and "conv_out" in warnings[0], result.output
    assert "3 comparison(s) over 3 iteration(s)" in result.output


ROUND_TRIP_TYPES = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE,
                    TensorProto.INT8, TensorProto.UINT8, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL,
                    TensorProto.FLOAT8E4M3FN]


@pytest.mark.parametrize("suffix", [".json", ""], ids=["polygraphy-json", "cmpx-dir"])
def test_every_dtype_round_trips_through_both_saved_formats(run_cli, tmp_path, suffix):
    """Issue #29, item 3: bf16 inputs were widened to float32 in Polygraphy JSON without the warning, and cmpx then
    refused its own file. Saved and loaded back, every dtype compares exactly, widened types with a warning."""
    names = [TensorProto.DataType.Name(t).lower() for t in ROUND_TRIP_TYPES]
    graph = helper.make_graph([helper.make_node("Identity", [f"x_{n}"], [f"y_{n}"]) for n in names], "id",
                              [helper.make_tensor_value_info(f"x_{n}", t, [6]) for n, t in zip(names, ROUND_TRIP_TYPES)],
                              [helper.make_tensor_value_info(f"y_{n}", t, [6]) for n, t in zip(names, ROUND_TRIP_TYPES)])
    model = tmp_path / "id.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), model)
    inputs, outputs = tmp_path / f"in{suffix}", tmp_path / f"out{suffix}"
    saved = run_cli("run", model, "--backend", "onnxref", "--save-inputs", inputs, "--save-outputs", outputs)
    assert saved.exit_code == 0, saved.output
    widened = [line for line in saved.output.splitlines() if "saved widened to float32, every value exact" in line]
    if suffix == ".json":
        assert len(widened) == 2 and all("bfloat16" in w and "float8" in w for w in widened), widened
    else:
        assert widened == []
    loaded = run_cli("run", model, "--backend", "onnxref", "--load-inputs", inputs, "--load-outputs", outputs,
                     "--atol", "0", "--rtol", "0")
    assert loaded.exit_code == 0, loaded.output
    assert f"{len(names)} output(s), {6 * len(names)} element(s) compared" in loaded.output
