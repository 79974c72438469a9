"""Validate everything the user asked for and turn it into a RunPlan, before any worker starts."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmpx.argtypes import check_names, parse_input_shapes, parse_per_output, parse_val_ranges, tolerance
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
DEFAULT_METRIC = "elemwise"
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
    atol = parse_per_output("--atol", request.atol, DEFAULT_TOLERANCE, tolerance)
    rtol = parse_per_output("--rtol", request.rtol, DEFAULT_TOLERANCE, tolerance)
    shapes = parse_input_shapes(request.input_shapes)
    default_range, ranges = parse_val_ranges(request.val_ranges)
    metric = plugins.metrics.get(DEFAULT_METRIC)
    if metric is None:
        raise PluginError(f"metric {DEFAULT_METRIC!r} is not registered (is the 'metrics' plugin blocked?)")
    loader_spec = plugins.data_loaders.get(request.data_loader)
    if loader_spec is None:
        raise UsageError(f"--data-loader {request.data_loader!r} is not registered; available: "
                         f"{', '.join(plugins.data_loaders.names()) or '(none)'}")

    model = read_model(request.model)
    output_names = [spec.name for spec in model.outputs]
    check_names("--atol", atol.overrides, output_names, "model outputs")
    check_names("--rtol", rtol.overrides, output_names, "model outputs")
    check_names("--val-range", ranges, [spec.name for spec in model.inputs], "model inputs")
    inputs = resolve_input_shapes(model.inputs, shapes, warn)

    loader = loader_spec.factory(DataOptions(request.seed, request.iterations, default_range, ranges))
    feeds = _checked(loader.feeds(inputs), inputs, f"data loader {request.data_loader!r}")
    first = next(feeds, None)  # a loader that fails should fail before any worker starts
    feeds = itertools.chain([first], feeds) if first is not None else iter(())

    backends = [BackendPlan(name, spec, {option.name: request.backend_options.get(spec.param(option), option.default)
                                         for option in spec.options})
                for name, spec in zip(names, specs)]
    plan = RunPlan(model, inputs, backends, request.reference, metric.metric, atol, rtol, request.timeout,
                   settings)
    return plan, feeds


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
