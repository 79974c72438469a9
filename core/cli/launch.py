"""The ``cmpx`` console script (and ``python -m cmpx``): start a run's workers before anything heavy is imported,
then hand over to the click CLI.

A worker's interpreter takes about as long to start and import numpy as this process takes to import click,
discover plugins and parse options, so both happen at once: spare workers are spawned here, one per
``--backend`` on the command line, and assigned to the backends once the options are checked. Spares left over
(bad options, fewer backends than counted) are stopped before cmpx exits.
"""

from __future__ import annotations

import os
import sys

from cmpx.cli.argv import backends_to_run
from cmpx.transport.idle_threads import quiet_idle_threads

MAX_SPARES = 8  # more backends than this still run; the rest start once the options are checked
COMPLETION_VARIABLE = "_CMPX_COMPLETE"  # set by the shell when it asks for completions
INTERRUPTED = 130


def main() -> None:
    quiet_idle_threads(os.environ)  # before numpy is imported here or in any worker
    args = sys.argv[1:]
    spares = None
    count = 0 if COMPLETION_VARIABLE in os.environ else min(backends_to_run(args), MAX_SPARES)
    if count:
        from cmpx.transport.supervisor import SpareWorkers, worker_environment

        try:
            spares = SpareWorkers(count, worker_environment())
        except OSError:  # only a head start: the run starts its workers itself, and reports what fails then
            spares = None
    try:
        from cmpx.cli.main import cli

        cli.main(args, prog_name="cmpx", spares=spares)
    except KeyboardInterrupt:  # Ctrl-C before the CLI's own handling is in place (while importing it)
        sys.stderr.write("Interrupted.\n")
        sys.exit(INTERRUPTED)
    finally:
        if spares is not None:  # an interrupt or an error before the run took them
            spares.release()
