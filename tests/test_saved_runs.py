"""Saved inputs and outputs: cmpx's format, Polygraphy files, ONNX test data; all read safely."""

import base64
import io
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest

from cmpx.dtypes import ONNX_TO_NUMPY, numpy_dtype
from cmpx.saved.cmpx_format import MANIFEST, RunWriter, read_cmpx_run
from cmpx.saved.npy import SavedDataError
from cmpx.saved.opening import open_saved
from conftest import REPO

ONNX_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
EXAMPLE = "examples/models/conv.onnx"


def write_run(path, iterations, kind="outputs", source="b"):
    writer = RunWriter(str(path), kind, "m.onnx")
    for i, tensors in enumerate(iterations):
        writer.add(source, i, tensors, f"digest{i}")
    writer.close()
    return str(path)


@pytest.mark.parametrize("dtype", sorted(set(ONNX_TO_NUMPY.values())))
def test_every_dtype_round_trips_memory_mapped(tmp_path, dtype):
    array = np.arange(24).reshape(2, 3, 4).astype(numpy_dtype(dtype))
    scalar = np.asarray(array.reshape(-1)[5])
    path = write_run(tmp_path / "run", [{"t": array, "s": scalar, "empty": array[:0]}])
    saved = read_cmpx_run(path)
    [source] = saved.sources
    loaded = source.load(0)
    for name, original in {"t": array, "s": scalar, "empty": array[:0]}.items():
        assert loaded[name].dtype == original.dtype and loaded[name].shape == original.shape
        assert loaded[name].tobytes() == original.tobytes()
    assert isinstance(loaded["t"].base, np.memmap) or isinstance(loaded["t"], np.memmap)  # mapped, not read
    assert source.digests == ["digest0"]


def test_the_format_is_close_to_raw_size_and_readable_without_cmpx(tmp_path):
    big = np.random.default_rng(0).random((256, 1024), dtype=np.float32)  # 1 MiB
    half = big.astype(ml_dtypes.bfloat16)
    path = write_run(tmp_path / "run", [{"x": big, "h": half}])
    files = [p for p in Path(path).rglob("*.npy")]
    assert sum(p.stat().st_size for p in files) <= 1.1 * (big.nbytes + half.nbytes)
    lines = [json.loads(line) for line in (Path(path) / MANIFEST).read_text().splitlines()]
    assert lines[0]["format"] == "cmpx-run" and lines[0]["kind"] == "outputs"
    entry = lines[1]["tensors"][1]
    assert entry["dtype"] == "bfloat16"
    raw = np.load(Path(path) / entry["file"], allow_pickle=False)  # plain numpy: uint16 bits of the bfloat16
    assert raw.view(ml_dtypes.bfloat16).tobytes() == half.tobytes()


def test_a_run_streams_to_disk_and_an_interrupted_one_reads_back(tmp_path):
    writer = RunWriter(str(tmp_path / "run"), "outputs", None)
    writer.add("b", 0, {"x": np.ones(3)}, None)
    assert len(read_cmpx_run(str(tmp_path / "run")).sources[0]) == 1  # readable while still being written
    writer.add("b", 1, {"x": np.zeros(3)}, None)
    writer.close()
    assert len(read_cmpx_run(str(tmp_path / "run")).sources[0]) == 2


def test_refuses_to_overwrite(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("")
    with pytest.raises(SavedDataError, match="already exists"):
        RunWriter(str(tmp_path / "run"), "outputs", None)


def test_save_and_compare_later_end_to_end(run_cli, tmp_path):
    saved = tmp_path / "golden"
    first = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--iterations", "2",
                    "--save-outputs", saved, "--save-inputs", tmp_path / "inputs")
    assert first.exit_code == 0, first.output
    later = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--load-outputs", saved, "--iterations", "2")
    assert later.exit_code == 0, later.output
    assert "onnxrt vs onnxrt@golden (reference)" in later.output
    assert "onnxrt@golden vs onnxref@golden (reference)" in later.output
    model_free = run_cli("run", "--load-outputs", saved, "--reference", "onnxref@golden")
    assert model_free.exit_code == 0 and "2/2 iterations passed" in model_free.output
    replayed = run_cli("run", EXAMPLE, "--backend", "onnxref", "--load-inputs", tmp_path / "inputs",
                       "--load-outputs", saved, "--reference", "onnxref@golden")
    assert replayed.exit_code == 0 and "onnxref vs onnxref@golden" in replayed.output
    assert "warning: the inputs" not in replayed.output


def test_other_inputs_than_the_saved_run_are_flagged(run_cli, tmp_path):
    run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--save-outputs", tmp_path / "s")
    other = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--load-outputs", tmp_path / "s", "--seed", "9")
    assert "warning: the inputs of iteration 0 differ from those onnxrt@s was run with" in other.output


