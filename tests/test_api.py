"""The Python API: cmpx.run() is the same run as `cmpx run`, with Python values, typed errors and a Report."""

import json
import os
import subprocess
import sys

import pytest

import cmpx
from cmpx.testing import models as modelgen
from conftest import REPO

EXAMPLE = str(REPO / "examples" / "models" / "conv.onnx")
DYNAMIC = str(REPO / "examples" / "models" / "dynamic_identity.onnx")


@pytest.fixture(autouse=True)
def workers_see_the_test_plugins(no_leaks):
    """Every test here also fails if a worker or a shared-memory segment outlives it."""


def test_the_issue_one_liner_prints_0():
    done = subprocess.run([sys.executable, "-c", "import cmpx; print(cmpx.run('examples/models/conv.onnx', "
                           "backends=['onnxrt', 'onnxref']).exit_code)"], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.stdout.strip() == "0", done.stdout + done.stderr


def test_a_passing_run_returns_a_report_with_every_result():
    report = cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], iterations=2)
    assert report.exit_code == cmpx.ExitCode.PASSED and report.passed and report.iterations == 2
    tally = report.pair("onnxrt")
    assert (tally.reference, tally.iterations, tally.iterations_passed, tally.outputs) == ("onnxref", 2, 2, 4)
    assert tally.elements == 2 * (4 * 8 * 8 + 4)  # Y and Z in each iteration
    assert 0 < tally.worst_abs < 1e-5
    first = report.pairs[0]
    assert [o.output for o in first.outputs] == ["Y", "Z"]
    data = first.outputs[0].metrics[0].data
    assert data["abs"]["max"] == first.outputs[0].worst("abs") and data["size"] == 256 and data["mismatches"] == 0
    document = json.loads(report.to_json())
    assert document["exit_code"] == 0 and document["pairs"][0]["iterations_passed"] == 2
    assert "PASSED | 2 comparison(s) over 2 iteration(s), 4 output(s), 520 element(s) compared | exit 0" in report.text()
    assert "PASSED" in repr(report)


def test_options_take_python_values():
    """Python values become the words a user would type (checked without a run: what the words then do is the
    command line's tests' business, and test_the_api_and_the_cli_give_the_same_verdicts_and_statistics runs one
    such value both ways); two runs show the converted values reach the run."""
    from cmpx.options.request import from_python

    def request(**options):
        return from_python(EXAMPLE, ["onnxrt", "onnxref"], options, {}, [])

    tight = request(atol=0.0, rtol={"Y": 0.0, "Z": 0.0})
    assert (tight.atol, tight.rtol) == (("0.0",), ("Y:0.0", "Z:0.0"))
    loose = request(atol=[0.0, {"Y": 1e-3, "Z": 1e-3}], rtol=0.0)
    assert (loose.atol, loose.rtol) == (("0.0", "Y:0.001", "Z:0.001"), ("0.0",))
    converted = request(input_shapes={"X": [2, 2, 4, 4]}, val_range=(-1, 1))
    assert (converted.input_shapes, converted.val_range) == (("X:[2,2,4,4]",), ("[-1,1]",))
    shaped = cmpx.run(DYNAMIC, "onnxrt onnxrt".split(), input_shapes={"X": [2, 2, 4, 4]}, val_range=(-1, 1))
    assert shaped.passed and shaped.pairs[0].outputs[0].elements == 64
    assert shaped.warnings == []  # the dynamic dimension was set, so nothing was guessed
    guessed = cmpx.run(DYNAMIC, ["onnxrt", "onnxrt"])
    assert any("dynamic shape" in warning for warning in guessed.warnings)


def test_mark_all_and_saved_runs(tmp_path):
    base, twin = tmp_path / "chain.onnx", tmp_path / "twin.onnx"
    modelgen.save(modelgen.matmul_chain(layers=4), base)
    modelgen.save(modelgen.matmul_chain(layers=4, perturb=2), twin)
    golden = tmp_path / "golden"
    saved = cmpx.run(base, ["onnxref", "onnxrt"], mark_all=True, save_outputs=golden)
    assert saved.passed
    report = cmpx.run(twin, ["onnxrt"], mark_all=True, load_outputs=[golden])
    assert report.exit_code == cmpx.ExitCode.MISMATCH
    assert report.backends == ["onnxrt", "onnxref@golden", "onnxrt@golden"]
    assert not report.pair("onnxrt", "onnxref@golden").passed and report.pair("onnxref@golden").passed
    assert report.first_divergence.tensor == "mm2" and report.first_divergence.op_type == "MatMul"


def test_the_api_and_the_cli_give_the_same_verdicts_and_statistics(tmp_path, run_cli):
    path = tmp_path / "cli.json"
    cli = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--atol", "1e-7", "Z:1e-3",
                  "--rtol", "0", "--iterations", "2", "--report-json", path)
    api = cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], atol=[1e-7, {"Z": 1e-3}], rtol=0, iterations=2)
    assert cli.exit_code == api.exit_code == 1

    def verdicts(document):
        return [(r["iteration"], o["name"], o["passed"], [m["data"]["abs"]["max"] for m in o["metrics"]])
                for r in document["results"] for o in r["outputs"]]

    assert verdicts(json.loads(path.read_text())) == verdicts(api.to_dict())


def test_a_failing_backend_is_in_the_report_not_an_exception():
    report = cmpx.run(EXAMPLE, ["onnxrt", "faulty", "onnxref"], plugins=["cmpx_test_faulty"],
                      faulty_fault="infer:raise")
    assert report.exit_code == cmpx.ExitCode.BACKEND_FAILED
    failure = report.failures["faulty"]
    assert isinstance(failure, cmpx.BackendFailed) and failure.phase == "infer"
    assert report.pair("onnxrt").reference == "onnxref" and report.pair("onnxrt").passed  # the others compared


