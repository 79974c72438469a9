"""Validate everything the user asked for and turn it into a RunPlan, before any worker starts."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cmpx.argtypes import PerOutput, check_names, check_stat, parse_input_shapes, parse_per_output, \
    parse_val_ranges, quantile, seconds, threshold, tolerance
from cmpx.comparison.compare import SIMPLE, ComparisonSettings
from cmpx.errors import PluginError, UsageError
from cmpx.loaders.feeds import fit_feeds
from cmpx.loaders.options import DataOptions
from cmpx.model.info import ModelInfo, TensorSpec, read_model
from cmpx.comparison.pairing import check_reference, instance_names
from cmpx.plan import BackendPlan, RunPlan, SavedBackend
from cmpx.plugins import PluginSet, PluginSettings
from cmpx.registry import BackendSpec
from cmpx.model.shapes import resolve_input_shapes

DEFAULT_TOLERANCE = 1e-5
DEFAULT_TIMEOUT_SECONDS = 600.0
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class RunRequest:
    """The ``cmpx run`` arguments as typed by the user, before validation."""

    model: str | None
    backends: Sequence[str]
    reference: str | None = None
    seed: int = 1
    iterations: int | None = None  # None: 1 for synthetic data, all the data otherwise
    input_shapes: Sequence[str] = ()
    val_ranges: Sequence[str] = ()
    data_loader: str | None = None
    data_loader_script: str | None = None
    load_inputs: Sequence[str] = ()
    load_outputs: Sequence[str] = ()
    save_inputs: str | None = None
    save_outputs: str | None = None
    atol: Sequence[str] = ()
    rtol: Sequence[str] = ()
    check_error_stat: Sequence[str] = ()
    error_quantile: Sequence[str] = ()
    compare: Sequence[str] = ()
    thresholds: Mapping[str, Sequence[str]] = field(default_factory=dict)  # metric name -> words
    nan_equal: bool = False
    infinities_compare_equal: bool = False
    validate: bool = False
    fail_fast: bool = False
    onnx_outputs: Sequence[str] = ()
    onnx_exclude_outputs: Sequence[str] = ()
    mark_all: bool = False
    show_unmatched: bool = False
    precision_flag: str | None = None  # --fp16/--bf16/--int8/--fp8: the transform for TensorRT backends
    keep_fp32: Sequence[str] = ()
    calibration_iterations: int = 8
    calibration_cache: str | None = None
    save_transformed: str | None = None
    timeout: Sequence[str] = ()  # SECONDS, or BACKEND:SECONDS for one backend
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # click param name -> value


@dataclass(frozen=True)
class Preflight:
    """What can be checked without reading the model or any file: enough to start the workers early."""

    request: RunRequest
    plugins: PluginSet
    settings: PluginSettings
    specs: Sequence[BackendSpec]
    backends: Sequence[BackendPlan]
    timeouts: Mapping[str, float]
    comparison: ComparisonSettings
    per_output_options: Mapping[str, PerOutput]
    shapes: Mapping[str, tuple[int, ...]]
    default_range: Any
    ranges: Mapping[str, Any]
    loader_name: str
    loader_spec: Any
    model_format: str | None = None  # the model's suffix when it is in its backends' own format, not ONNX


def preflight(request: RunRequest, plugins: PluginSet, settings: PluginSettings) -> Preflight:
    """Check every option that needs neither the model nor a file (fast, and imports no framework)."""
    _check_requested_plugins(plugins, settings)
    words = _backend_words(request, plugins)
    specs = [_backend_spec(plugins, name) for name, _ in words]
    _check_scalars(request)
    comparison, per_output_options = _comparison_settings(request, plugins)
    shapes = parse_input_shapes(request.input_shapes)
    default_range, ranges = parse_val_ranges(request.val_ranges)
    loader_name = _loader_name(request)
    loader_spec = plugins.data_loaders.get(loader_name)
    if loader_spec is None:
        raise UsageError(f"--data-loader {loader_name!r} is not registered; available: "
                         f"{', '.join(plugins.data_loaders.names()) or '(none)'}")
    for path in (request.save_inputs, request.save_outputs):
        if path and os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
            raise UsageError(f"{path} already exists and is not an empty directory; choose a new path to save to")
    names = instance_names([f"{name}:{transform}" if transform else name for name, transform in words])
    backends = [BackendPlan(name, spec, {option.name: request.backend_options.get(spec.param(option),
                                                                                  option.default)
                                         for option in spec.options}, transform)
                for name, spec, (_, transform) in zip(names, specs, words)]
    model_format = _check_model_format(request, plugins, backends)
    return Preflight(request, plugins, settings, specs, backends, _timeouts(request, backends), comparison,
                     per_output_options, shapes, default_range, ranges, loader_name, loader_spec, model_format)


def native_format(model: str | None, specs: Sequence[BackendSpec]) -> str | None:
    """The suffix of ``model`` if a backend registered it as a format of its own (".engine"), else None (ONNX)."""
    if model is None:
        return None
    suffix = os.path.splitext(model)[1].lower()
    return suffix if any(suffix in spec.model_formats for spec in specs) else None


def _check_model_format(request: RunRequest, plugins: PluginSet, backends: Sequence[BackendPlan]) -> str | None:
    """A model in a backend's own format runs only on backends that load it, untransformed and unmarked."""
    suffix = native_format(request.model, list(plugins.backends))
    if suffix is None:
        return None
    loaders = sorted(spec.name for spec in plugins.backends if suffix in spec.model_formats)
    others = list(dict.fromkeys(b.spec.name for b in backends if suffix not in b.spec.model_formats))
    if not backends:
        raise UsageError(f"{request.model} is a {suffix} model: run it with --backend {' or '.join(loaders)}, or "
                         "leave the model out to compare saved runs only")
    if others:
        raise UsageError(f"{request.model} is a {suffix} model, which only {', '.join(loaders)} can load, not "
                         f"{', '.join(others)}; run those on the ONNX model with --save-outputs DIR and compare "
                         f"with --load-outputs DIR")
    for backend in backends:
        if backend.transform:
            raise UsageError(f"--backend {backend.spec.name}:{backend.transform}: transforms apply to ONNX models, "
                             f"and {request.model} is a {suffix} model; build it from the transformed graph instead")
    if request.onnx_outputs or request.mark_all:
        raise UsageError(f"--onnx-outputs / --mark-all mark tensors of an ONNX model, and {request.model} is a "
                         f"{suffix} model; run the ONNX model to compare intermediate tensors")
    return suffix