def test_a_saved_run_with_too_few_iterations_is_a_usage_error(run_cli, tmp_path):
    run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--save-outputs", tmp_path / "s")
    result = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--load-outputs", tmp_path / "s", "--iterations", "3")
    assert result.exit_code == 2 and "holds 1 iteration(s) but this run makes 3" in result.output


def polygraphy(*args, cwd):
    script = Path(sys.executable).parent / "polygraphy"  # the console script of the test-only dependency
    return subprocess.run([str(script), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_files_written_by_polygraphy_read_back(run_cli, tmp_path):
    model = os.path.abspath(EXAMPLE)
    done = polygraphy("run", model, "--onnxrt", "--save-inputs", "in.json", "--save-outputs", "out.json",
                      "--iterations", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    inputs = open_saved(str(tmp_path / "in.json"), "inputs")
    assert inputs.kind == "inputs" and len(inputs.sources[0]) == 2
    outputs = open_saved(str(tmp_path / "out.json"), "outputs")
    assert outputs.kind == "outputs" and list(outputs.sources[0].load(1)) == ["Y", "Z"]
    fed = run_cli("run", EXAMPLE, "--backend", "onnxref", "--load-inputs", tmp_path / "in.json",
                  "--load-outputs", tmp_path / "out.json")
    assert fed.exit_code == 0, fed.output
    assert "2/2 iterations passed" in fed.output
    # Same seed, same synthetic inputs: Polygraphy's saved outputs match a fresh cmpx run directly.
    synthetic = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--load-outputs", tmp_path / "out.json",
                        "--iterations", "2")
    assert synthetic.exit_code == 0, synthetic.output
    assert "PASSED  Y: max abs 0 at" in synthetic.output


@pytest.mark.parametrize("case", ["pytorch-operator/test_operator_conv", "pytorch-operator/test_operator_maxpool",
                                  "pytorch-operator/test_operator_index", "pytorch-operator/test_operator_chunk",
                                  "pytorch-converted/test_Conv1d_groups"])
def test_onnx_test_data_directories_from_the_onnx_package(run_cli, case):
    directory = ONNX_DATA / case
    case = directory.name
    result = run_cli("run", directory / "model.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--load-inputs", directory, "--load-outputs", directory, "--reference", "expected@" + case,
                     "--atol", "1e-5", "--rtol", "1e-4")
    assert result.exit_code == 0, result.output
    assert f"onnxrt vs expected@{case} (reference)" in result.output


def test_test_data_with_external_data_reads_it_from_its_own_directory(run_cli, tmp_path, monkeypatch):
    """Such a set used to work only from its own directory: external data was looked up in the current one (and a
    file of that name there was read instead)."""
    import onnx
    from onnx import numpy_helper

    testset = tmp_path / "case" / "test_data_set_0"
    testset.mkdir(parents=True)
    values = np.random.default_rng(0).random((1, 3, 8, 8), dtype=np.float32)
    proto = numpy_helper.from_array(values, "X")
    onnx.external_data_helper.set_external_data(proto, "x.bin")
    proto.ClearField("raw_data")
    (testset / "x.bin").write_bytes(values.tobytes())
    (testset / "input_0.pb").write_bytes(proto.SerializeToString())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.bin").write_bytes(np.zeros_like(values).tobytes())  # a decoy in the current directory
    monkeypatch.chdir(elsewhere)
    saved = tmp_path / "fed"
    result = run_cli("run", REPO / EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--load-inputs",
                     tmp_path / "case", "--save-inputs", saved)
    assert result.exit_code == 0, result.output
    from cmpx.saved.cmpx_format import read_cmpx_run

    fed = read_cmpx_run(str(saved)).sources[0].load(0)["X"]
    assert np.array_equal(fed, values)  # the set's own data, not the decoy


class Payload:
    """Unpickling this would create the marker file: the proof that nothing was unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def object_npy(marker) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([Payload(marker)], dtype=object), allow_pickle=True)
    return buffer.getvalue()


def test_pickle_payloads_are_refused_without_being_executed(run_cli, tmp_path):
    marker = tmp_path / "executed"
    # 1. a cmpx run whose .npy holds an object array
    path = write_run(tmp_path / "run", [{"Y": np.zeros((1, 4, 8, 8), np.float32)}])
    (tmp_path / "run" / "0" / "0" / "0.npy").write_bytes(object_npy(marker))
    # 2. Polygraphy inputs whose array is an object .npy
    poly = tmp_path / "poly.json"
    poly.write_text(json.dumps([{"X": {"array": base64.b64encode(object_npy(marker)).decode(),
                                       "polygraphy_class": "ndarray"}}]))
    # 3. a plain pickle file
    raw = tmp_path / "data.pkl"
    raw.write_bytes(pickle.dumps([{"X": Payload(marker)}]))
    for args in (("--load-outputs", path), ("--load-inputs", poly), ("--load-inputs", raw)):
        result = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", *args)
        assert result.exit_code == 2, (args, result.output)
        assert "refused" in result.output or "never loads pickle" in result.output, result.output
        assert "loaded" not in result.output
    assert not marker.exists()


def test_damaged_files_are_usage_errors(run_cli, tmp_path):
    good = write_run(tmp_path / "good", [{"Y": np.zeros((1, 4, 8, 8), np.float32)}])
    damaged = write_run(tmp_path / "run", [{"Y": np.zeros((1, 4, 8, 8), np.float32)}])
    truncated = Path(damaged) / "0" / "0" / "0.npy"
    truncated.write_bytes(truncated.read_bytes()[:-10])
    bad_manifest = tmp_path / "bad"
    bad_manifest.mkdir()
    (bad_manifest / MANIFEST).write_text('{"format": "cmpx-run", "format_version": 1}\n{"source": ')
    half_json = tmp_path / "half.json"
    half_json.write_text('[{"X": {"array": "k05VTVBZ", "polygraph')
    empty = tmp_path / "empty.json"
    empty.write_text("")
    cases = {("--load-outputs", damaged): "truncated (1142 of 1152 bytes)", ("--load-outputs", bad_manifest): "damaged manifest",
             ("--load-inputs", half_json): "not readable as Polygraphy JSON",
             ("--load-inputs", empty): "the file is empty",
             ("--load-inputs", tmp_path / "missing"): "no such file or directory",
             ("--load-inputs", good): "holds saved outputs, but is given as inputs"}
    for args, message in cases.items():
        result = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)


def test_saved_data_streams_one_iteration_at_a_time(tmp_path, monkeypatch):
    from cmpx.loaders.options import DataOptions
    from cmpx.loaders.saved import SavedDataLoader
    from cmpx.model.info import TensorSpec

    path = write_run(tmp_path / "in", [{"X": np.full(4, i, np.float32)} for i in range(4)], kind="inputs")
    loaded = []
    saved = read_cmpx_run(path)
    original = saved.sources[0].loaders
    saved.sources[0].loaders = [lambda i=i, f=f: loaded.append(i) or f() for i, f in enumerate(original)]
    monkeypatch.setattr("cmpx.loaders.saved.open_saved", lambda *a, **k: saved)
    feeds = SavedDataLoader(DataOptions(paths=(path,))).feeds([TensorSpec("X", "float32", (4,))])
    first = next(feeds)
    assert loaded == [0] and isinstance(first["X"], np.memmap)  # nothing read ahead, nothing copied
    assert [float(f["X"][0]) for f in feeds] == [1.0, 2.0, 3.0] and loaded == [0, 1, 2, 3]


def test_a_model_off_by_a_factor_fails_against_a_saved_run_with_numpys_exact_quantiles(run_cli, tmp_path):
    """Issue #34's case, small: an identity's run saved, then a x1.0001 model against it. Nearly every element
    fails the default tolerances with one nearly constant relative error (all of it in one or two bins, counted
    by its low bits); the verdicts, the mismatches and the reported quantiles are numpy's."""
    from onnx import TensorProto, helper, numpy_helper

    def model(name, nodes, weights=()):
        shape = [1, 8, 64, 64]
        graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)], list(weights))
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / f"{name}.onnx")
        return tmp_path / f"{name}.onnx"

    identity = model("identity", [helper.make_node("Identity", ["X"], ["Y"])])
    scale = model("scale", [helper.make_node("Mul", ["X", "k"], ["Y"])],
                  [numpy_helper.from_array(np.array(1.0001, np.float32), "k")])
    saved = run_cli("run", identity, "--backend", "onnxrt", "--save-inputs", tmp_path / "in", "--save-outputs",
                    tmp_path / "out")
    assert saved.exit_code == 0, saved.output
    load = ("run", scale, "--backend", "onnxrt", "--load-inputs", tmp_path / "in", "--load-outputs", tmp_path / "out")
    failing = run_cli(*load, "--report-json", tmp_path / "r.json")
    assert failing.exit_code == 1, failing.output
    assert run_cli(*load, "--rtol", "1e-3").exit_code == 0
    inputs = read_cmpx_run(str(tmp_path / "in")).sources[0].load(0)["X"]
    reference = read_cmpx_run(str(tmp_path / "out")).sources[0].load(0)["Y"]
    actual = inputs * np.float32(1.0001)
    absdiff = np.abs(actual - reference)
    reldiff = absdiff / np.abs(reference)  # no zeros: uniform [0, 1) never draws an exact 0 here
    data = json.loads((tmp_path / "r.json").read_text())["results"][0]["outputs"][0]["metrics"][0]["data"]
    tolerance = np.float32(1e-5)
    mismatches = int(np.count_nonzero((absdiff > tolerance) & (reldiff > tolerance)))
    assert data["mismatches"] == mismatches > 0.8 * absdiff.size
    for name, errors in (("abs", absdiff), ("rel", reldiff)):
        for q, value in data[name]["quantiles"].items():
            assert value == float(np.quantile(errors.astype(np.float64), float(q))), (name, q)
