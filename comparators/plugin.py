"""Registers the built-in metrics, exactly as a third-party plugin would. The tolerance check is the default:
a run without --compare uses it."""

from cmpx.hookspecs import hookimpl
from cmpx_comparators.metrics import builtin_metrics


@hookimpl
def register_metrics(registry):
    for metric in builtin_metrics():
        registry.add(metric, default=metric.name == "simple")
