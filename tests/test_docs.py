"""Documentation that cannot drift: the README's sample output is what cmpx prints, and the code in docs/api.md
runs as written."""

import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO

NUMBER = re.compile(r"(?<![\w.])-?\d+(\.\d+)*(e[-+]?\d+)?(?![\w.])")


def _masked(text: str) -> list[str]:
    """Lines with every number replaced by N (timings, the last digits of errors and the frameworks' versions vary by
    machine), and spaces collapsed (column widths follow the numbers)."""
    return [" ".join(NUMBER.sub("N", line).split()) for line in text.strip().splitlines()]


def _samples(path):
    """(command, expected output) for each fenced block of the file that starts with ``$ cmpx``."""
    text = path.read_text()
    for block in re.findall(r"```\n(\$ cmpx .*?)```", text, re.S):
        command, _, output = block.partition("\n")
        yield command[2:], output


@pytest.mark.parametrize("command, expected", list(_samples(REPO / "README.md")))
def test_the_readmes_sample_output_is_what_cmpx_prints(command, expected, no_leaks, tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")  # run where the README's paths lead, writing nothing there
    done = subprocess.run([sys.executable, "-m", "cmpx", *shlex.split(command)[1:]], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert _masked(done.stdout) == _masked(expected), done.stdout


def test_the_readmes_local_error_excerpt_is_what_cmpx_prints(no_leaks, tmp_path):
    """The README quotes the --local-error section of a run: its lines are what that run prints."""
    text = (REPO / "README.md").read_text()
    command = re.search(r"^    (cmpx run .*--local-error)$", text, re.M).group(1)
    excerpt = re.search(r"```\n(Local error of .*?)```", text, re.S).group(1)
    (tmp_path / "examples").symlink_to(REPO / "examples")
    done = subprocess.run([sys.executable, "-m", "cmpx", *shlex.split(command)[1:]], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    printed, quoted = _masked(done.stdout), _masked(excerpt)
    start = printed.index(quoted[0])
    assert printed[start:start + len(quoted)] == quoted, done.stdout


def _python_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def test_the_api_guide_has_a_notebook_example_and_a_pytest_gate():
    blocks = _python_blocks(REPO / "docs" / "api.md")
    assert any("echo=print" in block for block in blocks)
    assert any("def test_" in block for block in blocks)


@pytest.mark.parametrize("index", range(len(_python_blocks(REPO / "docs" / "api.md"))))
def test_the_api_guides_code_runs_as_written(index, tmp_path, no_leaks):
    code = _python_blocks(REPO / "docs" / "api.md")[index]
    script = tmp_path / ("test_guide.py" if "def test_" in code else "guide.py")
    script.write_text(code)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)] \
        if "def test_" in code else [sys.executable, str(script)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
