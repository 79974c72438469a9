"""What a run was asked to compare but never did: a pass must mean that what the user asked about was compared,
so every such request is named in a warning (a per-output tolerance for a name that never appeared, a metric that
never ran, marked tensors no pair produced on both sides)."""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from cmpx.options.table import threshold_flag

if TYPE_CHECKING:
    from cmpx.options.argtypes import PerOutput
    from cmpx.plan import RunPlan
    from cmpx.options.request import RunRequest
    from cmpx.outcome.results import RunResult


def unfulfilled(request: RunRequest, plan: RunPlan, result: RunResult) -> list[str]:
    if not result.tallies:
        return []  # nothing at all was compared: the summary says so, and the run fails
    compared = result.compared_outputs
    found = []
    comparison = plan.comparison
    per_output: dict[str, PerOutput[Any]] = {
        "--atol": comparison.atol, "--rtol": comparison.rtol, "--check-error-stat": comparison.check_stat,
        "--error-quantile": comparison.quantile,
        **{threshold_flag(name): values for name, values in comparison.thresholds.items()}}
    for option, values in per_output.items():
        for name in values.overrides:
            if name not in compared:
                found.append(f"{option} {name}:... was never applied: no output named {name} was compared")
    for name in plan.postprocess.by_output:
        if name not in compared:
            found.append(f"--postprocess {name}:... was never applied: no output named {name} was compared")
    for target, source in plan.output_map.items():
        if target not in compared:
            found.append(f"--output-map {target}={source} paired nothing: no output {target} was compared")
    for metric in comparison.metrics:
        name = getattr(metric, "name", "?")
        if name not in result.metrics_ran:
            found.append(f"--compare {name} never ran: every output failed before it could be compared")
    not_comparable = {output: why for pair in result.pairs for output, why in pair.not_comparable}
    for output, why in not_comparable.items():
        if output not in compared:
            found.append(f"output {output} was not compared: {why}")
    if plan.mark:
        missed = [name for name in plan.mark if name not in compared]
        for word in request.onnx_outputs:
            if word in ("mark", "all", "*") or word.startswith("@"):
                continue
            matched = fnmatch.filter(plan.mark, word)
            if matched and all(name in missed for name in matched):
                found.append(f"--onnx-outputs {word}: none of its {len(matched)} tensor(s) was compared (no pair "
                             "produced them on both sides; --show-unmatched lists them)")
        if missed:
            found.append(f"{len(missed)} of {len(plan.mark)} marked tensor(s) were never compared (no pair produced "
                         "them on both sides: a transformed graph no longer computes them, or a backend of the run "
                         "cannot mark tensors)")
    return found