def build_plan(checked: Preflight, warn: Callable[[str], None], scratch: str | None = None,
               described: ModelInfo | None = None) -> tuple[RunPlan, Iterator[Mapping[str, Any]] | None]:
    """Check the rest against the model and the saved files; return the plan and its feeds (the first one
    already made, so that a failing data source fails before any inference). ``described``: the model's
    inputs and outputs as a backend described them, for a model in its own format (``checked.model_format``).

    Raises UsageError (or ModelError) for anything wrong, naming the problem and the fix.
    """
    request, plugins, specs, backends = checked.request, checked.plugins, checked.specs, checked.backends
    comparison, per_output_options = checked.comparison, checked.per_output_options
    shapes, default_range, ranges = checked.shapes, checked.default_range, checked.ranges
    loader_name, loader_spec, timeouts = checked.loader_name, checked.loader_spec, checked.timeouts
    if checked.model_format is not None:
        if described is None:
            raise ValueError(f"a {checked.model_format} model must be described by its backend before planning")
        model: ModelInfo | None = described
    else:
        model = _read_model(request, specs)
    saved = _saved_backends(request, model)
    names = [b.name for b in backends] + [b.name for b in saved]
    if len(names) < 2:
        raise UsageError(f"cmpx run compares backends: give at least two --backend or --load-outputs (got "
                         f"{len(names)}); available backends: {', '.join(plugins.backends.names())}")
    check_reference(request.reference, names)
    graph, mark = _marking(request, model, bool(saved) and checked.model_format is None)
    if (mark or request.backend_options.get("trt_outputs")) and any(spec.name == "trt" for spec in specs):
        warn("marking outputs changes TensorRT's layer fusion: the marked engine can differ from the unmarked one")
    if mark and not any(spec.supports_marking for spec in specs):
        warn(f"no backend of this run can mark tensors ({', '.join(sorted(set(request.backends)))}); only the "
             "model's outputs are compared")
    output_names = ([s.name for s in model.outputs] + list(mark)) if model else _saved_output_names(saved)
    for option, values in per_output_options.items():
        check_names(option, values.overrides, output_names,
                    ("model outputs" + (" and marked tensors" if mark else "")) if model else "saved outputs")

    feeds, inputs, iterations = None, (), None
    if model is not None and specs:
        check_names("--val-range", ranges, [spec.name for spec in model.inputs], "model inputs")
        synthetic = loader_name == "synthetic"
        inputs = resolve_input_shapes(model.inputs, shapes, warn, fill_dynamic=synthetic)
        options = DataOptions(request.seed, request.iterations, default_range, ranges, tuple(request.load_inputs),
                              request.data_loader_script)
        feeds = _peeked(_fitted(loader_spec.factory(options).feeds(inputs), inputs, loader_name, warn))
        iterations = (request.iterations or 1) if synthetic else request.iterations

        def calibration(count: int) -> Iterator[Mapping[str, Any]]:
            fresh = loader_spec.factory(replace(options, iterations=count)).feeds(inputs)
            return _fitted(itertools.islice(fresh, count), inputs, loader_name, warn)

        backends = _transformed(checked, model, backends, calibration, scratch, warn)
    elif saved:
        iterations = min(len(b.source) for b in saved)
        if request.iterations:
            iterations = min(iterations, request.iterations)
    if iterations is not None:
        for backend in saved:
            if len(backend.source) < iterations:
                raise UsageError(f"--load-outputs {backend.path}: {backend.name} holds {len(backend.source)} "
                                 f"iteration(s) but this run makes {iterations}; use --iterations "
                                 f"{len(backend.source)}")
    plan = RunPlan(model, inputs, backends, request.reference, comparison, timeouts, checked.settings,
                   validate=request.validate, saved_backends=saved, save_inputs=request.save_inputs,
                   save_outputs=request.save_outputs, iterations=iterations, mark=mark, graph=graph,
                   show_unmatched=request.show_unmatched)
    return plan, feeds


