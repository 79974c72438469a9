"""Polygraphy's own CLI examples, every command line that runs without a GPU, run by both tools on the same models
and data, with the same verdicts (issue #29). The command lines, the stand-ins for TensorRT and what cannot run
here are listed in tests/polygraphy_examples.py, which builds the examples' models and scripts.

Each example is a workspace per tool; its command lines run in order, one test each (a test run alone first runs
the lines before it), and files one tool saves are read back by the other."""

import contextlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from polygraphy_examples import WORKFLOWS, Step, Workflow, exchange, saved_arrays

POLYGRAPHY = os.path.join(os.path.dirname(sys.executable), "polygraphy")
TOOLS = ("polygraphy", "cmpx")


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    program = {"cmpx": [sys.executable, "-m", "cmpx"], "polygraphy": [POLYGRAPHY], "python3": [sys.executable]}
    return program[words[0]] + words[1:]


class Workspace:
    """One example's two workspaces (``polygraphy/``, ``cmpx/``) and the outcome of each step run so far. A ``cmpx``
    command line runs in this process (``cmpx_here``: the same words through the same CLI, its workers forked from
    the session's fork server) while Polygraphy's runs beside it as a process; the other programs run as processes."""

    def __init__(self, workflow: Workflow, root: Path, cmpx_here):
        self.workflow, self.dirs, self.cmpx_here = workflow, {tool: root / tool for tool in TOOLS}, cmpx_here
        for directory in self.dirs.values():
            directory.mkdir(parents=True)
            workflow.files(directory)
        self.outcomes: dict[str, str | None] = {}  # step id: None when it gave the expected verdicts, else why not

    def run(self, step: Step) -> str | None:
        if step.prepare:
            for directory in self.dirs.values():
                step.prepare(directory)
        here = shlex.split(step.cmpx)[0] == "cmpx"
        started = {tool: subprocess.Popen(_argv(getattr(step, tool)), cwd=self.dirs[tool], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True)
                   for tool in TOOLS if not (tool == "cmpx" and here)}  # side by side
        problems, outputs, codes = [], {}, {}
        try:
            if here:
                with contextlib.chdir(self.dirs["cmpx"]):
                    done = self.cmpx_here(*shlex.split(step.cmpx)[1:])
                outputs["cmpx"], codes["cmpx"] = done.stdout + done.stderr, done.returncode
            for tool, process in started.items():
                outputs[tool] = process.communicate(timeout=300)[0]
                codes[tool] = process.returncode
        finally:
            for process in started.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()
        for tool in TOOLS:
            output = outputs[tool]
            expected = step.cmpx_expect if tool == "cmpx" and step.cmpx_expect is not None else step.expect
            missing = [text for text in getattr(step, f"{tool}_says") if text not in output]
            if codes[tool] != expected or missing:
                problems.append(f"{tool}: exit {codes[tool]}, expected {expected}"
                                + (f"; missing {missing}" if missing else "")
                                + f"\n$ {getattr(step, tool)}\n{output[-3000:]}")
        for name in step.same_data if not problems else ():
            ours, theirs = (saved_arrays(self.dirs[tool] / name) for tool in ("cmpx", "polygraphy"))
            if [sorted(feed) for feed in ours] != [sorted(feed) for feed in theirs] or not all(
                    np.array_equal(a[key], b[key]) and a[key].dtype == b[key].dtype
                    for a, b in zip(ours, theirs) for key in a):
                problems.append(f"{name}: the tools saved different arrays")
        if not problems:
            exchange(self.dirs["polygraphy"], self.dirs["cmpx"], step.swap)
        return "\n\n".join(problems) or None


@pytest.fixture(scope="module")
def workspaces():
    """Each example's Workspace, by name, made on first use."""
    return {}


def _cases():
    for workflow in WORKFLOWS:
        for index, step in enumerate(workflow.steps):
            marks = [pytest.mark.xdist_group(f"polygraphy-example-{workflow.name}")]  # one workspace per example
            if step.xfail:
                marks.append(pytest.mark.xfail(strict=True, reason=step.xfail))
            yield pytest.param(workflow, index, id=step.id, marks=marks)


@pytest.mark.parametrize("workflow, index", list(_cases()))
def test_each_example_command_line_gives_the_same_verdict_in_both_tools(workflow, index, workspaces,
                                                                        tmp_path_factory, cmpx_here, no_leaks):
    if workflow.name not in workspaces:
        workspaces[workflow.name] = Workspace(workflow, tmp_path_factory.mktemp(workflow.name), cmpx_here)
    workspace = workspaces[workflow.name]
    for step in workflow.steps[index if workflow.independent else 0:index + 1]:
        if step.id not in workspace.outcomes:
            workspace.outcomes[step.id] = workspace.run(step)
        if step.id != workflow.steps[index].id and workspace.outcomes[step.id]:
            pytest.fail(f"an earlier command line of {workflow.name} failed, {step.id}:\n{workspace.outcomes[step.id]}")
    step = workflow.steps[index]
    assert workspace.outcomes[step.id] is None, (f"{step.id}: {step.example}\n({step.note})\n\n"
                                                 f"{workspace.outcomes[step.id]}")


def test_polygraphys_data_command_says_what_cmpx_does_instead(run_cli, tmp_path):
    result = run_cli("data", "to-input", "inputs.json", "layerwise_golden.json", "-o", tmp_path / "layerwise.json")
    assert result.exit_code == 2, result.output
    assert "'data' is a Polygraphy command that cmpx does not have" in result.output, result.output
