"""What a person reads of a run (issue #30, items 4-8): the header first, the verdict of one backend alone, names
misspelt, tensors of a --mark-all run, the progress line in a pseudo-terminal at 80 columns."""

import os
import subprocess
import sys

from conftest import REPO

EXAMPLE = str(REPO / "examples" / "models" / "conv.onnx")


def test_the_header_comes_before_a_load_failure(run_cli):
    result = run_cli("run", EXAMPLE, "--onnxrt", "--backend", "faulty", "--faulty-fault", "load:raise",
                     plugins=["cmpx_test_faulty"])
    assert result.exit_code == 3, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("cmpx ") and "backends: onnxrt" in lines[0], result.output
    assert lines[1] == "ERROR   faulty failed during load: RuntimeError: injected failure during load", result.output
    alone = run_cli("run", EXAMPLE, "--backend", "faulty", "--faulty-fault", "load:exit", plugins=["cmpx_test_faulty"])
    assert alone.exit_code == 3, alone.output
    assert alone.output.splitlines()[0].startswith("cmpx "), alone.output
    assert alone.output.splitlines()[1].startswith("ERROR   faulty"), alone.output


def test_misspelt_names_get_a_did_you_mean(run_cli):
    """Each before any inference, exit 2, one line naming the likely intended name."""
    cases = {
        ("--backend", "onnxrtt"): "unknown backend 'onnxrtt' (did you mean 'onnxrt'?); available:",
        ("--backend", "onnxrt:fp61", "--onnxref"): "unknown transform 'fp61' (did you mean 'fp16'?)",
        ("--onnxrt", "--onnxref", "--compare", "cosin"): "unknown metric 'cosin' (did you mean 'cosine'?)",
        ("--onnxrt", "--onnxref", "--onnx-outputs", "YY"): "no markable tensor 'YY' (did you mean 'Y'?)",
        ("--onnxrt", "--onnxref", "--atol", "y:1e-3"): "--atol: 'y' (did you mean 'Y'?) is not one of the model "
                                                        "outputs: Y, Z",
        ("--onnxrt", "--onnxref", "--reference", "onxref"): "--reference 'onxref' (did you mean 'onnxref'?)",
        ("--onnxrt", "--onnxref", "--onnxrt-providr", "cpu"): "Did you mean",
        # '=' for ':' in a per-output value: the message writes the option as it was meant
        ("--onnxrt", "--onnxref", "--atol", "Y=1e-3"): "--atol: 'Y=1e-3': an output's value is written NAME:VALUE: "
                                                        "--atol Y:1e-3",
    }
    for words, expected in cases.items():
        result = run_cli("run", EXAMPLE, *words)
        assert result.exit_code == 2, (words, result.output)
        assert expected in result.output, (words, result.output)
        assert "Traceback" not in result.output and "loaded" not in result.output, result.output


def test_force_color_is_honoured_as_no_color_is():
    def verdict(**env):
        environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")} | env
        done = subprocess.run([sys.executable, "-m", "cmpx", "run", EXAMPLE, "--onnxrt", "--onnxref"],
                              capture_output=True, text=True, cwd=REPO, env=environment)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()[-1]

    assert verdict(FORCE_COLOR="1").startswith("\x1b[32mPASSED\x1b[0m | ")  # a pipe, coloured as asked
    assert verdict(FORCE_COLOR="1", NO_COLOR="1").startswith("PASSED | ")  # NO_COLOR wins
    assert verdict(FORCE_COLOR="0").startswith("PASSED | ") and verdict().startswith("PASSED | ")
