"""What a cell checks where it runs, before running: that this node has the inputs the sweep fingerprinted.

The sweep fingerprints a cell where ``cmpx sweep`` runs (cmpx.sweep.matrix.Cell.fingerprint), and keeps its result
on resume as long as that fingerprint holds. A cell that ran on a node whose path held another model, or another
version of a framework or of cmpx, would be kept under a fingerprint that is not what it ran: so each cell checks
here that the model file's SHA-256, the frameworks' versions and cmpx's version are the fingerprinted ones, and a
difference is that cell's error naming the host (exit 2, never a verdict, never kept on resume). Models and the
files runs read are assumed at the same path on every node (a shared file system).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cmpx._version import __version__
from cmpx.sweep.matrix import model_digest

SHARED_FILES = "cmpx sweep assumes every node sees the sweep's files at the same path (a shared file system)"


def node_problem(task: Mapping[str, Any], host: str) -> str | None:
    """Why this node cannot run ``task`` (cmpx.sweep.matrix.Cell.task) as fingerprinted, or None."""
    model, expected = task["model"], task.get("model_sha256")
    try:
        found = model_digest(model)
    except FileNotFoundError:
        return f"model file {model} not found on {host}: {SHARED_FILES}"
    except OSError as exc:
        return f"model file {model} cannot be read on {host}: {exc.strerror or exc}"
    if expected and found != expected:
        return (f"model file {model} on {host} is not the one the sweep fingerprinted (SHA-256 {found[:16]}... "
                f"there, {expected[:16]}... where cmpx sweep runs): {SHARED_FILES}, with the same content")
    wanted = task.get("cmpx_version")
    if wanted and wanted != __version__:
        return (f"{host} has cmpx {__version__}, the sweep fingerprinted cmpx {wanted} (where cmpx sweep runs); "
                "install the same version on every node")
    return _framework_problem(task, host)


def _framework_problem(task: Mapping[str, Any], host: str) -> str | None:
    """A backend's framework at another version here than where the sweep runs (of whichever of its distributions
    is installed: onnxruntime there and onnxruntime-gpu here is fine at the same version)."""
    from cmpx.plugin import installed

    names = task.get("framework_names") or {}
    for backend, pinned in (task.get("frameworks") or {}).items():
        if not pinned:  # not installed where the sweep runs, or under another Python: nothing to hold it to
            continue
        distribution, version = pinned
        here = next(((name, found) for name in names.get(backend, [distribution])
                     if (found := installed.version([name]))), None)
        if here is None or here[1] != version:
            has = f"{here[0]} {here[1]}" if here else f"no {' or '.join(names.get(backend, [distribution]))}"
            return (f"{host} has {has} for backend {backend}, the sweep fingerprinted {distribution} {version} "
                    "(where cmpx sweep runs); install the same version on every node, or run cmpx sweep where it "
                    "is installed")
    return None
