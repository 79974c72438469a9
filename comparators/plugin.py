"""Registers the built-in metrics, exactly as a third-party plugin would."""

from cmpx.hookspecs import hookimpl
from cmpx_comparators.metrics import ElementwiseMetric


@hookimpl
def register_metrics(registry):
    registry.add(ElementwiseMetric())
