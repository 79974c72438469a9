"""Metric objects: light to import (numpy is imported when a comparison runs)."""

from __future__ import annotations

from typing import Any

from cmpx.compare import MetricResult, Tolerance


class ElementwiseMetric:
    """Polygraphy's default check: an element fails if abs error > atol AND rel error > rtol."""

    name = "elemwise"

    def compare(self, actual: Any, reference: Any, tolerance: Tolerance) -> MetricResult:
        from cmpx_comparators.elementwise import check_elementwise

        return check_elementwise(actual, reference, tolerance)
