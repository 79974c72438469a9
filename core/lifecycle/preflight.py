"""The first checks of a run: everything that needs neither the model nor a file, so that a bad option is an
error before any worker starts, fast, and without importing a framework. One small file is read here: a
--tolerances file, whose values are options (cmpx.tolerances.tolerance_file)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmpx.options.argtypes import PerOutput, ValueRange, byte_size, check_names, check_stat, parse_per_output, \
    parse_shape_words, parse_val_ranges, quantile, seconds, threshold, tolerance
from cmpx.comparison.compare import ComparisonSettings
from cmpx.comparison.metric_names import selected_metrics
from cmpx.comparison.output_map import check_output_map
from cmpx.comparison.pairing import instance_names
from cmpx.comparison.postprocess import Postprocess, parse_postprocess
from cmpx.envs import resolve_python
from cmpx.errors import PluginError, UsageError
from cmpx.model.native import native_format
from cmpx.outcome.oracle import ORACLE_TRANSFORM
from cmpx.outputs import check_directory_output, check_file_output
from cmpx.plan import BackendPlan
from cmpx.plugin.manager import PluginSet, PluginSettings
from cmpx.plugin.registry import BackendOption, BackendSpec, DataLoaderSpec
from cmpx.options.request import RunRequest
from cmpx.options.table import threshold_flag
from cmpx.suggest import did_you_mean
from cmpx.tolerances.tolerance_file import PER_OUTPUT_FIELDS, merged_words

DEFAULT_TOLERANCE = 1e-5
DEFAULT_TIMEOUT_SECONDS = 600.0
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class Preflight:
    """A request whose options are checked, and what they parsed to: enough to start the workers early."""

    request: RunRequest
    plugins: PluginSet
    settings: PluginSettings
    backends: Sequence[BackendPlan]
    timeouts: Mapping[str, float]
    comparison: ComparisonSettings
    per_output_options: Mapping[str, PerOutput[Any]]
    shapes: Mapping[str, tuple[int, ...]]
    default_range: ValueRange | None
    ranges: Mapping[str, ValueRange]
    loader: DataLoaderSpec
    model_format: str | None = None  # the model's suffix when it is in its backends' own format, not ONNX
    output_map: tuple[str, ...] = ()  # --output-map words, read against the outputs' names by the planner
    postprocess: Postprocess = field(default_factory=Postprocess)
    dims: Mapping[str, int] = field(default_factory=dict)  # --input-shapes batch=4: named dimensions' sizes
    memory_budget: int | None = None  # --memory-budget in bytes; None: the default, decided when planning


def preflight(request: RunRequest, plugins: PluginSet, settings: PluginSettings) -> Preflight:
    """Check every option that needs neither the model nor a file (fast, and imports no framework)."""
    _check_requested_plugins(plugins, settings)
    words = _backend_words(request, plugins)
    specs = [_backend_spec(plugins, name) for name, _, _ in words]
    _check_unused_backend_options(request, plugins, {spec.name for spec in specs})
    _check_scalars(request)
    comparison, per_output_options = _comparison_settings(request, plugins)
    shapes, dims = parse_shape_words(request.input_shapes)
    default_range, ranges = parse_val_ranges(request.val_range)
    loader = _loader(request, plugins)
    _check_outputs(request)
    names = instance_names([(f"{name}:{transform}" if transform else name) + (f"@{python}" if python else "")
                            for name, transform, python in words])
    pythons = {python: resolve_python(python) for _, _, python in words if python}
    backends = [BackendPlan(name, spec, _backend_options(spec, request.backend_options), transform,
                            python=pythons[python] if python else None, python_given=python)
                for name, spec, (_, transform, python) in zip(names, specs, words)]
    model_format = _check_model_format(request, plugins, backends)
    return Preflight(request, plugins, settings, backends, _timeouts(request, backends), comparison,
                     per_output_options, shapes, default_range, ranges, loader, model_format,
                     check_output_map(request.output_map), parse_postprocess(request.postprocess), dims,
                     byte_size("--memory-budget", request.memory_budget) if request.memory_budget else None)


def _check_outputs(request: RunRequest) -> None:
    """Every file and directory the run will write can be written: before any work, not after it."""
    files = {"--report-json": request.report_json, "--junit": request.junit, "--report-html": request.report_html,
             "--log-file": request.log_file}
    directories = {"--save-error-plots": (request.save_error_plots, False),
                   "--save-transformed": (request.save_transformed, False)}
    for option, path in (("--save-inputs", request.save_inputs), ("--save-outputs", request.save_outputs)):
        if path and path.lower().endswith(".json"):  # Polygraphy's JSON: one file
            if os.path.exists(path):
                raise UsageError(f"{option} {path} already exists; choose a new path to save to")
            files[option] = path
        elif path:  # a cmpx run: a new or empty directory
            directories[option] = (path, True)
    if request.calibration_cache and not os.path.exists(request.calibration_cache):
        files["--calibration-cache"] = request.calibration_cache  # written once calibrated
    for option, path in files.items():
        if path:
            check_file_output(option, path)
    for option, (path, empty) in directories.items():
        if path:
            check_directory_output(option, path, empty)
    given = [(option, os.path.abspath(path)) for option, path in
             [*files.items(), *((o, p) for o, (p, _) in directories.items())] if path]
    for index, (option, path) in enumerate(given):
        twin = next((other for other, same in given[:index] if same == path), None)
        if twin is not None:
            raise UsageError(f"{twin} and {option} both write {path}; give each its own path")


def _check_model_format(request: RunRequest, plugins: PluginSet, backends: Sequence[BackendPlan]) -> str | None:
    """A model in a backend's own format runs only on backends that load it, untransformed and unmarked."""
    suffix = native_format(request.model, list(plugins.backends))
    if suffix is None:
        return None
    loaders = sorted(spec.name for spec in plugins.backends if suffix in spec.model_formats)
    if request.oracle:
        raise UsageError(f"--oracle runs an ONNX model in float64, and {request.model} is a {suffix} model; run the "
                         "ONNX model with --oracle, or compare its saved fp64 outputs with --load-outputs")
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


