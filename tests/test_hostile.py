"""Hostile machines and inputs (issue #15): full and read-only disks, a reader that goes away, an exhausted
/dev/shm, low descriptor limits, long runs, slow data, external data that leaves the model's directory. Each
test builds what it needs; tests that need a private mount namespace skip, saying why, where one cannot be made."""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from cmpx.testing import models as modelgen
from conftest import REPO, interruptible

EXAMPLE = str(REPO / "examples" / "models" / "conv.onnx")
OK = ("--backend", "onnxrt", "--backend", "onnxref")


def _cmpx(*args, env=None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cmpx", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env=dict(os.environ, **(env or {})), **kwargs)


def _private_mounts() -> str | None:
    """Why a private mount namespace with a small tmpfs cannot be made here, or None if it can."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return "needs root and unshare(1) for a private mount namespace"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1M tmpfs /mnt && echo ok"],
                           capture_output=True, text=True)
    return None if probe.stdout.strip() == "ok" else f"cannot mount a tmpfs: {probe.stderr.strip()}"


def _in_namespace(setup: str, *args: str) -> subprocess.CompletedProcess:
    """``cmpx ARGS`` in a private mount namespace after the shell commands ``setup`` (mounts)."""
    command = f"{setup} && exec {sys.executable} -m cmpx \"$@\""
    return subprocess.run(["unshare", "-m", "sh", "-c", command, "sh", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


@pytest.fixture
def mounts():
    reason = _private_mounts()
    if reason:
        pytest.skip(reason)


def test_a_full_disk_leaves_no_truncated_report_and_says_what_was_kept(mounts, tmp_path):
    target = tmp_path / "small"
    target.mkdir()
    setup = f"mount -t tmpfs -o size=64k tmpfs {target}"
    done = _in_namespace(setup, "run", EXAMPLE, *OK, "--iterations", "40", "--report-json", f"{target}/r.json",
                         "--save-outputs", f"{target}/golden")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--save-outputs" in done.stderr and "No space left on device" in done.stderr
    assert "iteration(s) are kept" in done.stderr or "nothing usable was written" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_full_disk_under_the_json_report_fails_the_run_with_exit_2_and_no_file(mounts, tmp_path):
    target = tmp_path / "small"
    target.mkdir()
    done = _in_namespace(f"mount -t tmpfs -o size=16k tmpfs {target}", "run", EXAMPLE, *OK, "-v",
                         "--iterations", "30", "--report-json", f"{target}/r.json", "--save-error-plots",
                         f"{target}/plots")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "FAILED to write --report-json" in done.stdout and "nothing was written there" in done.stdout
    assert done.stdout.splitlines()[-1].startswith("FAILED (a report was not written)")
    assert done.stdout.splitlines()[-1].endswith("| exit 2")


def test_a_read_only_output_directory_is_refused_before_any_work(mounts, tmp_path):
    target = tmp_path / "ro"
    target.mkdir()
    setup = f"mount -t tmpfs tmpfs {target} && mount -o remount,ro {target}"
    done = _in_namespace(setup, "run", EXAMPLE, *OK, "--report-json", f"{target}/r.json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--report-json {target}/r.json: the directory {target} is not writable" in done.stderr
    assert "loaded" not in done.stdout  # before any backend loaded


def test_a_reader_that_goes_away_does_not_change_the_verdict_or_lose_the_report(tmp_path):
    report = tmp_path / "r.json"
    process = _cmpx("run", EXAMPLE, *OK, "--iterations", "20", "-v", "--report-json", report)
    process.stdout.readline()
    process.stdout.close()  # `cmpx run ... | head -1`
    assert process.wait(timeout=120) == 0, process.stderr.read()
    assert json.loads(report.read_text())["iterations"] == 20
    assert "BrokenPipe" not in process.stderr.read()


def test_a_full_dev_shm_is_an_error_naming_it_before_any_inference(mounts, tmp_path):
    model = modelgen.save(helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"])], "big",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [16, 1024, 1024])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [16, 1024, 1024])]),
        opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "big.onnx")
    done = _in_namespace("mount -t tmpfs -o size=32M tmpfs /dev/shm", "run", model, *OK)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "/dev/shm is full: a segment of 64 MiB needs 64 MiB and /dev/shm has" in done.stderr
    assert "Traceback" not in done.stderr and done.returncode != 135  # never a SIGBUS


def test_a_sparse_npy_declaring_64_gib_is_refused_before_it_is_copied(tmp_path):
    model = modelgen.save(helper.make_model(helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"])], "any",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N"])]),
        opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "any.onnx")
    run = tmp_path / "inputs"
    run.mkdir()
    elements = 16 << 30  # 64 GiB of float32
    with open(run / "x.npy", "wb") as f:
        header = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float32))
        np.lib.format.write_array_header_1_0(f, dict(header, shape=(elements,)))
        f.truncate(f.tell() + 4 * elements)  # sparse: no disk used
    (run / "cmpx-run.jsonl").write_text(
        json.dumps({"format": "cmpx-run", "format_version": 1, "kind": "inputs"}) + "\n" +
        json.dumps({"source": "inputs", "iteration": 0, "tensors": [
            {"name": "X", "file": "x.npy", "dtype": "float32", "shape": [elements]}]}) + "\n")
    started = time.monotonic()
    process = _cmpx("run", model, *OK, "--load-inputs", run)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 2, out + err
    assert "64 GiB" in err and ("/dev/shm" in err or "memory" in err)
    assert time.monotonic() - started < 30  # refused, not copied


def test_mark_all_on_many_tensors_runs_under_the_usual_descriptor_limit(tmp_path):
    """300 tensors x 3 iterations failed with EMFILE at ulimit -n 1024: one descriptor per mapped tensor."""
    nodes, current = [], "X"
    for i in range(300):
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [current], [f"t{i}"], name=f"n{i}"))
        current = f"t{i}"
    nodes.append(helper.make_node("Identity", [current], ["Y"], name="out"))
    model = modelgen.save(helper.make_model(helper.make_graph(
        nodes, "deep", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 4])]),
        opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "deep.onnx")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    process = _cmpx("run", model, *OK, "--mark-all", "--iterations", "3", "-q", preexec_fn=limit)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, out + err
    assert "3/3 iterations passed (100%), 903/903 outputs passed" in out  # 301 tensors, three times


def test_a_long_run_keeps_bounded_results_in_memory_but_reports_every_iteration(run_cli, tmp_path, monkeypatch):
    from cmpx.outcome import results

    monkeypatch.setattr(results, "RETAINED_OUTPUTS", 10)
    report = tmp_path / "r.json"
    result = run_cli("run", EXAMPLE, *OK, "--iterations", "40", "-q", "--report-json", report)
    assert result.exit_code == 0, result.output
    assert "40/40 iterations passed (100%), 80/80 outputs passed" in result.output
    document = json.loads(report.read_text())
    assert len(document["results"]) == 40 and [r["iteration"] for r in document["results"]] == list(range(40))
    assert document["pairs"][0]["iterations"] == 40


def test_retained_results_are_bounded_whatever_the_iteration_count():
    from cmpx.outcome.results import OutputResult, PairResult, RunResult

    result = RunResult(retain_outputs=100)
    for iteration in range(100_000):
        result.add_pair(PairResult("a", "b", iteration, [OutputResult("Y"), OutputResult("Z")]))
    assert len(result.pairs) <= 100 and result.pairs_dropped == 100_000 - len(result.pairs)
    tally = result.tallies[("a", "b")]
    assert tally.iterations == tally.iterations_passed == 100_000 and tally.outputs == 200_000


def test_an_iteration_is_reported_before_the_loader_makes_the_next_feed(tmp_path):
    gate = tmp_path / "gate"
    script = tmp_path / "slow.py"
    script.write_text(
        "import os, time\nimport numpy as np\n"
        "def load_data():\n"
        "    yield {'X': np.ones((1, 3, 8, 8), np.float32)}\n"
        f"    while not os.path.exists({str(gate)!r}):\n"
        "        time.sleep(0.05)\n"
        "    yield {'X': np.zeros((1, 3, 8, 8), np.float32)}\n")
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "run", EXAMPLE, *OK, "--data-loader-script", script],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
                               env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=interruptible)
    started, seen = time.monotonic(), []
    for line in process.stdout:
        seen.append(line)
        if "PASSED  Z" in line:
            break
    assert time.monotonic() - started < 30 and "[iteration 0]" in "".join(seen)  # reported while feed 1 waits
    process.send_signal(signal.SIGINT)  # interrupted while the loader still waits: iteration 0 is kept
    out = process.stdout.read()
    assert process.wait(timeout=30) == 130
    assert "onnxrt vs onnxref: 1/1 iterations passed" in out


def test_transforms_refuse_external_data_outside_the_model_directory(run_cli, tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    weights = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    onnx.external_data_helper.set_external_data(weights, "../outside.bin")
    weights.ClearField("raw_data")
    (tmp_path / "outside.bin").write_bytes(np.ones((4, 4), np.float32).tobytes())
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])], [weights])
    path = model_dir / "m.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    for transform in ("fp16", "int8"):
        result = run_cli("run", path, "--backend", f"onnxrt:{transform}", "--backend", "onnxref")
        assert result.exit_code == 2, result.output
        assert "file entry '../outside.bin' points outside its directory" in result.output
        assert "Traceback" not in result.output


def test_a_transform_that_fails_on_the_model_fails_its_backends_and_the_others_are_compared(run_cli, tmp_path):
    # Calibration runs the model on the run's data: indices past a 10-row table make ONNX Runtime refuse it.
    model = modelgen.save(modelgen.gather_model(rows=10), tmp_path / "gather.onnx")
    result = run_cli("run", model, "--backend", "onnxrt:int8", "--backend", "onnxrt", "--backend", "onnxref",
                     "--val-range", "I:[20,30]")
    assert result.exit_code == 3, result.output
    assert "onnxrt:int8 failed during transform: the int8 transform failed:" in result.output
    assert "Internal error" not in result.output and "Traceback" not in result.output


def test_an_unforeseen_error_is_exit_4_never_a_mismatch(run_cli, monkeypatch):
    from cmpx.comparison import compare

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(compare, "compare_output", broken)
    result = run_cli("run", EXAMPLE, *OK)
    assert result.exit_code == 4
    assert "Internal error: ZeroDivisionError: a bug (exit 4; rerun with --debug" in result.output
    assert "Traceback" not in result.output


EVIL = "Y\n\x1b]0;pwned\x07\x1b[2JPASSED | 1 comparison(s) | exit 0\r\u2028\x9b\u202e"


def _evil_model(path) -> str:
    """A model whose output and node names carry a newline, terminal escapes (title, clear screen, CSI), a carriage
    return, a line separator and a bidi override: a forged PASSED line if printed raw (issue #28, items 1-2)."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["X"], [EVIL], name="node\x1b[31m")], "g", [x],
                              [helper.make_tensor_value_info(EVIL, TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def _no_control(text: str) -> None:
    import re

    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e]", text), repr(text)


def test_names_from_the_model_cannot_steer_the_terminal_or_forge_a_line(run_cli, tmp_path):
    import xml.dom.minidom

    model = _evil_model(tmp_path / "evil.onnx")
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--atol", "0", "--rtol", "0",
                     "--junit", tmp_path / "j.xml", "--log-file", tmp_path / "log.txt", "--mark-all")
    assert result.exit_code == 0, result.output
    _no_control(result.output)
    lines = result.output.splitlines()
    verdicts = [line for line in lines if line.startswith("PASSED |")]  # the one real verdict line
    assert verdicts == ["PASSED | 1 comparison(s) over 1 iteration(s), 1 output(s), 2 element(s) compared | exit 0"]
    assert any("Y\\n\\x1b]0;pwned\\x07\\x1b[2JPASSED" in line for line in lines)  # readable, escaped
    _no_control((tmp_path / "log.txt").read_text())
    document = xml.dom.minidom.parse(str(tmp_path / "j.xml"))  # valid XML 1.0 (CI keeps the report)
    assert "\\x1b" in document.getElementsByTagName("testcase")[0].getAttribute("name")
    listed = run_cli("tensors", model)
    assert listed.exit_code == 0
    _no_control(listed.output)
    assert "node\\x1b[31m" in listed.output
    # an error naming a bad option value escapes it too
    refused = run_cli("run", model, "--backend", "onnxrt", "--atol", f"{EVIL}x:1e-3")
    assert refused.exit_code == 2
    _no_control(refused.output)


def test_printable_escapes_exactly_what_a_terminal_would_obey():
    from cmpx.printable import printable, xml_text

    assert printable("plain name/with:punctuation ünïcode\ttab") == "plain name/with:punctuation ünïcode\ttab"
    assert printable("a\nb\rc\x1bd\x7fe\x9bf\u2028g\u202eh") == "a\\nb\\rc\\x1bd\\x7fe\\x9bf\\u2028g\\u202eh"
    assert xml_text("a\x01b\nc\ud800") == "a\\x01b\nc\\ud800"  # newline is valid XML text; the rest is not


def test_saved_outputs_holding_nothing_are_refused_before_any_inference(run_cli, tmp_path):
    """Polygraphy writes a RunResults of no runner (or a runner of no iteration) when its own inference fails;
    compared against, it was an exit 0 that compared nothing (issue #28, item 4)."""
    from polygraphy.comparator import RunResults

    model = REPO / "examples" / "models" / "conv.onnx"
    empty = RunResults()
    empty.save(str(tmp_path / "none.json"))
    idle = RunResults()
    idle.append(("onnxrt-runner", []))
    idle.save(str(tmp_path / "idle.json"))
    golden = tmp_path / "golden"
    golden.mkdir()
    (golden / "cmpx-run.jsonl").write_text(json.dumps({"format": "cmpx-run", "format_version": 1, "kind": "outputs"})
                                           + "\n" + json.dumps({"complete": True, "iterations": 0}) + "\n")
    for saved, why in ((tmp_path / "none.json", "holds no backend's outputs"),
                       (tmp_path / "idle.json", "onnxrt-runner holds no iteration"), (golden, "holds no backend's")):
        result = run_cli("run", model, "--backend", "onnxrt", "--load-outputs", saved)
        assert result.exit_code == 2, result.output
        assert why in result.output and "nothing to compare against" in result.output
        assert "loaded onnxrt" not in result.output  # before any backend ran


@pytest.mark.parametrize("script, words", [
    ("def load_data():\n    return iter(())\n", "gave no feed: nothing to run"),
    ("import sys\ndef load_data():\n    sys.exit(0)\n    yield {}\n", "load_data() raised SystemExit: 0"),
    ("import sys\nsys.exit(0)\n", "importing it raised SystemExit: 0"),
    ("import numpy as np, sys\ndef load_data():\n    yield {'X': np.zeros((1, 3, 8, 8), np.float32)}\n"
     "    raise SystemExit(0)\n", "load_data() raised SystemExit: 0"),
])
def test_a_data_loader_that_yields_nothing_or_exits_is_that_loaders_failure(run_cli, tmp_path, script, words):
    """A loader yielding nothing was a mismatch (exit 1); one raising SystemExit(0) ended cmpx with exit 0, no
    verdict (issue #28, items 4-5): both are the loader's failure, exit 2, named."""
    path = tmp_path / "loader.py"
    path.write_text(script)
    result = run_cli("run", REPO / "examples" / "models" / "conv.onnx", "--backend", "onnxrt", "--backend",
                     "onnxref", "--data-loader-script", path, "--iterations", "2")
    assert result.exit_code == 2, result.output
    assert words in result.output, result.output


def test_a_saved_run_holding_text_is_refused_naming_the_tensor(run_cli, tmp_path):
    from polygraphy.comparator import IterationResult, RunResults

    results = RunResults()
    results.append(("onnxrt-runner", [IterationResult({"Y": np.array(["ab", "c"])}, runner_name="onnxrt-runner")]))
    results.save(str(tmp_path / "text.json"))
    result = run_cli("run", "--load-outputs", tmp_path / "text.json", tmp_path / "text.json")
    assert result.exit_code == 2, result.output  # was exit 4, a ValueError from the comparator
    assert "onnxrt-runner iteration 0 Y: holds <U2 values (text); cmpx compares and feeds numbers" in result.output


def test_removing_an_environment_that_is_a_link_removes_only_the_link(run_cli, tmp_path, monkeypatch):
    target = tmp_path / "made-elsewhere"
    (target / "bin").mkdir(parents=True)
    (target / "bin" / "python").write_text("")
    (tmp_path / "envs").mkdir()
    os.symlink(target, tmp_path / "envs" / "linked")
    monkeypatch.setenv("CMPX_ENVS_DIR", str(tmp_path / "envs"))
    result = run_cli("env", "remove", "linked")
    assert result.exit_code == 0, result.output  # was exit 4: rmtree refuses a link
    assert "a link; what it pointed to is left as it was" in result.output
    assert not os.path.lexists(tmp_path / "envs" / "linked") and (target / "bin" / "python").exists()


@pytest.mark.parametrize("location", ["../outside.bin", "/etc/hostname"])
@pytest.mark.parametrize("backend", ["onnxrt", "onnxrt:fp16"])
def test_external_weights_outside_the_model_directory_are_refused_alike_for_every_backend(run_cli, tmp_path,
                                                                                          location, backend):
    """The same bad location was exit 3 in a plain run (ONNX Runtime's load error) and exit 2 with :fp16."""
    directory = tmp_path / "model"
    directory.mkdir()
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["X", "w"], ["Y"])], "g", [x],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4])],
                              [numpy_helper.from_array(np.ones(4, np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, directory / "m.onnx", save_as_external_data=True, location="w.bin", size_threshold=0)
    (tmp_path / "outside.bin").write_bytes(np.ones(4, np.float32).tobytes())
    model = onnx.load(directory / "m.onnx", load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    onnx.save(model, directory / "bad.onnx")
    result = run_cli("run", directory / "bad.onnx", "--backend", backend, "--backend", "onnxref")
    assert result.exit_code == 2, result.output
    assert f"file entry {location!r} points outside its directory" in result.output
    assert "loaded" not in result.output


def test_a_saved_run_whose_manifest_is_a_link_out_of_its_directory_is_refused(run_cli, tmp_path):
    model = REPO / "examples" / "models" / "conv.onnx"
    assert run_cli("run", model, "--backend", "onnxrt", "--save-outputs", tmp_path / "real").exit_code == 0
    linked = tmp_path / "linked"
    shutil.copytree(tmp_path / "real" / "0", linked / "0")
    os.symlink(tmp_path / "real" / "cmpx-run.jsonl", linked / "cmpx-run.jsonl")
    result = run_cli("run", model, "--backend", "onnxrt", "--load-outputs", linked)
    assert result.exit_code == 2, result.output
    assert "file entry 'cmpx-run.jsonl' leads outside" in result.output


def test_inputs_larger_than_the_memory_available_are_refused_before_they_are_made(run_cli, tmp_path):
    """An input of 2^40 elements was exit 4 (a MemoryError); an input over a cgroup's limit was killed silently
    (137). Both are one line, exit 2, naming the input and the sizes (issue #28, item 6)."""
    from cmpx.testing import memlimit

    def model(path, shape):
        x = helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)
        graph = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "g", [x],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
        return str(path)

    huge = run_cli("run", model(tmp_path / "huge.onnx", [1 << 20, 1 << 20]), "--backend", "onnxrt")
    assert huge.exit_code == 2, huge.output
    assert "input X [1048576, 1048576] float32 needs 4 TiB, more than the" in huge.output
    problem = memlimit.unavailable()
    if problem:
        pytest.skip(f"the cgroup half: {problem}")
    with memlimit.MemoryCgroup(200 << 20) as cgroup:  # a 512 MiB input in a 200 MiB cgroup
        done = cgroup.run([sys.executable, "-m", "cmpx", "run", model(tmp_path / "big.onnx", [128, 1 << 20]),
                           "--backend", "onnxrt"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "input X [128, 1048576] float32 needs 512 MiB, more than the" in done.stderr


@pytest.mark.parametrize("option, size", [("--save-outputs", "8k"), ("--save-inputs", "8k"), ("--save-outputs", "48k")])
def test_polygraphy_json_onto_a_full_disk_is_exit_2_saying_nothing_was_kept(mounts, tmp_path, option, size):
    """It was exit 4 ('I/O operation on closed file': close() wrote to the file a failed write had abandoned;
    or the spill files' flush on close raised past the message) (issue #28, item 7)."""
    target = tmp_path / "small"
    target.mkdir()
    done = _in_namespace(f"mount -t tmpfs -o size={size} tmpfs {target}", "run", EXAMPLE, "--backend", "onnxrt",
                         "--iterations", "20", option, f"{target}/saved.json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{option} {target}/saved.json: No space left on device; nothing was written there" in done.stderr
    assert "Internal error" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("limit, words", [
    (12, "the limit of open files is 12 (ulimit -n; hard limit 12), under the 32 cmpx needs"),  # was exit 1
    (16, "the limit of open files is 16 (ulimit -n; hard limit 16)"),  # was exit 4
    (40, "too many open files (the limit is 40"),  # ten backends marking every tensor: mid-run, in shared memory
])
def test_running_out_of_open_files_is_exit_2_naming_the_limit(tmp_path, limit, words):
    """Issue #28, item 10: exhaustion of descriptors at any point of the run is exit 2 naming the limit, never a
    traceback, exit 1 (the mismatch code) or exit 4; nothing is left behind."""
    from cmpx.testing.leaks import orphaned_workers

    backends = ["--backend", "onnxrt", "--backend", "onnxref"] * (5 if limit == 40 else 1)
    command = f"ulimit -n {limit}; exec {sys.executable} -m cmpx run {EXAMPLE} {' '.join(backends)} --mark-all"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stderr
    assert "Traceback" not in done.stderr
    assert orphaned_workers() == []


def test_a_low_soft_limit_of_open_files_is_raised_to_the_hard_one():
    done = subprocess.run(["bash", "-c", f"ulimit -Sn 16; exec {sys.executable} -m cmpx run {EXAMPLE} "
                                         f"{' '.join(OK)}"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_coordinators_memory_does_not_grow_with_the_iterations():
    """About 11 KB per iteration were kept on a small model (every per-iteration result, up to 20,000 outputs'
    worth of statistics): the peak of 600 iterations stays within 4 MB of 100's, where that leak kept 5.5 MB more
    (issue #28, item 8)."""
    wrapper = ("import atexit, resource, sys\n"
               "atexit.register(lambda: sys.stderr.write(f'maxrss {resource.getrusage(resource.RUSAGE_SELF)"
               ".ru_maxrss}\\n'))\n"
               "sys.argv = ['cmpx', *sys.argv[1:]]\n"
               "from cmpx.cli.launch import main\n"
               "main()\n")
    peaks = {}
    for iterations in (100, 600):
        done = subprocess.run([sys.executable, "-c", wrapper, "run", EXAMPLE, "--backend", "onnxrt", "--backend",
                               "onnxrt", "--iterations", str(iterations), "-q"], capture_output=True, text=True,
                              timeout=300, cwd=REPO)
        assert done.returncode == 0, done.stdout + done.stderr
        peaks[iterations] = int(done.stderr.rsplit("maxrss ", 1)[1].split()[0])  # KiB
    assert peaks[600] - peaks[100] < 4 * 1024, peaks


def test_running_out_of_processes_is_exit_2_naming_the_limit(run_cli, monkeypatch):
    """Issue #28, item 10, the process half: starting a worker fails with EAGAIN when `ulimit -u` is reached. Root
    (every test here) is exempt from RLIMIT_NPROC, so the kernel's refusal is reproduced at the fork itself."""
    import errno

    def refused(self, *args, **kwargs):
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refused)
    # an environment of its own: spawned workers (the suite's fork server forks its runs' workers; its refusal to
    # fork is tests/test_forkserver.py's)
    result = run_cli("run", EXAMPLE, *OK, env={"CMPX_TEST_SPAWNED": "1"})
    assert result.exit_code == 2, result.output
    assert "cmpx ran out of processes (ulimit -u)" in result.output
