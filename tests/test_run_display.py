"""What a person reads of a run (issue #30, items 4-8): the header first, the verdict of one backend alone, names
misspelt, tensors of a --mark-all run, the progress line in a pseudo-terminal at 80 columns."""

import os
import re
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


def in_terminal(*args: str, columns: int = 80, timeout: float = 120, plugins: bool = False) -> tuple[int, str]:
    """Run the cmpx CLI in a pseudo-terminal of ``columns`` columns; its exit code and everything it wrote."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    if plugins:  # the test plugins (cmpx_test_faulty), loaded with -p
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "tests" / "plugins"), env.get("PYTHONPATH")]))
    process = subprocess.Popen([sys.executable, "-m", "cmpx", *map(str, args)], stdin=slave, stdout=slave,
                               stderr=slave, cwd=REPO, env=env, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other side closed: EIO on Linux
                break
            if not data:
                break
            chunks.append(data)
        elif process.poll() is not None:
            break
    os.close(master)
    return process.wait(timeout=30), b"".join(chunks).decode("utf-8", "replace")


def screen_lines(raw: str) -> list[str]:
    """What a terminal shows line by line, with each rewrite of the progress line as a line of its own."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", raw).replace("\x1b[2K", "").replace("\r\n", "\n")
    return [segment for line in text.split("\n") for segment in line.split("\r")]


def fits(line: str, columns: int = 80) -> bool:
    """A line fits, or is one word too long to break (a path)."""
    return len(line) <= columns or " " not in line.strip()


def test_a_mark_all_run_at_80_columns(models, run_cli):
    """Failing tensors, the first divergence and a tally of the passing ones; every line fits 80 columns, wrapped at
    word boundaries; an empty histogram bin has no bar. A pipe gets the same report unwrapped."""
    chain = models.matmul_chain
    code, raw = in_terminal("run", chain, "--backend", "onnxrt:fp16", "--backend", "onnxrt", "--mark-all")
    lines = screen_lines(raw)
    assert code == 1, raw
    assert all(fits(line) for line in lines), [line for line in lines if not fits(line)]
    assert any(line.startswith("  first divergence: mm0 (MatMul_0, MatMul): max abs") for line in lines), raw
    verdict = next(i for i, line in enumerate(lines) if line.startswith("FAILED (mismatch) | 1 comparison(s)"))
    assert lines[verdict + 1] == "    element(s) compared | exit 1", raw  # broken between words, indented
    bins = [line for line in lines if re.match(r"\s+(~0|\[\S+, \S+\))\s+\d+", line)]
    assert bins and all(line.endswith(" 0") == ("#" not in line) for line in bins), bins
    assert any(line.endswith(" 0") for line in bins), bins  # the case in point: an empty bin between full ones
    passing, raw = in_terminal("run", EXAMPLE, "--onnxrt", "--onnxref", "--mark-all")
    lines = screen_lines(raw)
    assert passing == 0 and all(fits(line) for line in lines), raw
    assert "  PASSED  1 more marked tensor(s) (one line each with -v)" in lines, raw
    assert not any(line.startswith("  PASSED  conv:") for line in lines), raw
    listed = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", "--mark-all", "-v")
    assert "  PASSED  conv: max abs" in listed.output and "more marked tensor" not in listed.output
    piped = run_cli("run", EXAMPLE, "--onnxrt", "--onnxref", "--mark-all")
    assert re.search(r"\nPASSED \| 1 comparison\(s\) over 1 iteration\(s\), 3 output\(s\), 516 element\(s\) compared "
                     r"\| exit 0\n", piped.output), piped.output  # a pipe: one line, unwrapped


def test_a_suggestion_is_a_likely_misspelling_not_another_number():
    from cmpx.suggest import closest, did_you_mean

    assert closest("ONNXRTT", ["onnxref", "onnxrt"]) == "onnxrt" and closest("fp61", ["fp8", "fp16"]) == "fp16"
    assert closest("fp4", ["fp8", "fp16"]) is None and closest("mm13", ["mm1", "mm12"]) is None  # other numbers
    assert did_you_mean("zzz", ["onnxrt"]) == "" and did_you_mean("cosin", ["cosine"]) == " (did you mean 'cosine'?)"


def test_progress_says_which_iteration_of_how_many_and_what_is_left(run_cli):
    """On a terminal the progress line counts the iterations (4 of them, each about a second) and estimates what
    is left; a pipe gets none of it."""
    words = ("run", EXAMPLE, "--onnxrt", "--backend", "faulty", "--faulty-fault", "infer:sleep", "--iterations", "4",
             "-p", "cmpx_test_faulty")
    code, raw = in_terminal(*words, plugins=True)
    lines = screen_lines(raw)
    assert code == 0, raw
    shown = [line for line in lines if re.match(r"iteration \d \(\d/4\): faulty \d+\.\d s \| \d+ s elapsed", line)]
    assert any(line.startswith("iteration 0 (1/4): ") and "left" not in line for line in shown), lines
    assert any(re.match(r"iteration 3 \(4/4\): .* elapsed, ~\d+ s left$", line) for line in shown), lines
    assert all(fits(line) for line in lines)
    piped = run_cli(*words, plugins=["cmpx_test_faulty"])
    assert piped.exit_code == 0 and "elapsed" not in piped.output and "(1/4)" not in piped.output


def test_local_error_and_slices_count_their_steps():
    import io
    import time

    from cmpx.comparison.compare import ComparisonSettings
    from cmpx.plan import RunPlan
    from cmpx.reports.terminal import Progress
    from cmpx.reports.text import TextReporter

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    reporter = TextReporter(RunPlan(None, (), (), None, ComparisonSettings([]), {}), lambda text: None,
                            progress=Progress.for_terminal(terminal))
    reporter.waiting("local error, node 1/40", ["onnxrt"], 0.0)
    time.sleep(0.25)
    reporter.waiting("local error, node 11/40", ["onnxrt"], 1.0)
    assert re.search(r"local error, node 11/40: onnxrt 1.0 s \| 0 s elapsed, ~\d s left$", terminal.getvalue())
    time.sleep(0.25)
    reporter.waiting("iteration 0, slice 2/5", ["trt"], 0.5)
    assert terminal.getvalue().endswith("iteration 0, slice 2/5: trt 0.5 s | 0 s elapsed")  # its first: no pace yet


def test_reduce_shows_each_candidate_run_on_the_progress_line(tmp_path):
    code, raw = in_terminal("reduce", "examples/models/two_faults.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                            "-o", tmp_path / "reduced.onnx")
    lines = screen_lines(raw)
    assert code == 1, raw  # reduced to the node that fails: exit 1, a mismatch
    assert any(re.match(r"full model, 0 s \| (starting|loading): onnxref, onnxrt", line) for line in lines), lines
    assert any(re.match(r"candidate \d+ \((end|start)\), \d+/60 nodes, \d+ s \| (starting|loading|iteration)", line)
               for line in lines), lines
    assert any(re.match(r"candidate \d+ \((end|start)\): ", line) for line in lines), lines
    assert any(re.match(r"\s+.*\| nodes left: \d+$", line) for line in lines), lines  # wrapped at a word boundary
    assert all(fits(line) for line in lines), [line for line in lines if not fits(line)]
