"""cmpx: compare one model's outputs across inference frameworks.

Plugin authors need only what is exported here: ``hookimpl`` to mark hook implementations, ``Backend`` to
subclass, ``BackendOption`` to declare backend-specific command-line options, and ``TensorSpec`` for a backend
that describes models in its own format.
"""

from typing import TYPE_CHECKING, Any

from cmpx.backend import Backend

if TYPE_CHECKING:
    from cmpx.hookspecs import hookimpl
    from cmpx.model.info import TensorSpec
    from cmpx.registry import BackendOption

__version__ = "0.1.0"

__all__ = ["Backend", "BackendOption", "TensorSpec", "hookimpl", "__version__"]


def __getattr__(name: str) -> Any:
    # Loaded on first use: a worker that only runs a Backend needs neither pluggy nor the registry.
    if name == "hookimpl":
        from cmpx.hookspecs import hookimpl

        return hookimpl
    if name == "BackendOption":
        from cmpx.registry import BackendOption

        return BackendOption
    if name == "TensorSpec":
        from cmpx.model.info import TensorSpec

        return TensorSpec
    raise AttributeError(f"module 'cmpx' has no attribute {name!r}")
