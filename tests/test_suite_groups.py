"""The suite's xdist groups hold (pyproject.toml runs it with --dist loadgroup): the Ray tests share one local Ray
per test process and the differential modules collect ONNX's node cases once, so a split group costs minutes of
CPU and starts Ray clusters beside each other. pytest-xdist has split groups silently before (its #1386, under
pytest 9.2): a small suite, run the way the README runs this one, must keep a group in one process."""

import subprocess
import sys


def test_an_xdist_group_runs_in_one_test_process(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "--dist loadgroup"\n')
    (tmp_path / "test_grouped.py").write_text(
        "import os\nimport pytest\n\npytestmark = pytest.mark.xdist_group('together')\n\n"
        + "".join(f"def test_{i}():\n    with open('workers.txt', 'a') as f:\n"
                  f"        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n\n" for i in range(6)))
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "3", "-q", "-p", "no:cacheprovider", "-p", "no:cmpx"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    workers = (tmp_path / "workers.txt").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers
