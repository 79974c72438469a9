"""Documentation that cannot drift: the sample output of the README and docs/reduce.md is what cmpx prints, the
README's tour runs with the exit codes it states, the code in docs/api.md runs as written, the README's set-up
commands are what .ci/run runs, the README stays short, and every relative link leads somewhere."""

import re
import shlex
import unicodedata
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


SAMPLE_PAGES = [REPO / "README.md", REPO / "docs" / "reduce.md"]  # the pages whose `$ cmpx` samples run as written
SAMPLES = [sample for page in SAMPLE_PAGES for sample in _samples(page)]


def test_the_samples_that_run_are_all_there():
    """The samples run below are the README's first run and docs/reduce.md's reduction: a page that lost one (or moved
    it to a page not in SAMPLE_PAGES) fails here instead of silently running fewer."""
    assert [command.split()[1] for command, _ in SAMPLES] == ["run", "reduce"]


@pytest.mark.parametrize("command, expected", SAMPLES)
def test_the_readmes_sample_output_is_what_cmpx_prints(command, expected, no_leaks, tmp_path):
    (tmp_path / "examples").symlink_to(REPO / "examples")  # run where the README's paths lead, writing nothing there
    done = subprocess.run([sys.executable, "-m", "cmpx", *shlex.split(command)[1:]], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert _masked(done.stdout) == _masked(expected), done.stdout


def test_the_readmes_local_error_excerpt_is_what_cmpx_prints(no_leaks, tmp_path):
    """docs/reduce.md quotes the --local-error section of a run: its lines are what that run prints."""
    text = (REPO / "docs" / "reduce.md").read_text()
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


README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]


def test_the_readme_is_read_in_five_minutes():
    assert len(README.read_text().splitlines()) <= 300


def test_the_readmes_set_up_commands_are_what_ci_runs():
    """The README's install line installs what .ci/run installs, and its test command is .ci/run's last line."""
    readme, ci = README.read_text(), (REPO / ".ci" / "run").read_text()
    setup = readme[readme.index("## Set-up"):readme.index("\n## ", readme.index("## Set-up") + 1)]
    commands = re.findall(r"^    (\S.*)$", setup, re.M)
    assert len(commands) == 2, commands
    install, test = commands
    ci_install = re.search(r"^\.venv/bin/pip install --quiet (-e .*)$", ci, re.M).group(1)
    assert f".venv/bin/pip install {ci_install} && " in install, (install, ci_install)
    assert install.startswith("python3 -m venv .venv && ") and "&& .venv/bin/cmpx run examples/models/" in install
    assert test == ci.strip().splitlines()[-1] == ".venv/bin/python -m pytest -n auto"


def _tour():
    """(command, exit code) for each command of the README's tour, the code from the "(exit N)" of its paragraph."""
    text = README.read_text()
    tour = text[text.index("## A short tour"):text.index("## Exit codes")]
    steps = re.findall(r"^    (cmpx [^\n]*?)(?:  +#[^\n]*)?\n\n(.*?)(?:\n\n|\Z)", tour, re.M | re.S)
    codes = [re.search(r"\(exit (\d+)\)", prose) for _, prose in steps]
    return [(command, int(code.group(1)) if code else None) for (command, _), code in zip(steps, codes)]


def test_the_tour_has_its_steps():
    assert [command for command, code in _tour() if code is None] == []  # each says "(exit N)" after its command
    assert [command.split()[1:3] for command, _ in _tour()] == [
        ["run", "examples/models/conv.onnx"], ["run", "examples/models/two_faults.onnx"],
        ["run", "examples/models/conv.onnx"], ["run", "examples/models/two_faults.onnx"],
        ["tolerances", "examples/models/conv.onnx"], ["reduce", "examples/models/two_faults.onnx"],
        ["precision", "examples/models/fp16_islands.onnx"], ["sweep", "examples/zoo.toml"]]


@pytest.mark.parametrize("command, code", [step for step in _tour() if step[0] not in {c for c, _ in SAMPLES}])
def test_the_tour_runs_as_written(command, code, no_leaks, tmp_path):
    """Each step of the README's tour (those not already run as a sample) exits as its paragraph says."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    done = subprocess.run([sys.executable, "-m", "cmpx", *shlex.split(command)[1:]], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == code, done.stdout[-3000:] + done.stderr[-2000:]
    if "--mark-all" in command:
        assert "first divergence: t20 (node20_BatchNormalization, BatchNormalization)" in done.stdout, done.stdout
    if command.startswith("cmpx precision"):
        assert "in float32: 4 of 14 node(s)" in done.stdout and "verdict: PASSED with the list" in done.stdout
    if "--oracle" in command:
        assert "further from onnxref:fp64 than onnxrt: the disagreement is onnxref's" in done.stdout, done.stdout


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (not - or _), spaces to -."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(page) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    anchors, seen = set(), {}
    for heading in re.findall(r"^#{1,6} (.*)$", text, re.M):
        slug = _slug(heading)
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_anchors_are_githubs():
    assert _slug("Many models: `cmpx sweep`") == "many-models-cmpx-sweep"
    assert _slug("The reference evaluator's faults") == "the-reference-evaluators-faults"
    assert _slug("5. Testing a plugin") == "5-testing-a-plugin"


def _links(page):
    """The relative link targets of a page, outside code (fenced blocks, indented blocks and inline code)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    text = re.sub(r"^    .*$", "", text, flags=re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [target for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(page):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading for #{anchor} in {file.name}")
    assert broken == []


def test_the_readme_links_every_docs_page():
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in _links(README)}
    assert {page.resolve() for page in PAGES[1:]} <= linked