def _marking(request: RunRequest, model: ModelInfo | None, has_saved: bool) -> tuple[Any, list[str]]:
    """The model's tensor graph (for the first divergence) and the intermediate tensors to mark."""
    wants_marks = bool(request.onnx_outputs or request.mark_all)
    if request.onnx_exclude_outputs and not wants_marks:
        raise UsageError("--onnx-exclude-outputs needs --onnx-outputs or --mark-all")
    if model is None:
        if wants_marks:
            raise UsageError("marking tensors needs a MODEL: cmpx run MODEL --backend ... --mark-all")
        return None, []
    if not (wants_marks or has_saved):
        return None, []
    from cmpx.model.graph import load_structure, tensor_graph
    from cmpx.model.marking import expand_words, select_tensors

    graph = tensor_graph(load_structure(model.path))
    if not wants_marks:
        return graph, []
    words = expand_words("--onnx-outputs", request.onnx_outputs) + (["*"] if request.mark_all else [])
    exclude = expand_words("--onnx-exclude-outputs", request.onnx_exclude_outputs)
    outputs = {spec.name for spec in model.outputs}
    selected = select_tensors("--onnx-outputs", words, exclude, graph.markable(),
                             hint=f"list them with: cmpx tensors {model.path}")
    return graph, [name for name in selected if name not in outputs]


def _backend_words(request: RunRequest, plugins: PluginSet) -> list[tuple[str, str | None]]:
    """(backend, transform) for every --backend NAME[:TRANSFORM]; --fp16/--bf16/--int8/--fp8 give TensorRT backends
    their transform, as Polygraphy users expect."""
    words = []
    for word in request.backends:
        name, _, transform = word.partition(":")
        if transform and transform not in plugins.transforms:
            raise UsageError(f"--backend {word}: unknown transform {transform!r}; available: "
                             f"{', '.join(plugins.transforms.names()) or '(none)'}")
        words.append((name, transform or None))
    if request.precision_flag:
        targets = [i for i, (name, transform) in enumerate(words) if name == "trt" and not transform]
        if not targets:
            raise UsageError(f"--{request.precision_flag} applies to TensorRT backends (--backend trt); for another "
                             f"backend name the transform, e.g. --backend onnxrt:{request.precision_flag}")
        for index in targets:
            words[index] = (words[index][0], request.precision_flag)
    if request.calibration_iterations < 1:
        raise UsageError(f"--calibration-iterations {request.calibration_iterations}: use at least 1")
    return words


