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


def in_terminal(*args: str, columns: int = 80, timeout: float = 120) -> tuple[int, str]:
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
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", raw).replace("\x1b[2K", "").replace("\r\n", "\n")
    return [segment for line in text.split("\n") for segment in line.split("\r")]


def fits(line: str, columns: int = 80) -> bool:
    """A line fits, or is one word too long to break (a path)."""
    return len(line) <= columns or " " not in line.strip()


def test_a_mark_all_run_at_80_columns(models, run_cli):
    """Failing tensors, the first divergence and a tally of the passing ones; every line fits 80 columns, wrapped at
    word boundaries; an empty histogram bin has no bar. A pipe gets the same report unwrapped."""
    import re

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
