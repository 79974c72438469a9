"""Hook specifications: the only contract between cmpx and its plugins.

A plugin is a module (or object) with functions decorated by ``@cmpx.hookimpl`` whose names match the
hooks below. Implementations may accept fewer arguments than the spec; cmpx always calls hooks with
keyword arguments, so new arguments can be added later without breaking plugins.

All hooks here are *registration* hooks. Each runs once per plugin, **in the coordinator only** (the process
running ``cmpx`` or calling ``cmpx.run()``), when its plugin manager is built: at the start of ``cmpx run``,
``cmpx plugins``, ``cmpx tensors`` and ``cmpx run --help``, and once per ``cmpx.run()`` call. Workers run no
hook: the coordinator resolves each backend's ``"module:Class"`` and the worker imports just that (after the
modules named with ``-p``). Hooks must be fast and must not import heavy frameworks: register names and import
paths, and import onnxruntime, TensorRT and the like in the backend class, which only its worker imports.

Each hook is called once per plugin with a registry that records which plugin added what, so that a name
registered by two plugins is reported with both plugin names. A hook that raises is reported as a failure
of its plugin (its registrations are dropped); the other plugins are unaffected. Return values are ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from cmpx.plugin.registry import BackendRegistry, DataLoaderRegistry, MetricRegistry, TransformRegistry

PROJECT = "cmpx"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# -- Registration hooks (run once per plugin, in the coordinator, when its plugin manager is built) ---------------


@hookspec
def register_backends(registry: BackendRegistry) -> None:
    """Register inference backends.

    Call ``registry.add(name, target, ...)`` once per backend, where ``target`` is the import path of a
    :class:`cmpx.Backend` subclass written ``"package.module:ClassName"``. The class is imported only in
    the backend's worker process. Keyword arguments of ``add`` describe the backend: ``description``,
    ``options`` (a sequence of :class:`cmpx.BackendOption`, shown as ``--<name>-<option>`` in
    ``cmpx run --help``), ``supports_marking`` (whether it can expose intermediate tensors),
    ``model_formats`` (suffixes of model files in the framework's own format, such as ``".engine"``, which the
    backend loads and describes with :meth:`cmpx.Backend.describe`), ``precision_flags`` (the transforms that
    ``--fp16``, ``--bf16``, ``--int8`` and ``--fp8`` give it), ``marking_changes_fusion`` (marking tensors
    changes what it computes, so cmpx warns), ``frameworks`` (the pip distributions of its framework, whose
    installed version the reports name) and ``runs_subgraphs`` (default True: a marking backend can load models
    cut out of the run's model, so a run whose marked tensors exceed ``--memory-budget`` runs it slice by slice;
    False: it always runs the whole model).

    :param registry: the backend registry; it rejects invalid names and reports clashes.
    :returns: nothing; a return value (including ``None``) is ignored.
    """


@hookspec
def register_data_loaders(registry: DataLoaderRegistry) -> None:
    """Register data loaders, which produce the input feeds for every iteration.

    Call ``registry.add(name, factory, description=..., generates=False, default=False, selected_by=None)``.
    ``factory(options)``, given a :class:`cmpx.DataOptions` (seed, iterations, value ranges,
    paths, script), returns an object with a ``feeds(inputs)`` method yielding one ``{input name: numpy array}``
    dict per iteration, where ``inputs`` is a sequence of :class:`cmpx.TensorSpec` (concrete shapes for a loader
    that ``generates`` data). ``default``: used when nothing selects a loader; ``selected_by``: the run option
    that selects it (``"load_inputs"``). Loaders run in the coordinator, so ``feeds`` may import numpy but should
    not import inference frameworks.

    :param registry: the data loader registry; it rejects invalid names and reports clashes.
    :returns: nothing; a return value (including ``None``) is ignored.
    """


@hookspec
def register_metrics(registry: MetricRegistry) -> None:
    """Register comparison metrics.

    Call ``registry.add(metric, default=False)`` where ``metric`` has a ``name`` attribute and a
    ``compare(context)`` method returning a :class:`cmpx.MetricResult`; ``default`` metrics run when ``--compare``
    is not given. ``context`` is a :class:`cmpx.ComparisonContext` (the output name, both arrays, the per-output settings, and a memo shared by the metrics of that output).
    A metric with a numeric ``threshold`` attribute gets a ``--<name>-threshold`` option (per-output values
    allowed) whose value reaches it as ``context.settings.thresholds[name]``. Metrics run in the coordinator,
    once per output of each compared pair, on numpy arrays that are views of shared memory: never modify them.

    :param registry: the metric registry; it rejects invalid names and reports clashes.
    :returns: nothing; a return value (including ``None``) is ignored.
    """


@hookspec
def register_model_transforms(registry: TransformRegistry) -> None:
    """Register model transforms: graph rewrites a backend can run, such as reduced precision.

    Call ``registry.add(name, factory, description=...)``. ``factory(options)`` gets a
    :class:`cmpx.TransformOptions` and returns an object with
    ``apply(model_path, output_path, calibration)`` that writes the transformed ONNX model to ``output_path``;
    ``calibration(count)`` yields up to ``count`` input feeds from the run's data loader (for calibration).
    Users select a transform per backend with ``--backend NAME:TRANSFORM`` (for example ``onnxrt:fp16``).
    The factory and ``apply`` run once per run in the coordinator, before any backend loads; they may import onnx
    and the libraries they need. When a pair with one side transformed fails, the summary suggests the tolerances
    measured on its outputs.

    :param registry: the transform registry; it rejects invalid names and reports clashes.
    :returns: nothing; a return value (including ``None``) is ignored.
    """