def _transformed(checked: Preflight, model: ModelInfo, backends: Sequence[BackendPlan], calibration: Any,
                 scratch: str | None, warn: Callable[[str], None]) -> list[BackendPlan]:
    """Make each transformed model once and point the backends that run it at it."""
    from cmpx.transforms.options import TransformOptions

    request = checked.request
    wanted = list(dict.fromkeys(b.transform for b in backends if b.transform))
    if not wanted:
        return list(backends)
    directory = request.save_transformed or scratch
    if directory is None:
        raise UsageError("transformed models need a directory: give --save-transformed DIR")
    os.makedirs(directory, exist_ok=True)
    options = TransformOptions(tuple(request.keep_fp32), request.calibration_iterations, request.calibration_cache)
    made = {}
    stem = os.path.splitext(os.path.basename(model.path))[0]
    for name in wanted:
        transform = checked.plugins.transforms.get(name).factory(options)
        path = os.path.join(directory, f"{stem}.{name}.onnx")
        transform.apply(model.path, path, calibration)
        if getattr(transform, "calibrated_from_cache", False):
            warn(f"{name}: calibrated ranges read from {request.calibration_cache} (delete it to recalibrate)")
        made[name] = (path, getattr(transform, "suggested_tolerance", None))
    return [replace(b, model_path=made[b.transform][0], suggested_tolerance=made[b.transform][1])
            if b.transform else b for b in backends]


def _check_scalars(request: RunRequest) -> None:
    if request.iterations is not None and request.iterations < 1:
        raise UsageError(f"--iterations {request.iterations}: run at least 1 iteration")
    if not 0 <= request.seed <= MAX_SEED - max((request.iterations or 1) - 1, 0):
        raise UsageError(f"--seed {request.seed} is out of range; use an integer from 0 to {MAX_SEED}")


def _timeouts(request: RunRequest, backends: Sequence[BackendPlan]) -> dict[str, float]:
    """Seconds per live backend: --timeout 600 (all), --timeout onnxrt:30 (every onnxrt) or onnxrt#2:30 (one)."""
    values = parse_per_output("--timeout", request.timeout, DEFAULT_TIMEOUT_SECONDS, seconds)
    known = list(dict.fromkeys([b.name for b in backends] + [b.spec.name for b in backends]))
    check_names("--timeout", values.overrides, known, "backends of this run")
    return {b.name: values.overrides.get(b.name, values.overrides.get(b.spec.name, values.default))
            for b in backends}


def _loader_name(request: RunRequest) -> str:
    chosen = [name for name, given in (("saved", bool(request.load_inputs)),
                                       ("script", bool(request.data_loader_script))) if given]
    if len(chosen) > 1:
        raise UsageError("give either --load-inputs or --data-loader-script, not both")
    if chosen and request.data_loader not in (None, chosen[0]):
        raise UsageError(f"--data-loader {request.data_loader} conflicts with "
                         f"{'--load-inputs' if chosen[0] == 'saved' else '--data-loader-script'}")
    return chosen[0] if chosen else request.data_loader or "synthetic"


def _read_model(request: RunRequest, specs: Sequence[BackendSpec]) -> ModelInfo | None:
    if request.model is not None:
        return read_model(request.model)
    if specs:
        raise UsageError("live backends need a MODEL: cmpx run MODEL --backend ...")
    if not request.load_outputs:
        raise UsageError("give a MODEL to run, or --load-outputs to compare saved runs")
    return None


