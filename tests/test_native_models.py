"""Models in a backend's own format (TensorRT engines, OpenVINO IR): cmpx cannot read them, so the run's first
backend loads the model early and describes it, and the run goes on from that description. Driven here with a
test plugin whose format is a small JSON file (tests/plugins/cmpx_test_toyformat.py), against ONNX Runtime's
saved outputs of the equivalent ONNX model."""

import json

import pytest
from onnx import TensorProto, helper

from cmpx.saved.opening import open_saved
from cmpx.testing.models import save

TOY = ("-p", "cmpx_test_toyformat")


def toy_model(path, scale_y=2.0, shape=(1, 3, 4)):
    path.write_text(json.dumps({
        "inputs": [{"name": "X", "dtype": "float32", "shape": list(shape)}],
        "outputs": [{"name": "Y", "of": "X", "scale": scale_y}, {"name": "Z", "of": "X", "scale": 0.5}]}))
    return str(path)


def onnx_twin(path, shape=(1, 3, 4)):
    """The ONNX model the toy file stands for: Y = 2X, Z = X/2."""
    nodes = [helper.make_node("Mul", ["X", "two"], ["Y"]), helper.make_node("Mul", ["X", "half"], ["Z"])]
    graph = helper.make_graph(nodes, "twin", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(shape)),
                               helper.make_tensor_value_info("Z", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
                               helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


@pytest.fixture
def saved_onnx_outputs(run_cli, tmp_path):
    saved = tmp_path / "onnx-run"
    result = run_cli("run", onnx_twin(tmp_path / "twin.onnx"), "--backend", "onnxrt", "--backend", "onnxref",
                     "--save-outputs", saved)
    assert result.exit_code == 0, result.output
    return saved


def test_a_native_model_is_compared_with_saved_onnx_outputs(run_cli, tmp_path, saved_onnx_outputs):
    log = tmp_path / "loads.txt"
    result = run_cli("run", toy_model(tmp_path / "m.toy"), "--backend", "toy", "--backend", "toy",
                     "--toy-load-log", log, "--load-outputs", saved_onnx_outputs, *TOY)
    assert result.exit_code == 0, result.output
    assert "toy vs toy#2" in result.output and "onnxrt@onnx-run" in result.output
    assert result.output.count("PASSED  Y") >= 2 and result.output.count("PASSED  Z") >= 2
    assert len(log.read_text().splitlines()) == 2  # the describing worker's load is not repeated
    assert "verbose=False" in log.read_text()
    flagged = run_cli("run", toy_model(tmp_path / "m.toy"), "--backend", "toy", "--backend", "toy",
                      "--toy-load-log", log, "--toy-verbose", "--load-outputs", saved_onnx_outputs, *TOY)
    assert flagged.exit_code == 0, flagged.output
    assert log.read_text().splitlines()[-1].endswith("verbose=True")  # a flag option reaches the backend


def test_a_native_model_that_differs_from_the_onnx_outputs_fails(run_cli, tmp_path, saved_onnx_outputs):
    result = run_cli("run", toy_model(tmp_path / "m.toy", scale_y=2.01), "--backend", "toy",
                     "--load-outputs", saved_onnx_outputs, "--reference", "onnxrt@onnx-run", *TOY)
    assert result.exit_code == 1, result.output
    assert "FAILED  Y" in result.output and "PASSED  Z" in result.output


def test_numpy_integer_dimensions_are_accepted(run_cli, tmp_path):
    result = run_cli("run", toy_model(tmp_path / "m.toy"), "--backend", "toy", "--backend", "toy",
                     "--toy-describe", "numpy-dims", *TOY)
    assert result.exit_code == 0, result.output
    assert "PASSED  Y" in result.output


def test_dynamic_dimensions_of_a_described_model_take_input_shapes(run_cli, tmp_path):
    model = toy_model(tmp_path / "m.toy", shape=("N", 3))
    result = run_cli("run", model, "--backend", "toy", "--backend", "toy", "--input-shapes", "X:[5,3]",
                     "--save-inputs", tmp_path / "inputs", *TOY)
    assert result.exit_code == 0, result.output
    [source] = open_saved(str(tmp_path / "inputs"), "inputs").sources
    assert source.load(0)["X"].shape == (5, 3)


@pytest.mark.parametrize("extra, expected", [
    (("--backend", "toy", "--backend", "onnxrt"), "is a .toy model, which only toy, toy-nodescribe can load, not "
                                                  "onnxrt; run those on the ONNX model with --save-outputs DIR"),
    (("--backend", "toy:fp16", "--backend", "toy"), "--backend toy:fp16: transforms apply to ONNX models"),
    (("--backend", "toy", "--backend", "toy", "--mark-all"), "--onnx-outputs / --mark-all mark tensors of an ONNX"),
    (("--load-outputs", "{saved}"), "is a .toy model: run it with --backend toy or toy-nodescribe, or leave the "
                                    "model out"),
    (("--backend", "toy", "--backend", "toy", "--atol", "W:1e-3"), "--atol: 'W' is not one of the model outputs: "
                                                                   "Y, Z"),
])
def test_what_a_native_model_cannot_do_is_refused_with_exit_2(run_cli, tmp_path, saved_onnx_outputs, extra,
                                                               expected):
    args = [word.format(saved=saved_onnx_outputs) for word in extra]
    result = run_cli("run", toy_model(tmp_path / "m.toy"), *args, *TOY)
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("backend, content, extra, expected", [
    ("toy", "{not json", (), "toy failed during load: json.decoder.JSONDecodeError"),
    ("toy", None, ("--toy-describe", "wrong-dtype"), "toy failed during load: cmpx.transport.worker.main.WorkerError: "
                                                       "describe(): input 'X' has dtype 'float99'"),
    ("toy", None, ("--toy-describe", "not-specs"), "describe() must return cmpx.TensorSpec objects"),
    ("toy", None, ("--toy-describe", "bad-shape"), "describe(): input 'X' has shape (1.5,); dimensions are integers"),
    ("toy-nodescribe", None, (), "Described does not implement describe()"),
])
def test_a_backend_that_cannot_describe_the_model_fails_the_run_with_exit_3(run_cli, tmp_path, backend, content,
                                                                            extra, expected):
    model = tmp_path / "m.toy"
    if content is None:
        toy_model(model)
    else:
        model.write_text(content)
    result = run_cli("run", model, "--backend", backend, "--backend", backend, *extra, *TOY)
    assert result.exit_code == 3, result.output
    assert expected in result.output
    assert "Traceback" not in result.output


def test_cmpx_plugins_says_which_backends_load_which_formats(run_cli):
    result = run_cli("-p", "cmpx_test_toyformat", "plugins")
    assert result.exit_code == 0, result.output
    assert "also loads .toy models  [plugin cmpx_test_toyformat]" in result.output
    assert "also loads .engine, .plan models" in result.output


def test_cmpx_tensors_says_a_native_model_is_not_onnx(run_cli, tmp_path):
    result = run_cli("-p", "cmpx_test_toyformat", "tensors", toy_model(tmp_path / "m.toy"))
    assert result.exit_code == 2
    assert "cmpx tensors lists the tensors of an ONNX model, and " in result.output
    assert "m.toy is a .toy model" in result.output
