"""The backend worker process: ``python -m cmpx.transport.worker FD_IN FD_OUT PARENT_PID``.

This runs first in every worker, also under another project's Python (``--backend NAME@PYTHON``; its Python version
is checked before, by cmpx.transport.foreign), so a Python that cannot import the worker exits with ``CANNOT_START``
and one line naming what it lacks (numpy, msgpack), instead of a traceback.
"""
import os
import sys

from cmpx.transport.worker import CANNOT_START, CANNOT_START_PREFIX

NEEDS = ("numpy", "msgpack")


def cannot_start(reason):
    sys.stderr.write(CANNOT_START_PREFIX + reason + "\n")
    sys.stderr.flush()
    os._exit(CANNOT_START)


def why_not(exc):
    """What this Python lacks to import the worker, in one line."""
    from importlib.util import find_spec

    where = f"{sys.executable} (Python {sys.version.split()[0]}, in {sys.prefix})"
    missing = [name for name in NEEDS if find_spec(name) is None]
    if missing:
        return (f"{where} has no {' and no '.join(missing)}, which cmpx's worker needs; install "
                f"{'it' if len(missing) == 1 else 'them'} there: {sys.executable} -m pip install {' '.join(missing)}")
    return f"{where}: cannot import cmpx's worker: {type(exc).__name__}: {exc}"  # a broken numpy, an old cmpx...


try:
    from cmpx.transport.worker.main import main
except ImportError as exc:
    cannot_start(why_not(exc))

code = main(sys.argv[1:])
# The backend has been closed (or the coordinator is gone): skip interpreter finalization, which tears down numpy
# and the framework module by module for ~5-10 ms while the coordinator waits for this process to end. The
# process's exit releases everything (memory, mappings, a CUDA context) as it would after a crash.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