def _saved_backends(request: RunRequest, model: ModelInfo | None) -> list[SavedBackend]:
    if not request.load_outputs:
        return []
    from cmpx.saved.opening import open_saved

    fallback = [spec.name for spec in model.outputs] if model else ()
    found = []
    for path in request.load_outputs:
        label = os.path.splitext(os.path.basename(os.path.normpath(path)))[0]
        for source in open_saved(path, "outputs", fallback).sources:
            found.append((f"{source.name}@{label}", source, path))
    unique = instance_names([name for name, _, _ in found])
    return [SavedBackend(name, source, path) for name, (_, source, path) in zip(unique, found)]


def _saved_output_names(saved: Sequence[SavedBackend]) -> list[str]:
    names: dict[str, None] = {}
    for backend in saved:
        if len(backend.source):
            names.update(dict.fromkeys(backend.source.load(0)))
    return list(names)


def _comparison_settings(request: RunRequest, plugins: PluginSet) -> tuple[ComparisonSettings, dict[str, PerOutput]]:
    """The comparison settings, and every per-output option by flag (to check their output names later)."""
    metrics = []
    for name in dict.fromkeys(request.compare or [SIMPLE]):
        spec = plugins.metrics.get(name)
        if spec is None:
            raise UsageError(f"--compare: unknown metric {name!r}; available: {', '.join(plugins.metrics.names())}")
        metrics.append(spec.metric)
    per_output: dict[str, PerOutput] = {
        "--atol": parse_per_output("--atol", request.atol, DEFAULT_TOLERANCE, tolerance),
        "--rtol": parse_per_output("--rtol", request.rtol, DEFAULT_TOLERANCE, tolerance),
        "--check-error-stat": parse_per_output("--check-error-stat", request.check_error_stat, "elemwise",
                                               check_stat),
        "--error-quantile": parse_per_output("--error-quantile", request.error_quantile, 0.99, quantile),
    }
    thresholds = {}
    for metric_name, words in request.thresholds.items():
        spec = plugins.metrics.get(metric_name)
        option = f"--{metric_name}-threshold"
        per_output[option] = thresholds[metric_name] = parse_per_output(option, words, spec.metric.threshold,
                                                                         threshold)
    comparison = ComparisonSettings(
        metrics, per_output["--atol"], per_output["--rtol"], per_output["--check-error-stat"],
        per_output["--error-quantile"], thresholds, request.nan_equal, request.infinities_compare_equal,
        request.fail_fast)
    return comparison, per_output


def _fitted(feeds: Any, inputs: Sequence[TensorSpec], loader: str,
            warn: Callable[[str], None]) -> Iterator[Mapping[str, Any]]:
    warned: set[str] = set()

    def warn_once(message: str) -> None:
        key = message.split(": input ", 1)[-1]
        if key not in warned:
            warned.add(key)
            warn(message)

    source = iter(feeds)
    for iteration in itertools.count():
        # No local names the feed while this generator is suspended: once the run has copied a feed into
        # shared memory, its arrays can be freed.
        try:
            yield fit_feeds(next(source), inputs, iteration, f"data loader {loader!r}", warn_once)
        except StopIteration:
            return


def _peeked(feeds: Iterator[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """``feeds`` with its first feed made now (a data source that fails should fail before any inference)."""
    first = next(feeds, None)
    return _prepend([first], feeds) if first is not None else iter(())


def _prepend(holder: list[Mapping[str, Any]], rest: Iterator[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    yield holder.pop()
    yield from rest


def _backend_spec(plugins: PluginSet, name: str) -> BackendSpec:
    spec = plugins.backends.get(name)
    if spec is not None:
        return spec
    failed = plugins.failures_of(name)
    if failed:
        raise PluginError(f"backend {name!r} is unavailable: its plugin failed to load ({failed[0].error}); "
                          "run 'cmpx plugins' for details")
    raise UsageError(f"unknown backend {name!r}; available: {', '.join(plugins.backends.names()) or '(none)'}"
                     " (see 'cmpx plugins')")


def _check_requested_plugins(plugins: PluginSet, settings: PluginSettings) -> None:
    for failure in plugins.failures:
        if failure.requested and failure.plugin in settings.extra:
            raise PluginError(f"plugin {failure.plugin!r} (from -p / CMPX_PLUGINS) failed to load: {failure.error}")
