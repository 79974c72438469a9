"""Every malformed input gets a short error (one or two lines) that names the problem and the fix, exit code 2,
before any backend starts, and no traceback unless --debug."""

import base64
import io
import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "models" / "conv.onnx")
OK = ("--backend", "onnxrt", "--backend", "onnxref")
CONTENT = "root:x:0:0:SECRET-CONTENT"  # what hostile files hold, which no message may quote


@pytest.fixture
def files(tmp_path):
    """Broken things on disk, made once per test."""
    data = Path(EXAMPLE).read_bytes()
    made = {"empty.onnx": b"", "truncated.onnx": data[: len(data) // 2], "text.onnx": b"hello, I am not a model\n",
            "garbage.bin": bytes(range(256)) * 4, "bad.json": b'{"lst": [[1, 2]], "polygraphy_class": "RunResults"}'}
    for name, content in made.items():
        (tmp_path / name).write_bytes(content)
    (tmp_path / "raises.py").write_text("def load_data():\n    raise ValueError('broken source')\n    yield\n")
    (tmp_path / "wrong.py").write_text("import numpy as np\ndef load_data():\n    yield {'x': np.zeros(3)}\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("")
    os.mkfifo(tmp_path / "fifo.onnx")
    os.mkfifo(tmp_path / "fifo.txt")
    (tmp_path / "secret.txt").write_text(f"{CONTENT}\n")
    for name, entry in (("absolute", str(tmp_path / "secret.txt")), ("dotdot", "../secret.txt"),
                        ("symlink", "link.npy"), ("fifo", "pipe.npy"), ("notnpy", "text.npy")):
        run = tmp_path / f"run-{name}"
        run.mkdir()
        header = {"format": "cmpx-run", "format_version": 1, "kind": "outputs"}
        record = {"source": "x", "iteration": 0, "tensors": [{"name": "Y", "file": entry, "dtype": "float32",
                                                              "shape": [1]}]}
        (run / "cmpx-run.jsonl").write_text(json.dumps(header) + "\n" + json.dumps(record) + "\n")
    os.symlink(tmp_path / "secret.txt", tmp_path / "run-symlink" / "link.npy")
    os.mkfifo(tmp_path / "run-fifo" / "pipe.npy")
    (tmp_path / "run-notnpy" / "text.npy").write_text(f"{CONTENT}\n")
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.json").write_text(deep)
    (tmp_path / "huge-int.json").write_text('[{"X": ' + "9" * 10_000 + "}]")
    (tmp_path / "huge-array.json").write_text(json.dumps([{"X": _declaring(1 << 44)}]))
    (tmp_path / "damaged-output.json").write_text(json.dumps(
        {"lst": [["r", [{"outputs": {"Y": {"values": _declaring(1 << 20), "polygraphy_class": "LazyArray"}},
                         "runtime": None, "runner_name": "r", "polygraphy_class": "IterationResult"}]]],
         "polygraphy_class": "RunResults"}))
    good = _encoded(np.zeros((1, 3, 8, 8), np.float32))
    (tmp_path / "bad-base64.json").write_text(json.dumps([{"X": dict(good, array=good["array"][:-8] + "!@#$AAAA")}]))
    gap = tmp_path / "polygraphy-gap"
    gap.mkdir()
    for number in (0, 2):  # Polygraphy's per-iteration files, the second one lost
        (gap / f"{number:010d}.json").write_text(json.dumps({"X": good}))
    testset = tmp_path / "escape" / "test_data_set_0"
    testset.mkdir(parents=True)
    proto = numpy_helper.from_array(np.zeros((1, 3, 8, 8), np.float32), "X")
    onnx.external_data_helper.set_external_data(proto, "../../secret.bin")
    proto.ClearField("raw_data")
    (testset / "input_0.pb").write_bytes(proto.SerializeToString())
    (tmp_path / "secret.bin").write_bytes(b"\0" * 4 * 3 * 64)
    return tmp_path


def _encoded(array: np.ndarray) -> dict:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return {"array": base64.b64encode(buffer.getvalue()).decode(), "polygraphy_class": "ndarray"}


def _declaring(elements: int) -> dict:
    """A Polygraphy-encoded array whose .npy header declares ``elements`` float32 values but that holds four."""
    buffer = io.BytesIO()
    header = np.lib.format.header_data_from_array_1_0(np.zeros(4, np.float32))
    np.lib.format.write_array_header_1_0(buffer, dict(header, shape=(elements,)))
    buffer.write(np.zeros(4, np.float32).tobytes())
    return {"array": base64.b64encode(buffer.getvalue()).decode(), "polygraphy_class": "ndarray"}


CASES = [
    # model files
    ("{tmp}/missing.onnx", OK, "model file not found"),
    ("{tmp}/empty.onnx", OK, "model file is empty"),
    ("{tmp}/truncated.onnx", OK, "not a valid ONNX model"),
    ("{tmp}/text.onnx", OK, "not a valid ONNX model"),
    ("{tmp}", OK, "model path is a directory"),
    # backends
    (EXAMPLE, ("--backend", "nope", "--backend", "onnxrt"), "unknown backend 'nope'; available: onnxref, onnxrt"),
    (EXAMPLE, (), "cmpx run needs a --backend to run, or at least two saved runs to compare"),
    (EXAMPLE, (*OK, "--reference", "trt"), "--reference 'trt' is not one of this run's backends: onnxrt, onnxref"),
    # backends under another Python
    (EXAMPLE, (*OK, "--backend", "onnxrt@"), "--backend onnxrt@: name the Python after '@'"),
    (EXAMPLE, (*OK, "--backend", "onnxrt@{tmp}/no/bin/python"), "no/bin/python is not an executable Python"),
    (EXAMPLE, (*OK, "--backend", "onnxrt@{tmp}/garbage.bin"), "garbage.bin is not an executable Python"),
    (EXAMPLE, (*OK, "--backend", "onnxrt@no-such-python3.99"), "no Python 'no-such-python3.99' on the PATH"),
    (EXAMPLE, (*OK, "--backend", "onnxrt@env:never-made"), "make it with: cmpx env create never-made"),
    (EXAMPLE, (*OK, "--backend", "onnxrt@env:../x"), "'../x' is not an environment name"),
    (EXAMPLE, (*OK, "--backend", "nope@env:x"), "unknown backend 'nope'"),
    # input shapes
    (EXAMPLE, (*OK, "--input-shapes", "X:3x128"), "the accepted form is NAME:[D0,D1,...]"),
    (EXAMPLE, (*OK, "--input-shapes", "Q:[1,3,8,8]"), "'Q' is not one of the model inputs: X"),
    (EXAMPLE, (*OK, "--input-shapes", "X:[1,3,8]"), "has rank 4"),
    (EXAMPLE, (*OK, "--input-shapes", "X:[1,4,8,8]"), "dimension 1 is fixed to 3"),
    (EXAMPLE, (*OK, "--input-shapes", "X:[1,-3,8,8]"), "dimension -3 of X is negative"),
    # tolerances and checks
    (EXAMPLE, (*OK, "--atol", "abc"), "--atol: 'abc': 'abc' is not a number"),
    (EXAMPLE, (*OK, "--rtol", "-1"), "is not a tolerance; give a number of 0 or more"),
    (EXAMPLE, (*OK, "--atol", "out9:1e-3"), "--atol: 'out9' is not one of the model outputs: Y, Z"),
    (EXAMPLE, (*OK, "--check-error-stat", "maximum"), "'maximum' is not a check; use one of elemwise"),
    (EXAMPLE, (*OK, "--check-error-stat", "W:max"), "'W' is not one of the model outputs"),
    (EXAMPLE, (*OK, "--error-quantile", "1.5"), "is not a quantile; give a number from 0 to 1"),
    (EXAMPLE, (*OK, "--error-quantile", "Y:-0.1"), "is not a quantile"),
    (EXAMPLE, (*OK, "--compare", "bogus"), "--compare: unknown metric 'bogus'"),
    (EXAMPLE, (*OK, "--cosine-threshold", "high"), "'high' is not a number"),
    # data
    (EXAMPLE, (*OK, "--iterations", "0"), "run at least 1 iteration"),
    (EXAMPLE, (*OK, "--iterations", "many"), "'many' is not a valid integer"),
    (EXAMPLE, (*OK, "--seed", "-1"), "--seed -1 is out of range"),
    (EXAMPLE, (*OK, "--seed", "99999999999"), "is out of range"),
    (EXAMPLE, (*OK, "--val-range", "[1,0]"), "LOW must be a number not above HIGH"),
    (EXAMPLE, (*OK, "--val-range", "X:[a,1]"), "'a' in 'X:[a,1]' is not a number"),
    (EXAMPLE, (*OK, "--val-range", "Q:[0,1]"), "--val-range: 'Q' is not one of the model inputs"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/nothing"), "no such file or directory"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/garbage.bin"), "not a cmpx run directory"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/bad.json"), "damaged Polygraphy RunResults"),
    (EXAMPLE, (*OK, "--data-loader-script", "{tmp}/raises.py"), "load_data() raised ValueError: broken source"),
    (EXAMPLE, (*OK, "--data-loader-script", "{tmp}/wrong.py"), "no data for input 'X'; the data holds 'x', which no input is named"),
    (EXAMPLE, (*OK, "--data-loader", "csv"), "--data-loader 'csv' is not registered"),
    (EXAMPLE, (*OK, "--save-outputs", "{tmp}/full"), "already exists and is not an empty directory"),
    # per-layer and precision
    (EXAMPLE, (*OK, "--onnx-outputs", "no_such_tensor"), "the model has no markable tensor 'no_such_tensor'"),
    (EXAMPLE, (*OK, "--onnx-outputs", "zz*"), "the pattern 'zz*' matches no tensor of the model"),
    (EXAMPLE, ("--backend", "onnxrt:fp4", "--backend", "onnxref"), "unknown transform 'fp4'"),
    (EXAMPLE, (*OK, "--onnxref-opset", "x"), "Invalid value for '--onnxref-opset': 'x' is not a valid integer"),
    # plugins and execution
    (EXAMPLE, (*OK, "-p", "cmpx_test_import_error"), "plugin 'cmpx_test_import_error' (from -p / CMPX_PLUGINS) "
                                                     "failed to load: ModuleNotFoundError"),
    (EXAMPLE, (*OK, "--timeout", "-1"), "--timeout: '-1': '-1': give a number of seconds above 0"),
    (EXAMPLE, (*OK, "--timeout", "0"), "give a number of seconds above 0"),
    (EXAMPLE, (*OK, "--atoll", "1"), "No such option '--atoll'. (Did you mean one of: '--abs-tol', '--atol'"),
    # hostile files: nothing may hang, leave its directory, or be echoed
    ("{tmp}/fifo.onnx", OK, "model file {tmp}/fifo.onnx is a FIFO; give a regular file"),
    ("/dev/zero", OK, "model file /dev/zero is a device; give a regular file"),
    (EXAMPLE, (*OK, "--onnx-outputs", "@{tmp}/fifo.txt"), "is a FIFO; give a regular file"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/fifo.txt"), "saved file {tmp}/fifo.txt is a FIFO"),
    (EXAMPLE, (*OK, "--data-loader-script", "{tmp}/fifo.txt"), "is a FIFO; give a regular file"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/run-absolute"), "points outside its directory"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/run-dotdot"), "file entry '../secret.txt' points outside"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/run-symlink"), "leads outside {tmp}/run-symlink (through a symbolic"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/run-fifo"), "is a FIFO; give a regular file"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/run-notnpy"), "not a valid .npy array (its header cannot be read)"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/deep.json"), "not readable as Polygraphy JSON (nested too deeply)"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/huge-int.json"), "a number it cannot represent"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/huge-array.json"), "declares 70368744177664 bytes of data but holds"),
    (EXAMPLE, (*OK, "--load-outputs", "{tmp}/damaged-output.json"), "r iteration 0 Y: the array declares"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/escape"), "file entry '../../secret.bin' points outside"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/bad-base64.json"), "X: the array's base64 text is damaged"),
    (EXAMPLE, (*OK, "--load-inputs", "{tmp}/polygraphy-gap"), "iteration file(s) 0000000001.json missing"),
    # Polygraphy's options and spellings
    (EXAMPLE, (*OK, "--compare", "indices", "--index-tolerance", "1.5"),
     "--index-tolerance: '1.5': the index tolerance is a whole number of positions (0, 1, 2...), not 1.5"),
    (EXAMPLE, (*OK, "--postprocess", "top-x"), "--postprocess: 'top-x': the accepted form is top-K or top-K,axis=N"),
    (EXAMPLE, (*OK, "--postprocess", ":top-1"), "--postprocess: ':top-1' has an empty output name; use top-K or "
     "NAME:top-K"),
    (EXAMPLE, (*OK, "--tf32"), "--tf32 is an option of backend trt, which this run does not use; add --backend trt"),
    (EXAMPLE, ("--onnxrt", "--trt-outputs", "*"), "--trt-outputs is an option of backend trt, which this run"),
    (EXAMPLE, (*OK, "--lpips-threshold", "0.1"), "--lpips-threshold is a Polygraphy option that cmpx does not have"),
    (EXAMPLE, (*OK, "--opset", "13"), "--opset is a Polygraphy option that cmpx does not have"),
    (EXAMPLE, (*OK, "--output-map", "=Y"), "--output-map: cannot read '=Y'; give NAME=OTHER_NAME"),
    # outputs are checked before any work
    (EXAMPLE, (*OK, "--report-json", "{tmp}/no/such/dir/r.json"), "the directory {tmp}/no/such/dir does not exist"),
    (EXAMPLE, (*OK, "--junit", "{tmp}/full"), "--junit {tmp}/full is a directory; give the path of a file"),
    (EXAMPLE, (*OK, "--save-inputs", "{tmp}/secret.txt"), "exists and is not a directory"),
    (EXAMPLE, (*OK, "--save-error-plots", "{tmp}/no/plots"), "the directory {tmp}/no does not exist"),
    (EXAMPLE, (*OK, "--report-json", "{tmp}/r.json", "--junit", "{tmp}/r.json"), "both write"),
]


@pytest.mark.parametrize("model, args, message", CASES, ids=[f"{i}-{c[2][:30]}" for i, c in enumerate(CASES)])
def test_bad_input_is_a_short_error_with_exit_2(run_cli, files, model, args, message):
    fill = lambda text: text.replace("{tmp}", str(files))  # noqa: E731
    result = run_cli("run", fill(model), *map(fill, args))
    assert result.exit_code == 2, result.output
    assert fill(message) in result.output, result.output
    assert CONTENT not in result.output  # a file's contents are never echoed
    lines = result.output.strip().splitlines()
    assert 1 <= len(lines) <= 2, lines
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in result.output and "loaded" not in result.output


def test_there_are_at_least_thirty_cases():
    assert len(CASES) >= 30


def test_debug_shows_the_traceback(run_cli, files):
    result = run_cli("run", str(files / "text.onnx"), *OK, "--debug")
    assert result.exit_code == 2
    assert "Traceback" in result.output and "not a valid ONNX model" in result.output
