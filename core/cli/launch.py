"""The ``cmpx`` console script (and ``python -m cmpx``): start a run's workers before anything heavy is imported,
then hand over to the click CLI.

A worker's interpreter takes about as long to start and import numpy as this process takes to import click,
discover plugins and parse options, so both happen at once: spare workers are spawned here, one per
``--backend`` on the command line, into the pool the run takes its workers from. Spares left over (bad options,
fewer backends than counted) are stopped before cmpx exits.
"""

from __future__ import annotations

import os
import sys

from cmpx.cli.argv import prescan
from cmpx.errors import ExitCode
from cmpx.limits import exhausted, raise_descriptor_limit
from cmpx.transport.idle_threads import quiet_idle_threads

MAX_SPARES = 8  # more backends than this still run; the rest start once the options are checked
COMPLETION_VARIABLE = "_CMPX_COMPLETE"  # set by the shell when it asks for completions


def main() -> None:
    problem = raise_descriptor_limit()  # first: everything after opens files
    if problem:
        sys.stderr.write(f"Error: {problem}\n")
        sys.exit(ExitCode.USAGE)
    quiet_idle_threads(os.environ)  # before numpy is imported here or in any worker
    args = sys.argv[1:]
    scan = prescan(args)
    count = 0 if COMPLETION_VARIABLE in os.environ else min(scan.backends, MAX_SPARES)
    pool = None
    try:
        if count:
            from cmpx.transport.pool import WorkerPool

            pool = WorkerPool(count)
        from cmpx.cli.main import Invocation, cli

        cli.main(args, prog_name="cmpx", invocation=Invocation(scan, pool))
    except KeyboardInterrupt:  # Ctrl-C before the CLI's own handling is in place (while importing it)
        sys.stderr.write("Interrupted.\n")
        sys.exit(ExitCode.INTERRUPTED)
    except (OSError, ImportError) as exc:  # out of files or processes before the CLI's handling is in place
        limit = exhausted(exc)
        if limit is None:
            raise
        sys.stderr.write(f"Error: cmpx ran out of {limit} while starting ({exc}); raise the limit\n")
        sys.exit(ExitCode.USAGE)
    finally:
        if pool is not None:  # an interrupt or an error before the run took the spares
            pool.release()
