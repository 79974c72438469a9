"""Types are checked, not just written (issue #27, item 6): mypy, configured in pyproject.toml ([tool.mypy]), finds
nothing in cmpx, its built-in plugins and the example OpenVINO plugin (which uses only cmpx's public names).
typecheck/ links each package's import name to its folder, as the package-dir mapping does for an installed cmpx,
so that mypy reads ``cmpx.x`` imports as the modules they are."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

pytest.importorskip("mypy", reason="mypy is a test dependency: pip install -e '.[test]'")

PACKAGES = {"cmpx": "core", "cmpx_onnxrt": "backends/onnxrt", "cmpx_onnxref": "backends/onnxref",
            "cmpx_trt": "backends/trt", "cmpx_comparators": "comparators"}


def test_each_import_name_links_to_its_package_folder():
    for name, folder in PACKAGES.items():
        link = REPO / "typecheck" / name
        assert link.is_symlink() and link.resolve() == (REPO / folder).resolve(), name


# mypy's incremental cache, kept outside the checkout (as tests/test_versions.py keeps its environments) so that a
# fresh clone does not check all 244 modules from scratch (~16 s of CPU); mypy revalidates each entry by the
# module's content, so a changed module is checked again wherever its cache came from
CACHE = os.environ.get("CMPX_TEST_MYPY_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "cmpx", "mypy"))


def test_mypy_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", CACHE], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "MYPY_FORCE_COLOR": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    checked = re.search(r"no issues found in (\d+) source files", done.stdout)
    assert checked and int(checked.group(1)) > 150, done.stdout  # every module, under its import name
