"""``--ship-models``: a Ray cluster without a shared file system gets each model's bytes through Ray's object store.

Where the sweep runs, each model file is put into the object store once (``ModelShipment.task``), while cells of it
are still to be submitted; a cell's task carries the reference. Where the cell runs, the bytes are written to a
temporary folder of its own, under the model's file name, and the cell runs that file (``shipped_model``), which
the node check (cmpx.sweep.node_check) then finds to be the fingerprinted content. Only the model file travels: its
external weight files and the files a run reads must still be at the same path on every node.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from cmpx.sweep.executors import Job

SHIPPED = "model_bytes"  # the task's key for the reference


class ModelShipment:
    """The driver's side: one object per model file, held until its last cell is submitted (each submitted task
    holds its own reference until it ends)."""

    def __init__(self, ray: Any, jobs: Sequence[Job]):
        self.ray = ray
        self.left = Counter(job.cell.model for job in jobs)
        self.refs: dict[str, Any] = {}

    def task(self, job: Job) -> dict[str, Any]:
        model = job.cell.model
        ref = self.refs.get(model)
        if ref is None:
            with open(model, "rb") as f:
                ref = self.refs[model] = self.ray.put(f.read())
        self.left[model] -= 1
        if not self.left[model]:
            del self.refs[model]
        return dict(job.task, **{SHIPPED: ref})


@contextmanager
def shipped_model(task: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``task`` with its model a file of the shipped bytes on this node, removed afterwards; ``task`` itself when
    nothing was shipped."""
    if SHIPPED not in task:
        yield task
        return
    import ray

    folder = tempfile.mkdtemp(prefix="cmpx-shipped-")
    try:
        path = os.path.join(folder, os.path.basename(task["model"]))
        with open(path, "wb") as f:
            f.write(ray.get(task[SHIPPED]))
        yield {name: value for name, value in task.items() if name != SHIPPED} | {"model": path}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
