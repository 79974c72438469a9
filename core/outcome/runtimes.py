"""Where each live backend ran — its Python, its environment, which cmpx code, its framework's version — and how
the reports name it: ``onnxrt 1.32.0``, or ``onnxrt 1.20.1 (/opt/ort-1.20)`` for a backend whose worker ran under
another Python (``--backend onnxrt@/opt/ort-1.20/bin/python``). Plain data; no numpy."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol



class NamedBackend(Protocol):
    """What the reports' names of a backend need of it (a cmpx.plan.BackendPlan, frozen: read-only properties)."""

    @property
    def name(self) -> str: ...  # NAME, NAME#2, NAME:fp16, NAME@PYTHON
    @property
    def short_name(self) -> str: ...  # without its Python
    @property
    def python(self) -> str | None: ...  # the Python it runs under, when not the coordinator's


@dataclass
class BackendRuntime:
    """What a backend's worker said about itself: in ``hello`` (its Python and cmpx) and ``ready`` (its framework's
    version, from ``Backend.framework_version()``)."""

    python: str  # the interpreter
    python_version: str
    prefix: str  # its environment (sys.prefix)
    venv: bool
    separate: bool  # another Python than the coordinator's, as asked with --backend NAME@PYTHON
    cmpx_path: str  # the directory of the cmpx package its worker imported (for linked code: what was linked)
    cmpx_version: str
    linked: bool  # cmpx is not installed there: the worker ran the coordinator's code, linked in for the run
    framework_version: str | None = None

    @property
    def place(self) -> str:
        """The environment, as the reports show it: a virtual environment's directory, else the interpreter."""
        return self.prefix if self.venv else self.python

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def labels(backends: Sequence[NamedBackend], runtimes: Mapping[str, BackendRuntime]) -> dict[str, str]:
    """Each live backend's name in the reports, with its framework's version where known: ``onnxrt 1.32.0``, and
    for a backend under another Python ``onnxrt 1.20.1 (/opt/ort-1.20)`` (its ``NAME@PYTHON`` name until its worker
    has said where it runs). Should two come out the same, they show their full names."""

    def label(backend: NamedBackend, base: str) -> str:
        runtime = runtimes.get(backend.name)
        if runtime is None:
            return backend.name
        version = f" {runtime.framework_version}" if runtime.framework_version else ""
        return f"{base}{version}" + (f" ({runtime.place})" if backend.python is not None else "")

    found = {backend.name: label(backend, backend.short_name) for backend in backends}
    counts = Counter(found.values())
    return {backend.name: found[backend.name] if counts[found[backend.name]] == 1 else label(backend, backend.name)
            for backend in backends}


def linked_note(backend: NamedBackend, runtime: BackendRuntime) -> str:
    """One line on where a backend under another Python ran, and whether cmpx linked its worker code there."""
    where = f"{runtime.python} (Python {runtime.python_version})"
    if runtime.linked:
        return (f"{backend.name}: {where} has no cmpx installed: its worker runs this cmpx's code, linked in for "
                f"this run (nothing was installed there)")
    return f"{backend.name}: {where} runs the cmpx {runtime.cmpx_version} installed there ({runtime.cmpx_path})"
