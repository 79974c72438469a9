"""The ``cmpx`` console script (and ``python -m cmpx``): start a run's workers before anything heavy is imported,
then hand over to the click CLI.

A worker's interpreter takes about as long to start and import numpy as this process takes to import click,
discover plugins and parse options, so both happen at once: for one ``--backend`` on the command line a spare
worker is spawned here, into the pool the run takes its workers from; for several, a fork server
(cmpx.transport.worker.forkserver), which imports numpy now and each forkable framework once, then forks the
workers. Spares left over (bad options, fewer backends than counted) are stopped, and the fork server closed,
before cmpx exits.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from cmpx.errors import ExitCode

MAX_SPARES = 8  # more backends than this still run; the rest start once the options are checked
COMPLETION_VARIABLE = "_CMPX_COMPLETE"  # set by the shell when it asks for completions


def main() -> None:
    """Run cmpx and exit with its code. SIGTERM and SIGHUP (and Ctrl-C) interrupt from here to the exit, whatever
    is running: the CLI's own handling stops the workers and prints what finished; before and after it, a signal
    still ends cmpx with 130, never by the signal itself (143, 129)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        code = _run(_keep)
    except KeyboardInterrupt:  # before the CLI's handling was in place, or after it was done
        sys.stderr.write("Interrupted.\n")
        code = ExitCode.INTERRUPTED
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else ExitCode.USAGE)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the exit itself is not interrupted
            signal.signal(signum, signal.SIG_IGN)
        pool = _spares.pop() if _spares else None
        if pool is not None:  # the spares no run took (an interrupt, an error); the fork server, after its workers
            pool.release()
            if pool.server is not None:  # its workers are released: it exits at once
                pool.server.close(grace=1.0)
    sys.stdout.flush()
    sys.exit(code)


_spares: list[Any] = []  # the spare workers' pool of this process's run (at most one), released at the exit


def _keep(pool: Any) -> Any:
    _spares.append(pool)
    return pool


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run(keep: Callable[[Any], Any]) -> int:
    from cmpx.options.argv import prescan
    from cmpx.limits import exhausted, raise_descriptor_limit
    from cmpx.transport.idle_threads import quiet_idle_threads

    problem = raise_descriptor_limit()  # before anything else opens files
    if problem:
        sys.stderr.write(f"Error: {problem}\n")
        return ExitCode.USAGE
    quiet_idle_threads(os.environ)  # before numpy is imported here or in any worker
    args = sys.argv[1:]
    scan = prescan(args)
    count = 0 if COMPLETION_VARIABLE in os.environ else min(scan.backends, MAX_SPARES)
    pool = None
    try:
        if count == 1:
            from cmpx.transport.pool import WorkerPool

            pool = keep(WorkerPool(1))
        elif count:  # one fork server imports numpy, then each forkable framework, once for all the workers
            from cmpx.transport.forking import ForkServer
            from cmpx.transport.pool import WorkerPool, worker_environment

            env = worker_environment()
            try:
                pool = keep(WorkerPool(env=env, server=ForkServer(env)))
            except OSError:
                pool = keep(WorkerPool(count))
        from cmpx.cli.invocation import Invocation
        from cmpx.cli.main import cli

        return cli.main(args, prog_name="cmpx", invocation=Invocation(scan, pool), standalone_mode=False)
    except (OSError, ImportError) as exc:  # out of files or processes before the CLI's handling is in place
        limit = exhausted(exc)
        if limit is None:
            raise
        sys.stderr.write(f"Error: cmpx ran out of {limit} while starting ({exc}); raise the limit\n")
        return ExitCode.USAGE