def _backend_words(request: RunRequest, plugins: PluginSet) -> list[tuple[str, str | None, str | None]]:
    """(backend, transform, python) for every --backend NAME[:TRANSFORM][@PYTHON]; --fp16/--bf16/--int8/--fp8 give
    their transform to the backends that declared those precision flags (TensorRT), as Polygraphy users expect."""
    words = []
    for word in request.backends:
        backend, at, python = word.partition("@")
        if at and not python:
            raise UsageError(f"--backend {word}: name the Python after '@' (a path, a virtual environment's "
                             "directory, or env:NAME from cmpx env create)")
        name, _, transform = backend.partition(":")
        if transform and transform not in plugins.transforms:
            raise UsageError(f"--backend {word}: unknown transform {transform!r}"
                             f"{did_you_mean(transform, plugins.transforms.names())}; available: "
                             f"{', '.join(plugins.transforms.names()) or '(none)'}")
        words.append((name, transform or None, python or None))
    if request.oracle and not any(transform == ORACLE_TRANSFORM for _, transform, _ in words):
        if not request.model:
            raise UsageError("--oracle runs the model in float64: give the MODEL (or compare against a saved fp64 run "
                             "with --load-outputs, without --oracle)")
        if ORACLE_TRANSFORM not in plugins.transforms or "onnxref" not in plugins.backends:
            raise UsageError("--oracle runs onnxref:fp64, and this cmpx lacks the onnxref backend or the fp64 "
                             "transform (see 'cmpx plugins'); name an fp64 backend instead: --backend NAME:fp64")
        words.append(("onnxref", ORACLE_TRANSFORM, None))
    flag = request.precision_flag
    if flag:
        targets = [i for i, (name, transform, _) in enumerate(words)
                   if not transform and name in plugins.backends and flag in plugins.backends[name].precision_flags]
        if not targets:
            takers = [spec.name for spec in plugins.backends if flag in spec.precision_flags]
            raise UsageError(f"--{flag} applies to backends that take precision flags ({', '.join(takers) or 'none'} "
                             f"here); for another backend name the transform, e.g. --backend onnxrt:{flag}")
        if flag not in plugins.transforms:
            raise UsageError(f"--{flag}: no {flag} transform is registered (see 'cmpx plugins')")
        for index in targets:
            words[index] = (words[index][0], flag, words[index][2])
    if request.calibration_iterations < 1:
        raise UsageError(f"--calibration-iterations {request.calibration_iterations}: use at least 1")
    _check_node_lists(request, {transform for _, transform, _ in words if transform})
    return words


