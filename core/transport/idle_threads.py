"""Idle BLAS threads must not take the CPU from the other processes of a run.

numpy's OpenBLAS starts a pool of threads when numpy is imported, and an idle pool thread busy-waits for about
2^28 cycles (~0.1 s) before it sleeps. cmpx runs a coordinator and one worker per backend at once, each with its
own numpy: on a small machine those spinning threads cost a start-up about 0.15 s of CPU and delay every process
(measured in bench/README.md). OPENBLAS_THREAD_TIMEOUT=4 (2^4 cycles, OpenBLAS's minimum) makes an idle thread
sleep at once; the thread count is unchanged. The price is waking the threads for each BLAS call: 2000
back-to-back 256x256 matmuls took ~4% longer, nothing measurable where Python runs between calls (the reference
evaluator). A value the user set always wins.
"""

from __future__ import annotations

from collections.abc import MutableMapping

QUIET_IDLE_THREADS = {"OPENBLAS_THREAD_TIMEOUT": "4"}


def quiet_idle_threads(env: MutableMapping[str, str]) -> None:
    """Add the settings above to ``env`` (os.environ, or a child's environment) where the user has not."""
    for name, value in QUIET_IDLE_THREADS.items():
        env.setdefault(name, value)
