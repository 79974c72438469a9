"""Comparing framework versions: a backend's worker under another Python (``--backend onnxrt@PYTHON``,
``onnxrt@env:NAME``), with cmpx's worker code linked in where cmpx is not installed, and ``cmpx env``.

The environments (an older ONNX Runtime; the worker's needs only) are made with ``cmpx env create`` on first use
and kept between runs in $CMPX_TEST_ENVS_DIR (default ~/.cache/cmpx/test-envs, under $XDG_CACHE_HOME if set): the
first run pays for the downloads and installs (1-2 minutes here), later runs only check that they still work (a
few seconds). Everything else here is made in tmp_path.
"""

import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO, run_cmpx

OLD_ORT = "1.20.1"  # a year older than the onnxruntime cmpx installs; the oldest minor with numpy 2 and Python 3.11
OLD_ENV = f"ort-{OLD_ORT}"
EXAMPLES = REPO / "examples" / "models"
OFFLINE = ("No matching distribution", "Could not find a version", "NewConnectionError", "Name or service not known",
           "Temporary failure in name resolution", "Network is unreachable")


def _test_envs() -> Path:
    if os.environ.get("CMPX_TEST_ENVS_DIR"):
        return Path(os.environ["CMPX_TEST_ENVS_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cmpx" / "test-envs"


def _own_path_only() -> dict:
    """This process's environment variables without its PYTHONPATH: another Python must see only its own packages."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def _works(python: Path, check: str) -> str | None:
    if not python.is_file():
        return None
    done = subprocess.run([str(python), "-c", check], capture_output=True, text=True, timeout=120, env=_own_path_only())
    return done.stdout.strip() if done.returncode == 0 else None


def _make_env(root: Path, name: str, requirements: list[str], check: str, expected: str) -> None:
    """Make environment ``name`` with ``cmpx env create`` unless it is there and ``check`` prints ``expected``."""
    python = root / name / "bin" / "python"
    if _works(python, check) == expected:
        return
    shutil.rmtree(root / name, ignore_errors=True)
    made = run_cmpx("env", "create", name, *requirements, env={"CMPX_ENVS_DIR": str(root)}, timeout=1200)
    if made.returncode != 0 and any(sign in made.stderr for sign in OFFLINE):
        pytest.skip(f"cannot install {' '.join(requirements) or 'numpy and msgpack'} (no package index here?): "
                    f"{made.stderr.strip().splitlines()[-1]}")
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(python), made.stdout  # it prints its Python
    assert _works(python, check) == expected


@pytest.fixture(scope="session")
def envs():
    """Two environments made with ``cmpx env create`` on first use and reused while they work: OLD_ENV with onnxruntime
    OLD_ORT (and onnx, which marking needs in the worker), and "worker-only" with nothing but the worker's needs. A
    lock keeps two test runs from making them at once."""
    root = _test_envs()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _make_env(root, OLD_ENV, [f"onnxruntime=={OLD_ORT}", "onnx"],
                  "import onnxruntime, onnx, numpy, msgpack; print(onnxruntime.__version__)", OLD_ORT)
        _make_env(root, "worker-only", [], "import numpy, msgpack, importlib.util as u; "
                                           "print(u.find_spec('onnxruntime') is None)", "True")
    return {"root": str(root), "env": {"CMPX_ENVS_DIR": str(root)}}


@pytest.fixture(scope="session")
def old_ort(envs):
    return dict(envs, name=OLD_ENV, python=str(Path(envs["root"]) / OLD_ENV / "bin" / "python"),
                dir=str(Path(envs["root"]) / OLD_ENV))


@pytest.fixture
def bare_python(tmp_path):
    """A virtual environment with nothing installed (not even pip): no numpy, no msgpack."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True, timeout=120)
    return tmp_path / "bare"


def _report(path) -> dict:
    return {b["name"]: b for b in json.loads(Path(path).read_text())["backends"]}


def _this_onnxruntime() -> str:
    import onnxruntime

    return onnxruntime.__version__


@pytest.mark.parametrize("model, extra", [("conv.onnx", ()), ("dynamic_identity.onnx", ("--input-shapes", "X:[1,2,4,4]"))])
def test_an_older_onnxruntime_is_compared_with_this_one_on_the_example_models(run_cli, old_ort, tmp_path, model,
                                                                              extra):
    report = tmp_path / "report.json"
    result = run_cli("run", EXAMPLES / model, "--backend", "onnxrt", "--backend", f"onnxrt@env:{OLD_ENV}",
                     "--mark-all", *extra, "--report-json", report, env=old_ort["env"])
    assert result.exit_code == 0, result.output
    new, old = _this_onnxruntime(), f"{OLD_ORT} ({old_ort['dir']})"
    header = result.output.splitlines()[0]
    assert f"backends: onnxrt {new}, onnxrt {old} |" in header, header
    assert f"{old_ort['python']} (Python " in result.output and "has no cmpx installed: its worker runs this " \
                                                                "cmpx's code, linked in" in result.output
    assert f"[iteration 0] onnxrt vs onnxrt {old} (reference)" in result.output
    assert f"onnxrt vs onnxrt {old}: 1/1 iterations passed" in result.output
    backends = _report(report)
    mine, theirs = backends["onnxrt"], backends[f"onnxrt@env:{OLD_ENV}"]
    assert (mine["framework_version"], theirs["framework_version"]) == (new, OLD_ORT)
    assert theirs["label"] == f"onnxrt {old}" and theirs["python_given"] == f"env:{OLD_ENV}"
    assert theirs["runtime"]["python"] == old_ort["python"] and theirs["runtime"]["linked"]
    assert theirs["runtime"]["separate"] and not mine["runtime"]["separate"] and not mine["runtime"]["linked"]
    pairs = json.loads(report.read_text())["pairs"]
    assert pairs[0]["outputs"] == pairs[0]["outputs_passed"] == (3 if model == "conv.onnx" else 1)  # conv is marked


def test_versions_compare_on_a_generated_model_marked_and_saved_with_their_versions(run_cli, old_ort, cmpx_models,
                                                                                   tmp_path):
    """A six-layer matmul chain, every tensor marked, the older runtime as the reference; the saved run says which
    version made which outputs, and a later run against it says so too."""
    model = cmpx_models.matmul_chain(layers=6, size=32)
    old = f"onnxrt@env:{OLD_ENV}"
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", old, "--reference", old, "--mark-all",
                     "--iterations", "2", "--save-outputs", tmp_path / "saved", env=old_ort["env"])
    assert result.exit_code == 0, result.output
    assert "2/2 iterations passed (100%), 26/26 outputs passed (" in result.output  # 6 x (MatMul, Tanh), Y, S
    lines = [json.loads(line) for line in (tmp_path / "saved" / "cmpx-run.jsonl").read_text().splitlines()[1:]]
    assert lines.pop() == {"complete": True, "iterations": 2}  # the last line marks the run complete
    made_by = {line["source"]: line["backend"] for line in lines}
    assert made_by["onnxrt"]["framework_version"] == _this_onnxruntime()
    assert made_by[old]["framework_version"] == OLD_ORT and made_by[old]["python"] == old_ort["python"]
    assert made_by[old]["label"] == f"onnxrt {OLD_ORT} ({old_ort['dir']})"
    later = run_cli("run", model, "--backend", "onnxrt", "--load-outputs", tmp_path / "saved", "--mark-all",
                    "--iterations", "2")
    assert later.exit_code == 0, later.output
    header = next(line for line in later.output.splitlines() if line.startswith("cmpx "))
    assert (f"onnxrt@saved (saved by onnxrt {_this_onnxruntime()}), {old}@saved (saved by onnxrt {OLD_ORT} "
            f"({old_ort['dir']}))" in header), header


def test_a_python_without_msgpack_is_a_clear_failure_of_that_backend(run_cli, bare_python, tmp_path):
    report = tmp_path / "report.json"
    result = run_cli("run", EXAMPLES / "conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--backend", f"onnxrt@{bare_python}", "--report-json", report)
    assert result.exit_code == 3, result.output
    python = bare_python / "bin" / "python"
    message = (f"onnxrt@{bare_python} failed during start: {python} (Python {sys.version.split()[0]}, in "
               f"{bare_python}) has no numpy and no msgpack, which cmpx's worker needs; install them there: "
               f"{python} -m pip install numpy msgpack")
    assert f"ERROR   {message}" in result.output
    assert "Traceback" not in result.output and "last lines of its stderr" not in result.output
    assert "onnxrt vs onnxref: 1/1 iterations passed" in result.output  # the others are still compared
    failure = _report(report)[f"onnxrt@{bare_python}"]["failure"]
    assert failure["phase"] == "start" and failure["kind"] == "error" and "no numpy and no msgpack" in failure["message"]


def test_an_environment_with_another_cmpx_protocol_is_a_clear_failure(run_cli, bare_python):
    """A cmpx installed there comes before the coordinator's linked code, and its hello is checked: here an old cmpx
    whose worker speaks protocol 2 (written by hand: the environment has no msgpack)."""
    purelib = subprocess.run([str(bare_python / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    worker = Path(purelib) / "cmpx" / "transport" / "worker"
    worker.mkdir(parents=True)
    (Path(purelib) / "cmpx" / "__init__.py").write_text("__version__ = '0.0.1'\n")
    (Path(purelib) / "cmpx" / "transport" / "__init__.py").write_text("")
    (worker / "__init__.py").write_text("")
    (worker / "__main__.py").write_text(
        "import os, struct, sys, time\n"
        "def text(s):\n"
        "    return bytes([0xa0 | len(s)]) + s.encode()\n"
        "hello = (b'\\x84' + text('op') + text('hello') + text('pid') + b'\\xce' + struct.pack('>I', os.getpid())\n"
        "         + text('protocol') + b'\\x02' + text('cmpx_version') + text('0.0.1'))\n"
        "os.write(int(sys.argv[2]), struct.pack('>I', len(hello)) + hello)\n"
        "time.sleep(60)\n")
    result = run_cli("run", EXAMPLES / "conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--backend", f"onnxrt@{bare_python}")
    assert result.exit_code == 3, result.output
    from cmpx import __version__
    from cmpx.transport.protocol import PROTOCOL_VERSION

    assert (f"onnxrt@{bare_python} failed during start: its worker speaks cmpx protocol 2 and this coordinator "
            f"protocol {PROTOCOL_VERSION} ({bare_python / 'bin' / 'python'} has cmpx 0.0.1 installed); install cmpx "
            f"{__version__} there, or uninstall it there and cmpx links its own worker code") in result.output


def test_an_environment_with_a_cmpx_without_this_worker_is_a_clear_failure(run_cli, bare_python):
    purelib = subprocess.run([str(bare_python / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "cmpx").mkdir()
    (Path(purelib) / "cmpx" / "__init__.py").write_text("__version__ = '0.0.1'\n")  # an old layout: no transport
    result = run_cli("run", EXAMPLES / "conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--backend", f"onnxrt@{bare_python}")
    assert result.exit_code == 3, result.output
    assert (f"onnxrt@{bare_python} failed during start: {bare_python / 'bin' / 'python'} (Python "
            f"{sys.version.split()[0]}, in {bare_python}) has a cmpx without its worker (") in result.output
    assert "install this cmpx version there, or uninstall it there" in result.output


def test_a_framework_missing_there_is_named_with_that_python(run_cli, old_ort):
    """The openvino plugin's package is linked in like cmpx's own; OpenVINO itself is not in that environment."""
    pytest.importorskip("cmpx_openvino", reason="the example plugin: pip install -e examples/plugins/cmpx-openvino")
    result = run_cli("run", EXAMPLES / "conv.onnx", "--backend", "onnxrt", "--backend", f"openvino@env:{OLD_ENV}",
                     env=old_ort["env"])
    assert result.exit_code == 3, result.output
    assert (f"openvino@env:{OLD_ENV} failed during load: ModuleNotFoundError: No module named 'openvino', in "
            f"{old_ort['python']} (Python ") in result.output
    assert "install it there" in result.output


def test_a_plugin_module_named_with_p_runs_under_another_python_without_pluggy(run_cli, old_ort):
    """The smallest plugin of docs/plugins.md ('In short') keeps its backend class next to its hooks: its module is
    linked in as a file, and imports there although pluggy is not installed (hooks run only in the coordinator)."""
    assert _works(Path(old_ort["python"]), "import importlib.util as u; print(u.find_spec('pluggy'))") == "None"
    result = run_cli("run", EXAMPLES / "conv.onnx", "--backend", f"mine@env:{OLD_ENV}", "--backend", "onnxrt",
                     plugins=["cmpx_test_minimal"], env=old_ort["env"])
    assert result.exit_code == 0, result.output
    assert f"mine ({old_ort['dir']}) vs onnxrt: 1/1 iterations passed" in result.output  # no version: it says none


def test_a_python_too_old_for_the_worker_is_named(run_cli):
    candidates = glob.glob(os.path.expanduser("~/.pyenv/versions/3.[6-9].*/bin/python3"))
    candidates += [shutil.which(f"python3.{minor}") for minor in range(6, 10)]
    old = next((path for path in candidates if path and subprocess.run(
        [path, "-c", "import sys; sys.exit(sys.version_info >= (3, 10))"], capture_output=True,
        env=_own_path_only()).returncode == 0), None)
    if old is None:
        pytest.skip("no Python older than 3.10 on this machine")
    result = run_cli("run", EXAMPLES / "conv.onnx", "--backend", "onnxrt", "--backend", f"onnxrt@{old}")
    assert result.exit_code == 3, result.output
    assert f"failed during start: {old}" in result.output and "is too old: cmpx's worker needs Python 3.10 or " \
                                                              "newer" in result.output


def test_a_backend_in_an_environment_without_its_framework_is_named_with_that_python(run_cli, envs):
    python = Path(envs["root"]) / "worker-only" / "bin" / "python"
    result = run_cli("run", EXAMPLES / "conv.onnx", "--backend", "onnxref", "--backend", "onnxrt@env:worker-only",
                     env=envs["env"])
    assert result.exit_code == 3, result.output
    assert (f"onnxrt@env:worker-only failed during load: ModuleNotFoundError: No module named 'onnxruntime', in "
            f"{python} (Python ") in result.output and "install it there" in result.output


def test_env_list_create_and_remove_say_what_they_did(envs, tmp_path):
    listed = run_cmpx("env", "list", env=envs["env"])
    assert listed.returncode == 0 and f"{OLD_ENV}" in listed.stdout and "worker-only" in listed.stdout
    again = run_cmpx("env", "create", OLD_ENV, "onnxruntime", env=envs["env"])
    assert again.returncode == 2 and f"environment {OLD_ENV!r} already exists" in again.stderr
    assert (Path(envs["root"]) / OLD_ENV / "bin" / "python").is_file()  # untouched
    mine = {"CMPX_ENVS_DIR": str(tmp_path / "envs")}
    assert "no environments in" in run_cmpx("env", "list", env=mine).stdout
    (tmp_path / "envs" / "gone" / "bin").mkdir(parents=True)
    (tmp_path / "envs" / "gone" / "bin" / "python").symlink_to(sys.executable)
    removed = run_cmpx("env", "remove", "gone", env=mine)
    assert removed.returncode == 0 and not (tmp_path / "envs" / "gone").exists()
    missing = run_cmpx("env", "remove", "gone", env=mine)
    assert missing.returncode == 2 and "no environment 'gone'" in missing.stderr
    bad = run_cmpx("env", "create", "x", "--python", str(tmp_path / "nope"), env=mine)
    assert bad.returncode == 2 and "is not an executable Python" in bad.stderr


def test_a_failed_env_create_keeps_nothing(tmp_path, monkeypatch):
    """The real steps, with the environment made without pip so that the install step really fails (fast)."""
    from cmpx import envs
    from cmpx.errors import UsageError

    monkeypatch.setenv("CMPX_ENVS_DIR", str(tmp_path / "envs"))
    steps = []

    def without_pip(command):
        steps.append(command)
        if command[1:3] == ["-m", "venv"]:
            command = [*command[:3], "--without-pip", *command[3:]]
        return subprocess.run(command, capture_output=True).returncode

    with pytest.raises(UsageError, match="could not make environment 'broken': .* exited with status 1"):
        envs.create("broken", ["onnxruntime==1.20.*"], run=without_pip)
    assert [step[1:3] for step in steps] == [["-m", "venv"], ["-m", "pip"]]  # venv made, then pip failed in it
    assert "onnxruntime==1.20.*" in steps[1] and {"numpy", "msgpack"} <= set(steps[1])
    assert not (tmp_path / "envs" / "broken").exists()


def test_the_worker_code_is_linked_from_where_this_process_imports_it(tmp_path):
    """Packages (cmpx, the backend's plugin package) link as directories, -p modules as files; the links point at
    this checkout's directories in an editable install."""
    from cmpx.plugin.manager import PluginSettings, make_plugin_manager
    from cmpx.transport.foreign import link_worker_code, worker_modules

    plugins = make_plugin_manager(extra=["cmpx_test_minimal"])
    backends = [SimpleNamespace(spec=plugins.backends.get(name)) for name in ("onnxrt", "mine")]
    modules = worker_modules(backends, PluginSettings(extra=("cmpx_test_minimal",)))
    assert modules == ["cmpx", "cmpx_onnxrt", "cmpx_test_minimal"]
    linked = link_worker_code(str(tmp_path / "code"), modules)
    assert linked == {"cmpx": str(REPO / "core"), "cmpx_onnxrt": str(REPO / "backends" / "onnxrt"),
                      "cmpx_test_minimal": str(REPO / "tests" / "plugins" / "cmpx_test_minimal.py")}
    assert (tmp_path / "code" / "cmpx").resolve() == REPO / "core"
    assert (tmp_path / "code" / "cmpx_test_minimal.py").resolve() == REPO / "tests" / "plugins" / "cmpx_test_minimal.py"
    assert link_worker_code(str(tmp_path / "other"), ["no_such_module_here"]) == {}  # left to the environment


def test_a_regular_install_links_its_installed_package_directories(old_ort, tmp_path):
    """cmpx laid out as ``pip install .`` lays it out (each package directory under its import name, with its
    dist-info for the entry points) in a directory the coordinator imports it from: the worker under the older
    ONNX Runtime runs that code, linked."""
    import sysconfig
    import tomllib

    site = tmp_path / "site"
    layout = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for name, source in layout.items():
        shutil.copytree(REPO / source, site / name, ignore=shutil.ignore_patterns("__pycache__"))
    dist_info, = Path(sysconfig.get_paths()["purelib"]).glob("cmpx-*.dist-info")
    shutil.copytree(dist_info, site / dist_info.name)
    report = tmp_path / "report.json"
    done = run_cmpx("run", EXAMPLES / "conv.onnx", "--backend", "onnxrt", "--backend", f"onnxrt@env:{OLD_ENV}",
                    "--report-json", report, env={**old_ort["env"], "PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stdout + done.stderr
    backends = _report(report)
    mine, theirs = backends["onnxrt"]["runtime"], backends[f"onnxrt@env:{OLD_ENV}"]["runtime"]
    assert mine["cmpx_path"] == str(site / "cmpx") and not mine["linked"]
    assert theirs["cmpx_path"] == str(site / "cmpx") and theirs["linked"]
    assert theirs["framework_version"] == OLD_ORT
