"""A plugin that does nothing but, imported in a worker (every worker imports the -p plugins), append that worker's
process name (/proc/self/comm: cmpx-worker for a forked one, python for a spawned one) to $CMPX_FORK_SPY, and a
draw from numpy's global random stream to $CMPX_FORK_SPY_DRAWS where that is set."""

import os
import sys

if "cmpx.transport.worker" in getattr(sys, "orig_argv", []) and os.environ.get("CMPX_FORK_SPY"):
    with open("/proc/self/comm") as comm, open(os.environ["CMPX_FORK_SPY"], "a") as spy:
        spy.write(comm.read().strip() + "\n")
    if os.environ.get("CMPX_FORK_SPY_DRAWS"):
        import numpy

        with open(os.environ["CMPX_FORK_SPY_DRAWS"], "a") as draws:
            draws.write(f"{numpy.random.randint(1 << 62)}\n")
