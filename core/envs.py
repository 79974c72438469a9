"""Named Python environments for backends' workers (``cmpx env create NAME REQUIREMENT...``, then
``--backend onnxrt@env:NAME``), and where a ``--backend NAME@PYTHON`` finds its Python.

An environment is a standard virtual environment in ``$CMPX_ENVS_DIR/NAME`` (default
``${XDG_CACHE_HOME:-~/.cache}/cmpx/envs/NAME``), made with ``uv venv`` and ``uv pip install`` when uv is on the
PATH, else with ``python -m venv`` and that environment's own pip. It holds the requirements given plus what cmpx's
worker needs (numpy, msgpack); cmpx itself is not installed there: the coordinator links its worker code in for each
run (cmpx.transport.foreign). Light: the standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence

from cmpx.errors import UsageError

ENVS_VARIABLE = "CMPX_ENVS_DIR"
ENV_PREFIX = "env:"
WORKER_NEEDS = ("numpy", "msgpack")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


def envs_root(environ: Mapping[str, str] | None = None) -> str:
    """The directory holding the named environments."""
    environ = os.environ if environ is None else environ
    if environ.get(ENVS_VARIABLE):
        return os.path.abspath(os.path.expanduser(environ[ENVS_VARIABLE]))
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "cmpx", "envs")


def env_dir(name: str) -> str:
    if not _NAME.match(name):
        raise UsageError(f"{name!r} is not an environment name: use letters, digits, '.', '_' and '-'")
    return os.path.join(envs_root(), name)


def env_python(directory: str) -> str:
    """The interpreter of the virtual environment (or Python installation) in ``directory``."""
    for candidate in ("bin/python", "bin/python3", "Scripts/python.exe"):
        path = os.path.join(directory, candidate)
        if os.path.isfile(path):
            return path
    return os.path.join(directory, "bin", "python")


def names() -> list[str]:
    """The environments made so far, by name."""
    root = envs_root()
    try:
        found = sorted(os.listdir(root))
    except OSError:
        return []
    return [name for name in found if _NAME.match(name) and os.path.isfile(env_python(os.path.join(root, name)))]


def resolve_python(word: str, option: str | None = None) -> str:
    """The interpreter a ``--backend NAME@WORD`` means: ``env:NAME`` (an environment of ``cmpx env create``), a
    path to a Python, a virtual environment's directory, or a command on the PATH (``python3.10``). Raises
    UsageError, naming the fix, when there is none; ``option`` is how the error names the word (``@WORD``)."""
    option = option or f"@{word}"
    if word.startswith(ENV_PREFIX):
        name = word[len(ENV_PREFIX):]
        path = env_python(env_dir(name))
        if not os.path.isfile(path):
            made = names()
            raise UsageError(f"no environment {name!r} in {envs_root()} (made so far: {', '.join(made) or 'none'}); "
                             f"make it with: cmpx env create {name} 'onnxruntime==1.20.*'")
        return path
    path = os.path.expanduser(word)
    if os.sep not in path:
        found = shutil.which(path)
        if found is None:
            raise UsageError(f"{option}: no Python {word!r} on the PATH; give the path to a Python, a virtual "
                             "environment's directory, or env:NAME (cmpx env create)")
        path = found
    if os.path.isdir(path):
        path = env_python(path)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise UsageError(f"{option}: {path} is not an executable Python; give the path to a Python (such as "
                         "/opt/ort-1.20/bin/python), a virtual environment's directory, or env:NAME (cmpx env create)")
    return os.path.abspath(path)  # not resolved: a virtual environment's python is a link to its base Python


def create(name: str, requirements: Sequence[str], python: str | None = None,
           run: Callable[[list[str]], int] | None = None) -> str:
    """Make environment ``name`` with ``requirements`` plus the worker's needs, under ``python`` (default: the
    Python running cmpx); return its interpreter. ``run(command)`` runs a command and returns its exit status
    (default: with the output going to stderr). Raises UsageError if it exists or cannot be made (nothing is left
    behind then)."""
    directory = env_dir(name)
    if os.path.exists(directory):
        raise UsageError(f"environment {name!r} already exists ({directory}); use it with --backend NAME@env:{name}, "
                         f"or remove it first: cmpx env remove {name}")
    run = run or _run_to_stderr
    base = resolve_python(python, f"--python {python}") if python else sys.executable
    uv = shutil.which("uv")
    packages = [*requirements, *WORKER_NEEDS]
    if uv:
        steps = [[uv, "venv", "--quiet", "--python", base, directory],
                 [uv, "pip", "install", "--python", env_python(directory), *packages]]
    else:
        steps = [[base, "-m", "venv", directory],
                 [env_python(directory), "-m", "pip", "install", "--disable-pip-version-check", *packages]]
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    try:
        for step in steps:
            status = run(step)
            if status != 0:
                raise UsageError(f"could not make environment {name!r}: {' '.join(step[:3])} ... exited with "
                                 f"status {status} (its output is above); nothing was kept")
    except BaseException:  # a failed step, or Ctrl-C: no half-made environment stays behind
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return env_python(directory)


def remove(name: str) -> str:
    """Delete environment ``name``; one that is a symbolic link (to an environment made elsewhere) loses only the
    link, never what it points to."""
    directory = env_dir(name)
    if os.path.islink(directory):
        os.unlink(directory)
        return f"{directory} (a link; what it pointed to is left as it was)"
    if not os.path.isfile(env_python(directory)):
        raise UsageError(f"no environment {name!r} in {envs_root()}")
    shutil.rmtree(directory)
    return directory


# This process's import path would make pip see its packages as installed there already; these would make pip
# install somewhere else than the environment.
NOT_PASSED_ON = ("PYTHONPATH", "PYTHONHOME", "PIP_TARGET", "PIP_PREFIX", "PIP_USER")


def _run_to_stderr(command: list[str]) -> int:
    env = {key: value for key, value in os.environ.items() if key not in NOT_PASSED_ON}
    return subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, stdin=subprocess.DEVNULL,
                          env=env).returncode
