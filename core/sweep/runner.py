"""``python -m cmpx.sweep.runner RESULTS_FD PARENT_PID``: a local sweep's runner process. It reads cells (one JSON
task per line) from stdin, runs each on its main thread (cmpx.sweep.cell.run_cell) and writes each outcome as one
JSON line to RESULTS_FD; its own stdout and stderr go to a log the sweep keeps.

It runs in a session of its own, so that Ctrl-C reaches only the sweep, which then sends SIGTERM to the runners
with a cell under way: that interrupts the cell's run, which stops its workers and releases its shared memory
before the runner answers. It dies with the sweep (PR_SET_PDEATHSIG), and its cells' workers die with it.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from cmpx.errors import ExitCode
from cmpx.transport.idle_threads import quiet_idle_threads
from cmpx.transport.worker.parent_watch import die_with_parent


def _interrupt_once(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not break the cleanup of the first
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    results_fd, parent = int(argv[0]), int(argv[1])
    die_with_parent(parent)
    quiet_idle_threads(os.environ)
    signal.signal(signal.SIGTERM, _interrupt_once)
    from cmpx.sweep.cell import run_cell
    from cmpx.transport.forking import ForkServers

    servers = ForkServers()  # its cells' workers are forked, numpy and the forkable frameworks imported once
    try:
        with os.fdopen(results_fd, "w", encoding="utf-8") as results:
            for line in sys.stdin:
                outcome = run_cell(json.loads(line), servers)
                results.write(json.dumps(outcome.to_dict(), allow_nan=False) + "\n")
                results.flush()
                if outcome.interrupted:
                    return ExitCode.INTERRUPTED
    finally:
        servers.close()
    return ExitCode.PASSED


if __name__ == "__main__":
    try:
        code = main(sys.argv[1:])
    except KeyboardInterrupt:  # interrupted between cells
        code = ExitCode.INTERRUPTED
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
