"""cmpx: compare one model's outputs across inference frameworks.

Running comparisons from Python: ``cmpx.run(model, backends=[...], **options)`` returns a ``cmpx.Report``;
errors are ``cmpx.UsageError`` (and ``ModelError``, ``PluginError``), ``cmpx.BackendFailed``,
``cmpx.RunInterrupted``; ``cmpx.ExitCode`` names the exit codes; ``cmpx.ForkServers`` (a context manager) keeps the
frameworks imported across many runs (``fork_servers=``). See docs/api.md.

Writing plugins: ``hookimpl`` marks hook implementations, which receive a ``BackendRegistry``,
``DataLoaderRegistry``, ``MetricRegistry`` or ``TransformRegistry``; ``Backend`` is the class a backend subclasses,
``BackendOption`` declares a backend's own options, ``TensorSpec`` describes a tensor (``read_model`` reads an ONNX
model's ``ModelInfo``; ``exposed_model`` makes the ONNX model that also returns marked tensors); ``MetricResult`` and
``ComparisonContext`` are what a metric returns and receives; ``DataOptions`` and ``TransformOptions`` are what a
data loader's and a model transform's factory receive (``load_for_transform`` and ``save_model`` handle models with
external data). See docs/plugins.md: these names are the whole plugin API, and plugins import nothing else of cmpx.

Everything but ``Backend`` is imported on first use: a worker process that only runs a backend needs neither
pluggy nor the comparison code.
"""

from typing import TYPE_CHECKING, Any

from cmpx.plugin.backend import Backend

if TYPE_CHECKING:
    from cmpx.api import run
    from cmpx.comparison.compare import ComparisonContext
    from cmpx.errors import BackendCrashed, BackendFailed, BackendTimeout, CmpxError, ExitCode, ModelError, \
        PluginError, UsageError
    from cmpx.hookspecs import hookimpl
    from cmpx.loaders.options import DataOptions
    from cmpx.model.graph import exposed_model
    from cmpx.model.info import ModelInfo, TensorSpec, read_model
    from cmpx.plugin.registry import BackendOption, BackendRegistry, DataLoaderRegistry, MetricRegistry, TransformRegistry
    from cmpx.report import Report
    from cmpx.outcome.report_data import RunInterrupted
    from cmpx.outcome.results import LocalError, MetricResult, OutputResult, PairResult, PairTally
    from cmpx.transforms.options import TransformOptions
    from cmpx.transport.forking import ForkServers
    from cmpx.transforms.saving import load_for_transform, save_model

from cmpx._version import __version__

_LAZY = {
    "run": "cmpx.api", "Report": "cmpx.report", "hookimpl": "cmpx.hookspecs",
    "ComparisonContext": "cmpx.comparison.compare",
    **dict.fromkeys(("BackendOption", "BackendRegistry", "DataLoaderRegistry", "MetricRegistry", "TransformRegistry"),
                    "cmpx.plugin.registry"),
    **dict.fromkeys(("TensorSpec", "ModelInfo", "read_model"), "cmpx.model.info"),
    **dict.fromkeys(("MetricResult", "OutputResult", "PairResult", "PairTally", "LocalError"), "cmpx.outcome.results"),
    "exposed_model": "cmpx.model.graph", "DataOptions": "cmpx.loaders.options",
    "TransformOptions": "cmpx.transforms.options",
    **dict.fromkeys(("load_for_transform", "save_model"), "cmpx.transforms.saving"),
    **dict.fromkeys(("CmpxError", "UsageError", "ModelError", "PluginError", "BackendFailed", "BackendCrashed",
                     "BackendTimeout", "ExitCode"), "cmpx.errors"),
    "RunInterrupted": "cmpx.outcome.report_data", "ForkServers": "cmpx.transport.forking",
}

__all__ = ["Backend", "BackendCrashed", "BackendFailed", "BackendOption", "BackendRegistry", "BackendTimeout",
           "CmpxError", "ComparisonContext", "DataLoaderRegistry", "DataOptions", "ExitCode", "ForkServers", "LocalError",
           "MetricRegistry", "MetricResult", "ModelError", "ModelInfo", "OutputResult", "PairResult", "PairTally",
           "PluginError", "Report", "RunInterrupted", "TensorSpec", "TransformOptions", "TransformRegistry",
           "UsageError", "__version__", "exposed_model", "hookimpl", "load_for_transform", "read_model", "run",
           "save_model"]


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
