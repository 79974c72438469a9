"""Registers the built-in metrics, exactly as a third-party plugin would."""

from cmpx.hookspecs import hookimpl
from cmpx_comparators.metrics import builtin_metrics


@hookimpl
def register_metrics(registry):
    for metric in builtin_metrics():
        registry.add(metric)
