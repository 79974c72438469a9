"""A cell's thread settings, the same wherever it runs.

Ray runs a 1-CPU task with ``OMP_NUM_THREADS=1``, which every process the task starts inherits, while a local
process has no such setting: the backends then split their sums differently and report other numbers for the same
cell. A cell therefore sets these variables itself, for the duration of its run, to the ``threads`` of its run
(cmpx.sweep.sweepfile.RunSpec.threads); its worker processes inherit them. ONNX Runtime's backend takes
``OMP_NUM_THREADS`` as its intra-op thread count (cmpx_onnxrt.backend), the OpenVINO example plugin as its
INFERENCE_NUM_THREADS, numpy's BLAS (onnx.reference) reads its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@contextmanager
def thread_settings(threads: int) -> Iterator[None]:
    """Set every variable of THREAD_VARIABLES to ``threads`` in this process's environment while the block runs,
    then put back what was there (a runner process or a Ray worker runs other cells after this one)."""
    before = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
