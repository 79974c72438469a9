"""cmpx: compare one model's outputs across inference frameworks.

Plugin authors need only what is exported here: ``hookimpl`` to mark hook implementations, ``Backend`` to
subclass and ``BackendOption`` to declare backend-specific command-line options.
"""

from cmpx.backend import Backend
from cmpx.hookspecs import hookimpl
from cmpx.registry import BackendOption

__version__ = "0.1.0"

__all__ = ["Backend", "BackendOption", "hookimpl", "__version__"]
