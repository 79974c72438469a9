"""Make sure a worker never outlives its coordinator."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux), then check it has not already."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the pipe's EOF still ends an idle worker
    if os.getppid() != parent_pid:
        os._exit(0)
