"""A small model zoo and sweep files for the sweep tests: three tiny models in zoo/ and a sweep file beside it."""

import json
import os
from pathlib import Path

from cmpx.sweep.threads import THREAD_VARIABLES
from cmpx.testing import models as modelgen

# Two runs: onnxrt against the reference evaluator (every model passes), and the fp16 graph against fp32 at the
# default tolerances, marked (conv and matmul mismatch, from a known first divergence; gather's table is exact).
RUNS = """
[defaults]
args = ["--iterations", "1"]

[[runs]]
name = "ref"
args = ["--backend", "onnxrt", "--backend", "onnxref"]
resources = {CPU = 1}

[[runs]]
name = "fp16"
args = "--backend onnxrt:fp16 --backend onnxrt --mark-all"
"""

VERDICTS = {
    ("zoo/conv.onnx", "ref"): "passed", ("zoo/conv.onnx", "fp16"): "mismatch",
    ("zoo/gather.onnx", "ref"): "passed", ("zoo/gather.onnx", "fp16"): "passed",
    ("zoo/matmul.onnx", "ref"): "passed", ("zoo/matmul.onnx", "fp16"): "mismatch",
}

# A data loader (--data-loader-script probe.py, for zoo/conv.onnx) that notes in seen.txt, from the cell's own
# process, the thread settings the run's workers inherit.
THREAD_PROBE = """import os
import numpy as np


def load_data():
    with open(os.path.join(os.path.dirname(__file__), "seen.txt"), "a") as f:
        f.write(" ".join(os.environ.get(name, "-") for name in NAMES) + "\\n")
    yield {"X": np.ones((1, 3, 8, 8), np.float32)}
""".replace("NAMES", repr(THREAD_VARIABLES))


BUILDERS = {"conv": modelgen.conv_model, "gather": modelgen.gather_model, "matmul": modelgen.matmul_chain}


def write_zoo(root: Path, runs: str = RUNS, names=("conv", "gather", "matmul")) -> Path:
    """zoo/NAME.onnx for each name, and sweep.toml (models = zoo/*.onnx, then ``runs``); returns the file."""
    (root / "zoo").mkdir(exist_ok=True)
    for name in names:
        modelgen.save(BUILDERS[name](), root / "zoo" / f"{name}.onnx")
    path = root / "sweep.toml"
    path.write_text('models = ["zoo/*.onnx"]\n' + runs)
    return path


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def verdicts(out: Path) -> dict:
    return {(cell["model"], cell["run"]): cell["verdict"] for cell in summary(out)["cells"]}


def processes_marked(marker: str) -> list[int]:
    """Live processes whose environment holds CMPX_TEST_MARK=marker: everything a subprocess started with it
    did, whoever became their parent."""
    needle = f"CMPX_TEST_MARK={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(entry))
    return found


def processes_using(directory: str) -> list[int]:
    """Live processes (other than this one) holding a file open in ``directory``: Ray's agents, which write their
    titles over their environment, where an environment mark cannot find them."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            descriptors = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                if os.readlink(f"/proc/{entry}/fd/{fd}").startswith(directory + "/"):
                    found.append(int(entry))
                    break
            except OSError:
                continue
    return found


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (not ``pid`` itself), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found
