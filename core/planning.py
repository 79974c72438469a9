"""Validate everything the user asked for and turn it into a RunPlan, before any worker starts."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmpx.argtypes import PerOutput, check_names, check_stat, parse_input_shapes, parse_per_output, \
    parse_val_ranges, quantile, threshold, tolerance
from cmpx.compare import SIMPLE, ComparisonSettings
from cmpx.errors import PluginError, UsageError
from cmpx.plan import BackendPlan, RunPlan
from cmpx.feeds import check_feeds
from cmpx.loaders.options import DataOptions
from cmpx.model import read_model
from cmpx.pairing import check_reference, instance_names
from cmpx.plugins import PluginSet, PluginSettings
from cmpx.shapes import resolve_input_shapes

DEFAULT_TOLERANCE = 1e-5
DEFAULT_TIMEOUT_SECONDS = 600.0
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class RunRequest:
    """The ``cmpx run`` arguments as typed by the user, before validation."""

    model: str
    backends: Sequence[str]
    reference: str | None = None
    seed: int = 1
    iterations: int = 1
    input_shapes: Sequence[str] = ()
    val_ranges: Sequence[str] = ()
    data_loader: str = "synthetic"
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
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # click param name -> value


def build_plan(request: RunRequest, plugins: PluginSet, settings: PluginSettings,
               warn: Callable[[str], None]) -> tuple[RunPlan, Iterator[Mapping[str, Any]]]:
    """Check the request against the plugins and the model; return the plan and its (peeked) feeds.

    Raises UsageError (or ModelError) for anything wrong, naming the problem and the fix.
    """
    _check_requested_plugins(plugins, settings)
    specs = [_backend_spec(plugins, name) for name in request.backends]
    if len(specs) < 2:
        raise UsageError(f"cmpx run compares backends: give at least two --backend (got {len(specs)}); "
                         f"available: {', '.join(plugins.backends.names())}")
    names = instance_names(request.backends)
    check_reference(request.reference, names)
    if not 0 <= request.seed <= MAX_SEED - max(request.iterations - 1, 0):
        raise UsageError(f"--seed {request.seed} is out of range; use an integer from 0 to {MAX_SEED}")
    if request.iterations < 1:
        raise UsageError(f"--iterations {request.iterations}: run at least 1 iteration")
    if not request.timeout > 0:
        raise UsageError(f"--timeout {request.timeout:g}: give a number of seconds above 0")
    comparison, per_output_options = _comparison_settings(request, plugins)
    shapes = parse_input_shapes(request.input_shapes)
    default_range, ranges = parse_val_ranges(request.val_ranges)
    loader_spec = plugins.data_loaders.get(request.data_loader)
    if loader_spec is None:
        raise UsageError(f"--data-loader {request.data_loader!r} is not registered; available: "
                         f"{', '.join(plugins.data_loaders.names()) or '(none)'}")

    model = read_model(request.model)
    output_names = [spec.name for spec in model.outputs]
    for option, values in per_output_options.items():
        check_names(option, values.overrides, output_names, "model outputs")
    check_names("--val-range", ranges, [spec.name for spec in model.inputs], "model inputs")
    inputs = resolve_input_shapes(model.inputs, shapes, warn)

    loader = loader_spec.factory(DataOptions(request.seed, request.iterations, default_range, ranges))
    feeds = _checked(loader.feeds(inputs), inputs, f"data loader {request.data_loader!r}")
    first = next(feeds, None)  # a loader that fails should fail before any worker starts
    feeds = itertools.chain([first], feeds) if first is not None else iter(())

    backends = [BackendPlan(name, spec, {option.name: request.backend_options.get(spec.param(option), option.default)
                                         for option in spec.options})
                for name, spec in zip(names, specs)]
    plan = RunPlan(model, inputs, backends, request.reference, comparison, request.timeout, settings,
                   validate=request.validate)
    return plan, feeds


def _comparison_settings(request: RunRequest, plugins: PluginSet) -> tuple[ComparisonSettings, dict[str, PerOutput]]:
    """The comparison settings, and every per-output option by flag (to check their output names later)."""
    names = list(dict.fromkeys(request.compare or [SIMPLE]))
    metrics = []
    for name in names:
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


def _checked(feeds: Iterator[Any], inputs: Sequence[Any], source: str) -> Iterator[Mapping[str, Any]]:
    for iteration, feed in enumerate(feeds):
        check_feeds(feed, inputs, iteration, source)
        yield feed


def _backend_spec(plugins: PluginSet, name: str):
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
