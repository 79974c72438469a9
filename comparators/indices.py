"""--compare indices (with --index-tolerance): index outputs (top-k classes, detections) compared as Polygraphy's
``indices`` comparison does. Along the last axis, each row of the backend's output is checked against the
reference's row: a value at position i passes if the reference has it at i, or first has it within ``tolerance``
positions of i; the backend's last ``tolerance`` entries are not checked (they may have been pushed out of the
top-k). A tolerance of 0 is exact equality. Unlike Polygraphy, a scalar output is one row of one element (it
crashed there), and the tolerance must be a whole number (1.0 crashed there)."""

from __future__ import annotations

import math
from typing import Any

from cmpx.comparison.compare import ComparisonContext
from cmpx.outcome.results import MetricResult

FIRST_FAILURES = 5


class IndicesCheck:
    name = "indices"
    threshold = 0.0  # the index tolerance: --index-tolerance [NAME:]N (also --indices-threshold)
    flag_aliases = ("--index-tolerance",)
    description = "index outputs (top-k): each value within --index-tolerance positions of its place in the reference"

    @staticmethod
    def check_threshold(value: float) -> None:
        if not (math.isfinite(value) and value >= 0 and float(value).is_integer()):
            raise ValueError(f"the index tolerance is a whole number of positions (0, 1, 2...), not {value:g}")

    def compare(self, context: ComparisonContext) -> MetricResult:
        import numpy as np

        tolerance = context.settings.thresholds.get(self.name, self.threshold)
        if not (math.isfinite(tolerance) and tolerance >= 0 and float(tolerance).is_integer()):
            return MetricResult(self.name, False, summary=f"the index tolerance {tolerance:g} is not a whole number of "
                                "positions", criterion="index tolerance: a whole number")
        tolerance = int(tolerance)
        actual, reference = np.asarray(context.actual), np.asarray(context.reference)
        width = actual.shape[-1] if actual.ndim else 1
        rows_a, rows_b = actual.reshape(-1, width), reference.reshape(-1, width)
        checked = max(0, width - tolerance) if tolerance else width
        failures: list[str] = []
        failing_rows = 0
        for row, (a, b) in enumerate(zip(rows_a, rows_b)):
            failed = False
            for position in np.flatnonzero(a[:checked] != b[:checked]):
                value = a[position]
                found = np.flatnonzero(b == value)
                if found.size and abs(int(found[0]) - int(position)) <= tolerance:
                    continue
                failed = True
                if len(failures) < FIRST_FAILURES:
                    where = f"at {int(found[0])}" if found.size else "nowhere"
                    failures.append(f"row {row}: {_text(value)} at {int(position)}, in the reference {where}")
            failing_rows += failed
        rows = len(rows_a)
        summary = (f"{failing_rows}/{rows} rows differ beyond {tolerance} position(s)" if failing_rows else
                   f"{rows} row(s) within {tolerance} position(s)")
        return MetricResult(self.name, failing_rows == 0, summary=summary, criterion=f"index tolerance {tolerance}",
                            value=float(failing_rows), details=tuple(failures),
                            data={"rows": rows, "failing_rows": failing_rows, "tolerance": tolerance,
                                  "checked_per_row": checked})


def _text(value: Any) -> str:
    return str(value.item() if hasattr(value, "item") else value)
