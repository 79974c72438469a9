"""Workers under another Python (``--backend onnxrt@/opt/ort-1.20/bin/python``): how they are started, and how the
coordinator's worker code becomes importable there without installing anything.

The worker side of cmpx needs only numpy and msgpack. If cmpx is installed in that environment, its worker runs
(and says its protocol version in ``hello``, which the coordinator checks). If not, the run links the packages the
worker imports — ``cmpx`` itself, the backend's plugin package, the ``-p`` plugin modules — into a directory of its
own, each found where this process imports it from (``importlib.util.find_spec``: a regular install, an editable one
or a source tree alike), and that directory is put at the *end* of the worker's ``sys.path``: what the environment
has installed comes first. Nothing of this process's import path goes along (not its PYTHONPATH either), so the
framework the worker imports is the environment's own.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cmpx.outcome.runtimes import BackendRuntime
from cmpx.transport.worker import CANNOT_START, CANNOT_START_PREFIX

if TYPE_CHECKING:
    from cmpx.plan import BackendPlan
    from cmpx.plugin.manager import PluginSettings

WORKER_MODULE = "cmpx.transport.worker"
OLDEST_PYTHON = (3, 10)
# Runs first under the other Python, before anything of cmpx is imported (written for any Python): checks its version,
# appends the linked code to the end of sys.path, and runs the worker module as ``python -m`` would.
# argv: -c BOOT CODE_DIR cmpx.transport.worker FD_IN FD_OUT PARENT_PID
BOOT = (
    "import sys\n"
    f"if sys.version_info < {OLDEST_PYTHON!r}:\n"
    f"    sys.stderr.write({CANNOT_START_PREFIX!r} + '%s (Python %s, in %s) is too old: cmpx\\'s worker needs "
    f"Python {OLDEST_PYTHON[0]}.{OLDEST_PYTHON[1]} or newer\\n' % (sys.executable, sys.version.split()[0], "
    "sys.prefix))\n"
    f"    sys.exit({CANNOT_START})\n"
    "sys.path.append(sys.argv.pop(1))\n"
    "import runpy\n"
    "try:\n"
    "    runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)\n"
    "except ImportError as exc:\n"  # a cmpx installed there without this worker module: another version
    "    if 'cmpx' not in '%s %s' % (getattr(exc, 'name', None), exc):\n"
    "        raise\n"
    f"    sys.stderr.write({CANNOT_START_PREFIX!r} + '%s (Python %s, in %s) has a cmpx without its worker (%s): "
    "install this cmpx version there, or uninstall it there\\n' % (sys.executable, sys.version.split()[0], "
    "sys.prefix, exc))\n"
    f"    sys.exit({CANNOT_START})\n"
)
# Variables that would make another Python import this one's packages, or fail to start at all.
NOT_PASSED_ON = ("PYTHONPATH", "PYTHONHOME", "PYTHONEXECUTABLE")


def worker_command(python: str, code_dir: str, fds: Sequence[str]) -> list[str]:
    """The command line of a worker under ``python``; ``fds`` are FD_IN FD_OUT PARENT_PID. Like a worker under this
    Python, it names ``cmpx.transport.worker`` followed by those three (cmpx.testing.leaks finds workers so)."""
    return [python, "-c", BOOT, code_dir, WORKER_MODULE, *fds]


def foreign_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment variables of a worker under another Python: this process's, without its import path."""
    return {key: value for key, value in env.items() if key not in NOT_PASSED_ON}


def worker_modules(backends: Iterable[BackendPlan], settings: PluginSettings) -> list[str]:
    """The top-level modules a worker of ``backends`` imports from cmpx's side: cmpx, each backend's plugin package
    (of its ``module:Class``) and the plugin modules named with ``-p``."""
    names = ["cmpx"]
    names += [backend.spec.target.partition(":")[0].split(".")[0] for backend in backends]
    names += [module.split(".")[0] for module in settings.extra]
    return list(dict.fromkeys(names))


def link_worker_code(directory: str, modules: Iterable[str]) -> dict[str, str]:
    """Make ``directory`` hold a link to each of ``modules`` as this process imports it (a package's directory or
    a module's file); return module name -> what was linked. A module that is not a plain package or ``.py`` file
    here (not importable, a namespace package spread over several directories, a compiled extension) is not linked:
    the other environment must have it installed."""
    os.makedirs(directory, exist_ok=True)
    linked = {}
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        locations = list(spec.submodule_search_locations or ())
        if spec.submodule_search_locations is not None:
            if len(locations) != 1:
                continue
            source, link = locations[0], os.path.join(directory, name)
        elif spec.origin and spec.origin.endswith(".py"):
            source, link = spec.origin, os.path.join(directory, f"{name}.py")
        else:
            continue
        os.symlink(os.path.abspath(source), link)
        linked[name] = os.path.abspath(source)
    return linked


def runs_linked_code(cmpx_path: str, code_dir: str | None) -> bool:
    """Whether a worker that imported cmpx from ``cmpx_path`` (its ``hello``) runs the code linked into
    ``code_dir`` rather than a cmpx installed in its environment."""
    return code_dir is not None and os.path.dirname(os.path.abspath(cmpx_path)) == os.path.abspath(code_dir)


def runtime_from_hello(hello: Mapping[str, Any], separate: bool, code_dir: str | None) -> BackendRuntime:
    cmpx_path = str(hello.get("cmpx", ""))
    linked = runs_linked_code(cmpx_path, code_dir)
    return BackendRuntime(str(hello.get("python", "")), str(hello.get("python_version", "")),
                          str(hello.get("prefix", "")), bool(hello.get("venv")), separate,
                          os.path.realpath(cmpx_path) if linked else cmpx_path, str(hello.get("cmpx_version", "")),
                          linked)
