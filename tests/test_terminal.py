"""What users see: verbosity, colour rules, progress, the summary table and shell completion."""

import io
import os
import re
import subprocess
import sys

from cmpx.reports.terminal import Progress, colour_wanted, paint
from conftest import REPO

EXAMPLE = "examples/models/conv.onnx"
BACKENDS = ("--backend", "onnxrt", "--backend", "onnxref")


def test_quiet_default_and_verbose(run_cli):
    quiet = run_cli("run", EXAMPLE, *BACKENDS, "-q")
    assert quiet.exit_code == 0
    assert "PASSED  Y" not in quiet.output and "loaded" not in quiet.output and "Summary" in quiet.output
    default = run_cli("run", EXAMPLE, *BACKENDS)
    assert "PASSED  Y:" in default.output and "abs error:" not in default.output
    verbose = run_cli("run", EXAMPLE, *BACKENDS, "-v")
    assert "PASSED  Y:" in verbose.output and "abs error: mean" in verbose.output
    failing_quiet = run_cli("run", EXAMPLE, *BACKENDS, "-q", "--atol", "0", "--rtol", "0")
    assert "FAILED  Y:" in failing_quiet.output and "abs error histogram:" in failing_quiet.output


def test_the_summary_table(run_cli):
    result = run_cli("run", EXAMPLE, *BACKENDS)
    assert re.search(r"onnxrt vs onnxref: 1/1 iterations passed \(100%\), 2/2 outputs passed \(260 elements\), worst abs [0-9.e-]+, "
                     r"worst rel [0-9.e-]+", result.output)
    # each backend with its framework's version (onnx's for the reference evaluator)
    assert re.search(r"backend\s+load s\s+mean infer s\n\s+onnxrt \d+\.\d+[\w.]*\s+[0-9.]+\s+[0-9.]+\n"
                     r"\s+onnxref \d+\.\d+", result.output), result.output


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert colour_wanted(FakeTerminal()) and not colour_wanted(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour_wanted(FakeTerminal())
    assert "\x1b[" in paint("PASSED  Y", "PASSED", True) and paint("PASSED  Y", "PASSED", False) == "PASSED  Y"


def test_output_to_a_pipe_has_no_escape_codes():
    done = subprocess.run([sys.executable, "-m", "cmpx", "run", EXAMPLE,
                           *BACKENDS, "--atol", "0", "--rtol", "0"], capture_output=True, text=True, cwd=REPO)
    assert "\x1b[" not in done.stdout + done.stderr and "FAILED" in done.stdout


def test_progress_is_a_rewritten_line_on_a_terminal_only():
    terminal, pipe = FakeTerminal(), io.StringIO()
    for stream in (terminal, pipe):
        progress = Progress.for_terminal(stream)
        progress.update("loading", ["trt"], 12.5)
        progress.clear()
    assert terminal.getvalue().startswith("\r\x1b[2Kloading: trt 12.5 s") and pipe.getvalue() == ""


def test_shell_completion_for_commands_and_backend_names():
    script = subprocess.run(["cmpx"], env=dict(os.environ, _CMPX_COMPLETE="bash_source"), capture_output=True,
                            text=True, executable=os.path.join(os.path.dirname(sys.executable), "cmpx"))
    assert "_cmpx_completion()" in script.stdout
    words = subprocess.run(["cmpx"], env=dict(os.environ, _CMPX_COMPLETE="bash_complete",
                                              COMP_WORDS=f"cmpx run {EXAMPLE} --backend onn", COMP_CWORD="4"),
                           capture_output=True, text=True, cwd=REPO,
                           executable=os.path.join(os.path.dirname(sys.executable), "cmpx"))
    assert "plain,onnxref" in words.stdout and "plain,onnxrt" in words.stdout