@pytest.mark.parametrize("kwargs, error, text", [
    ({"atoll": 1e-3}, cmpx.UsageError, "unknown option 'atoll'; did you mean 'atol'?"),
    ({"atol": "abc"}, cmpx.UsageError, "--atol: 'abc'"),
    ({"atol": True}, cmpx.UsageError, "True is not a number"),
    ({"iterations": 1.5}, cmpx.UsageError, "iterations=...) takes an integer"),
    ({"mark_all": "yes"}, cmpx.UsageError, "takes True or False"),
    ({"input_shapes": {"Q": [1]}}, cmpx.UsageError, "'Q' is not one of the model inputs"),
    ({"onnxrt_optimization": "fastest"}, cmpx.UsageError, "--onnxrt-optimization: 'fastest' is not one of"),
    ({"onnxref_opset": "new"}, cmpx.UsageError, "--onnxref-opset: 'new' is not a valid int"),
    ({"cosine_threshold": "x"}, cmpx.UsageError, "--cosine-threshold"),
])
def test_bad_options_raise_typed_errors_before_any_inference(kwargs, error, text):
    with pytest.raises(error, match=None) as raised:
        cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], **kwargs)
    assert text in str(raised.value)
    assert raised.value.exit_code == cmpx.ExitCode.USAGE


def test_model_and_backend_errors_are_typed(tmp_path):
    with pytest.raises(cmpx.ModelError, match="model file not found"):
        cmpx.run(tmp_path / "missing.onnx", ["onnxrt", "onnxref"])
    with pytest.raises(cmpx.UsageError, match="unknown backend 'nope'"):
        cmpx.run(EXAMPLE, ["onnxrt", "nope"])
    with pytest.raises(cmpx.PluginError, match="essential"):
        cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], plugins=["no:metrics"])


def test_echo_streams_the_text_report():
    lines = []
    report = cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], echo=lines.append)
    assert lines[0].startswith("cmpx ") and lines[-1] == "PASSED | 1 comparison(s) over 1 iteration(s), 2 output(s), 260 element(s) compared | exit 0"
    assert "\n".join(lines[-3:]) in report.text()


def test_report_files_are_written_as_on_the_command_line(tmp_path):
    report = cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], report_json=tmp_path / "r.json", junit=tmp_path / "j.xml")
    assert json.loads((tmp_path / "r.json").read_text())["passed"] is True
    assert "<testsuite" in (tmp_path / "j.xml").read_text() and report.passed


def test_a_capability_not_a_name_decides_what_precision_flags_and_marking_do(run_cli):
    result = run_cli("run", EXAMPLE, "--backend", "capable", "--backend", "onnxrt", "--fp16", "--atol", "1e-2",
                     "--rtol", "1e-2", plugins=["cmpx_test_capable"])
    assert result.exit_code == 0, result.output
    assert "capable:fp16 vs onnxrt" in result.output  # --fp16 went to the backend that takes precision flags
    marked = run_cli("run", EXAMPLE, "--backend", "capable", "--backend", "onnxrt", "--capable-outputs", "conv",
                     plugins=["cmpx_test_capable"])
    assert "marking outputs changes capable's layer fusion" in marked.output
    refused = run_cli("run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--int8", "--fp16",
                      plugins=["cmpx_test_capable"])
    assert refused.exit_code == 2 and "--fp16 and --int8 both given" in refused.output


def test_essential_plugins_cannot_be_blocked_and_load_without_autoload(run_cli):
    from conftest import run_cmpx

    blocked = run_cmpx("-p", "no:metrics", "run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref")
    assert blocked.returncode == 2, blocked.stderr
    assert blocked.stderr.startswith("Error: -p no:metrics: plugin 'metrics' is essential")
    assert "Traceback" not in blocked.stderr and len(blocked.stderr.strip().splitlines()) == 1
    bare = run_cmpx("-p", "cmpx_onnxrt.plugin", "-p", "cmpx_onnxref.plugin", "run", EXAMPLE, "--backend", "onnxrt",
                    "--backend", "onnxref", env={"CMPX_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert bare.returncode == 0, bare.stdout + bare.stderr  # the default metric and data loader are there


def test_a_worker_speaking_another_protocol_is_a_clear_backend_failure():
    from cmpx.transport import protocol, supervisor

    child_in, parent_out = os.pipe()
    parent_in, child_out = os.pipe()
    liar = ("import os, sys, time, msgpack, struct\n"
            f"payload = msgpack.packb({{'op': 'hello', 'pid': os.getpid(), 'protocol': {protocol.PROTOCOL_VERSION + 7}}})\n"
            "os.write(int(sys.argv[1]), struct.pack('>I', len(payload)) + payload)\n"
            "time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", liar, str(child_out)], pass_fds=(child_out,),
                               start_new_session=True)
    os.close(child_in)
    os.close(child_out)
    os.set_blocking(parent_in, False)
    import tempfile

    worker = supervisor.Worker("old", process, parent_out, parent_in, tempfile.TemporaryFile(), os.pidfd_open(
        process.pid))
    try:
        reply = supervisor.wait_replies([worker], "hello", "start", 30)["old"]
        assert isinstance(reply, cmpx.BackendFailed)
        assert f"speaks cmpx protocol {protocol.PROTOCOL_VERSION + 7}" in str(reply)
        assert f"this coordinator protocol {protocol.PROTOCOL_VERSION}" in str(reply)
        assert process.poll() is not None  # stopped
    finally:
        supervisor.release(worker)