# The built-in transforms each node list option applies to; a plugin's transform may read either.
NODE_LIST_TAKERS = {"--keep-fp32": ("fp16", "bf16"), "--no-quantize": ("int8", "fp8")}


def _check_node_lists(request: RunRequest, transforms: set[str]) -> None:
    """--keep-fp32 without an fp16/bf16 backend, or --no-quantize without an int8/fp8 one, would change nothing
    (an int8 list of cmpx precision given to --keep-fp32, say): a usage error, not a silent no-op."""
    built_in = {kind for kinds in NODE_LIST_TAKERS.values() for kind in kinds} | {ORACLE_TRANSFORM}
    for (option, kinds), given in zip(NODE_LIST_TAKERS.items(), (request.keep_fp32, request.no_quantize)):
        if given and not any(t in kinds or t not in built_in for t in transforms):
            other = next(o for o in NODE_LIST_TAKERS if o != option)
            raise UsageError(f"{option} applies to {' and '.join(kinds)} backends, and this run has none "
                             f"(--backend NAME:{kinds[0]}); for {' and '.join(NODE_LIST_TAKERS[other])} use {other}")


def _backend_options(spec: BackendSpec, given: Mapping[str, Any]) -> dict[str, Any]:
    """The backend's option values by option name: given ones checked as the command line checks them."""
    return {option.name: _option_value(spec, option, given[spec.param(option)]) if spec.param(option) in given
            else option.default for option in spec.options}


def _check_unused_backend_options(request: RunRequest, plugins: PluginSet, used: set[str]) -> None:
    """An option of a backend the run does not use would be ignored: refuse it, naming the backend."""
    for name in plugins.backends.names():
        spec = plugins.backends.get(name)
        if spec is None or name in used:
            continue
        for option in spec.options:
            if option.given(request.backend_options.get(spec.param(option))):
                raise UsageError(f"{spec.flag(option)} is an option of backend {name}, which this run does not use; "
                                 f"add --backend {name}, or leave it out")


def _option_value(spec: BackendSpec, option: BackendOption, value: Any) -> Any:
    flag = spec.flag(option)
    if option.is_flag:
        if not isinstance(value, bool):
            raise UsageError(f"{flag} is a flag: give True or False, not {value!r}")
        return value
    if value is None:
        return option.default
    values = ([value] if isinstance(value, (str, int, float)) else list(value)) if option.multiple else [value]
    checked = []
    for item in values:
        try:
            item = option.type(item) if not isinstance(item, bool) else None
        except (TypeError, ValueError):
            item = None
        if item is None:
            raise UsageError(f"{flag}: {value!r} is not a valid {option.type.__name__}")
        if option.choices and item not in option.choices:
            raise UsageError(f"{flag}: {item!r}{did_you_mean(str(item), map(str, option.choices))} is not one of "
                             f"{', '.join(option.choices)}")
        checked.append(item)
    return tuple(checked) if option.multiple else checked[0]


def _check_scalars(request: RunRequest) -> None:
    if request.warm_up < 0:
        raise UsageError(f"--warm-up {request.warm_up}: give a number of inferences, 0 or more")
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


def _loader(request: RunRequest, plugins: PluginSet) -> DataLoaderSpec:
    """The data loader: --data-loader NAME, else the one an option selects (--load-inputs...), else the default."""
    chosen = [spec for spec in plugins.data_loaders if spec.selected_by and getattr(request, spec.selected_by)]
    flags = [f"--{spec.selected_by.replace('_', '-')}" for spec in chosen if spec.selected_by]
    if len(chosen) > 1:
        raise UsageError(f"give either {flags[0]} or {flags[1]}, not both")
    if chosen and request.data_loader not in (None, chosen[0].name):
        raise UsageError(f"--data-loader {request.data_loader} conflicts with {flags[0]}")
    if request.data_loader is not None:
        spec = plugins.data_loaders.get(request.data_loader)
        if spec is None:
            raise UsageError(f"--data-loader {request.data_loader!r} is not registered; available: "
                             f"{', '.join(plugins.data_loaders.names()) or '(none)'}")
        return spec
    if chosen:
        return chosen[0]
    defaults = plugins.data_loaders.defaults()
    if not defaults:
        raise PluginError("no default data loader is registered (its plugin failed to load: see 'cmpx plugins'); "
                          "choose one with --data-loader NAME")
    return defaults[0]


