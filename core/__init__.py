"""cmpx: compare one model's outputs across inference frameworks.

Plugin authors need only what is exported here: ``hookimpl`` to mark hook implementations, ``Backend`` to
subclass and ``BackendOption`` to declare backend-specific command-line options.
"""

from typing import Any

from cmpx.backend import Backend
from cmpx.registry import BackendOption

__version__ = "0.1.0"

__all__ = ["Backend", "BackendOption", "hookimpl", "__version__"]


def __getattr__(name: str) -> Any:
    # hookimpl (pluggy) is loaded on first use: a worker that only runs a Backend never needs it.
    if name == "hookimpl":
        from cmpx.hookspecs import hookimpl

        return hookimpl
    raise AttributeError(f"module 'cmpx' has no attribute {name!r}")
