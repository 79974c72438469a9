"""Failures of the cluster under a cell: Ray runs a cell again when its process or node failed (``max_retries``
counts such system failures only; ``task_oom_retries`` the kills of Ray's memory monitor), never when the cell
raised or returned a failure; what still failed after that is an infrastructure failure (exit 6), said here in
words."""

from __future__ import annotations

from typing import Any

from cmpx.errors import telling_line

INFRASTRUCTURE_RETRIES = 2  # Ray runs a cell again at most this often when its process or node failed
OOM_RETRIES_ENV = "RAY_task_oom_retries"  # the memory monitor's own budget, read by the task's owner (the sweep)


def infrastructure_failure(ray: Any, exc: Exception) -> str:
    """What failed under a cell, in words, and how often Ray tried it."""
    errors = ray.exceptions
    what = ("killed for lack of memory" if isinstance(exc, errors.OutOfMemoryError) else
            "its node died" if isinstance(exc, errors.NodeDiedError) else
            "the Ray worker process running it died" if isinstance(exc, errors.WorkerCrashedError) else
            "Ray lost it")
    return (f"infrastructure failure: {what}, on each of its tries (Ray runs a cell again up to "
            f"{INFRASTRUCTURE_RETRIES} times after such a failure): {type(exc).__name__}: {telling_line(str(exc))}")
