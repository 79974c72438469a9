"""cmpx: compare one model's outputs across inference frameworks.

Running comparisons from Python: ``cmpx.run(model, backends=[...], **options)`` returns a ``cmpx.Report``;
errors are ``cmpx.UsageError`` (and ``ModelError``, ``PluginError``), ``cmpx.BackendFailed``,
``cmpx.RunInterrupted``; ``cmpx.ExitCode`` names the exit codes. See docs/api.md.

Writing plugins: ``hookimpl`` marks hook implementations, ``Backend`` is the class a backend subclasses,
``BackendOption`` declares a backend's own options, ``TensorSpec`` describes a model in a backend's own format,
``MetricResult`` and ``ComparisonContext`` are what a metric returns and receives. See docs/plugins.md.

Everything but ``Backend`` is imported on first use: a worker process that only runs a backend needs neither
pluggy nor the comparison code.
"""

from typing import TYPE_CHECKING, Any

from cmpx.backend import Backend

if TYPE_CHECKING:
    from cmpx.api import run
    from cmpx.comparison.compare import ComparisonContext
    from cmpx.errors import BackendCrashed, BackendFailed, BackendTimeout, CmpxError, ExitCode, ModelError, \
        PluginError, UsageError
    from cmpx.hookspecs import hookimpl
    from cmpx.model.info import TensorSpec
    from cmpx.registry import BackendOption
    from cmpx.report import Report
    from cmpx.report_data import RunInterrupted
    from cmpx.results import MetricResult

from cmpx._version import __version__

_LAZY = {
    "run": "cmpx.api", "Report": "cmpx.report", "hookimpl": "cmpx.hookspecs", "BackendOption": "cmpx.registry",
    "TensorSpec": "cmpx.model.info", "MetricResult": "cmpx.results", "ComparisonContext": "cmpx.comparison.compare",
    **dict.fromkeys(("CmpxError", "UsageError", "ModelError", "PluginError", "BackendFailed", "BackendCrashed",
                     "BackendTimeout", "ExitCode"), "cmpx.errors"),
    "RunInterrupted": "cmpx.report_data",
}

__all__ = ["Backend", "BackendCrashed", "BackendFailed", "BackendOption", "BackendTimeout", "CmpxError",
           "ComparisonContext", "ExitCode", "MetricResult", "ModelError", "PluginError", "Report", "RunInterrupted",
           "TensorSpec", "UsageError", "__version__", "hookimpl", "run"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cmpx' has no attribute {name!r}")
    import importlib
    import importlib.util

    if name == "hookimpl" and importlib.util.find_spec("pluggy") is None:
        # A worker under another Python (--backend NAME@PYTHON) may lack pluggy. Hooks run only in the coordinator,
        # so there a plugin module that holds its backend class next to its hooks needs them importable, no more.
        return _unmarked
    return getattr(importlib.import_module(module), name)


def _unmarked(function: Any = None, **options: Any) -> Any:
    """``hookimpl`` where pluggy is absent: ``@cmpx.hookimpl`` and ``@cmpx.hookimpl(tryfirst=True)`` leave the
    function as it is."""
    return function if function is not None else (lambda f: f)