def _comparison_settings(request: RunRequest, plugins: PluginSet) -> tuple[ComparisonSettings,
                                                                         dict[str, PerOutput[Any]]]:
    """The comparison settings, and every per-output option by flag (to check their output names later)."""
    if request.compare:
        metrics = selected_metrics(list(request.compare), plugins)
    else:
        metrics = [spec.metric for spec in plugins.metrics.defaults()]
        if not metrics:
            raise PluginError("no default metric is registered (its plugin failed to load: see 'cmpx plugins'); "
                              "choose metrics with --compare NAME")
    words, from_file = merged_words(request.tolerances, {field: getattr(request, field) for field in
                                                         PER_OUTPUT_FIELDS})
    # the file's output names are checked against the model's first, so that a wrong one names the file
    per_output: dict[str, PerOutput[Any]] = {f"--tolerances {request.tolerances}": PerOutput(
        None, dict.fromkeys(from_file))} if from_file else {}
    per_output.update({
        "--atol": parse_per_output("--atol", words.get("atol", request.atol), DEFAULT_TOLERANCE, tolerance),
        "--rtol": parse_per_output("--rtol", words.get("rtol", request.rtol), DEFAULT_TOLERANCE, tolerance),
        "--check-error-stat": parse_per_output("--check-error-stat", words.get("check_error_stat",
                                                                               request.check_error_stat),
                                               "elemwise", check_stat),
        "--error-quantile": parse_per_output("--error-quantile", words.get("error_quantile", request.error_quantile),
                                             0.99, quantile),
    })
    thresholds = {}
    for metric_name, values in request.thresholds.items():
        spec = plugins.metrics.get(metric_name)
        if spec is None or getattr(spec.metric, "threshold", None) is None:
            raise UsageError(f"{threshold_flag(metric_name)}: no metric {metric_name!r} with a threshold is registered")
        option = " / ".join((threshold_flag(metric_name), *getattr(spec.metric, "flag_aliases", ())))
        parse = _metric_threshold(spec.metric)
        per_output[option] = thresholds[metric_name] = parse_per_output(option, values, spec.metric.threshold, parse)
    comparison = ComparisonSettings(
        metrics, per_output["--atol"], per_output["--rtol"], per_output["--check-error-stat"],
        per_output["--error-quantile"], thresholds, request.nan_equal, _infinities_equal(request),
        request.fail_fast)
    return comparison, per_output


def _metric_threshold(metric: Any) -> Callable[[str], float]:
    """A threshold's parser: any number but NaN, which the metric's optional ``check_threshold(value)`` may narrow
    (it raises ValueError saying what it takes)."""
    check = getattr(metric, "check_threshold", None)
    if check is None:
        return threshold

    def parse(text: str) -> float:
        value = threshold(text)
        check(value)
        return value

    return parse


def _backend_spec(plugins: PluginSet, name: str) -> BackendSpec:
    spec = plugins.backends.get(name)
    if spec is not None:
        return spec
    failed = plugins.failures_of(name)
    if failed:
        raise PluginError(f"backend {name!r} is unavailable: its plugin failed to load ({failed[0].error}); "
                          "run 'cmpx plugins' for details")
    raise UsageError(f"unknown backend {name!r}{did_you_mean(name, plugins.backends.names())}; available: {', '.join(plugins.backends.names()) or '(none)'}"
                     " (see 'cmpx plugins')")


def _check_requested_plugins(plugins: PluginSet, settings: PluginSettings) -> None:
    for failure in plugins.failures:
        if failure.requested and failure.plugin in settings.extra:
            raise PluginError(f"plugin {failure.plugin!r} (from -p / CMPX_PLUGINS) failed to load: {failure.error}")


def _infinities_equal(request: RunRequest) -> bool:
    """Same-sign infinities at the same element agree (a transformer's attention mask holds -inf on both sides),
    unless --strict-infinities asks for Polygraphy's rule; both flags at once are a contradiction."""
    if request.strict_infinities and request.infinities_compare_equal:
        raise UsageError("--strict-infinities and --infinities-compare-equal contradict each other; give one")
    return not request.strict_infinities
