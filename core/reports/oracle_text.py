"""The text report's lines about the fp64 oracle (cmpx.outcome.oracle): under a failing pair, which side of each failing
output is closer to the exact value; in the summary, each backend's largest errors against the oracle and, with
marked tensors, where its own error first jumps."""

from __future__ import annotations

from collections.abc import Collection

from cmpx.outcome.oracle import JUMP, OracleBackend, OracleSummary, times
from cmpx.outcome.results import PairResult

OUTPUTS_SHOWN = 5  # per backend in the summary (every tensor is in the JSON report)


def pair_lines(pair: PairResult, model_outputs: frozenset[str]) -> list[str]:
    """One line per failing model output of ``pair`` measured against the oracle, and for the first divergence
    (every marked tensor's is in the JSON report)."""
    divergence = pair.first_divergence.tensor if pair.first_divergence else None
    return [f"oracle: {j.output}: {j.sentence()} (max abs error against {j.oracle}: {j.backend} "
            f"{j.backend_error.max_abs:.3g}, {j.reference} {j.reference_error.max_abs:.3g})" for j in pair.oracle
            if not model_outputs or j.output in model_outputs or j.output == divergence]


def summary_lines(summary: OracleSummary | None, model_outputs: frozenset[str],
                  references: Collection[str] = ()) -> list[str]:
    """Each backend against the oracle: its largest errors on the model's outputs, then the per-layer verdict.
    ``references``: the references of the run's pairs (the oracle may be one: named by --reference, or the only
    other side of a one-backend run)."""
    if summary is None:
        return []
    role = ("the reference of the verdict too" if summary.oracle in references else
            "not the reference of the verdict unless --reference names it")
    lines = [f"against the oracle {summary.oracle} (float64; {role}):"]
    if not summary.backends:
        lines.append("  nothing was measured (the oracle failed, or shares no float tensor with the others)")
    for backend in summary.backends.values():
        outputs = [(name, error) for name, error in backend.worst.items() if name in model_outputs or not
                   model_outputs]
        shown = ", ".join(f"{name} {error.max_abs:.3g} (mean {error.mean_abs:.3g})"
                          for name, error in outputs[:OUTPUTS_SHOWN])
        more = f" and {len(outputs) - OUTPUTS_SHOWN} more" if len(outputs) > OUTPUTS_SHOWN else ""
        lines.append(f"  {backend.backend}: max abs error {shown or '(no output measured)'}{more}")
        layer = layer_line(backend)
        if layer:
            lines.append(f"    {layer}")
    return lines


def layer_line(backend: OracleBackend) -> str | None:
    """Where the backend's own error first jumps (a fault), or that it only grows (a precision drift)."""
    if not backend.layered:
        return None
    jump = backend.jump
    if jump is not None:
        where = ", ".join(p for p in (jump.node, jump.op_type) if p)
        return (f"per layer: its error first jumps at {jump.tensor} ({where}), iteration {jump.iteration}: "
                f"{jump.error:.2g} of the tensor's scale, {times(jump.step)} what its inputs carried "
                f"({jump.carried:.2g}): a fault there (or an ill-conditioned op), not a precision drift")
    step = backend.largest_step
    largest = f" (largest step {times(step[1])} at {step[0]})" if step else ""
    return (f"per layer: no jump of {times(JUMP)} or more{largest}: its error grows by rounding, a precision "
            "drift")
