"""Plain-text report: one line per compared output as results arrive, then a summary and the verdict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cmpx import __version__
from cmpx.compare import OutputResult, PairResult
from cmpx.errors import BackendCrashed, BackendError
from cmpx.validation import NonFinite

if TYPE_CHECKING:
    from cmpx.execution import RunResult
    from cmpx.plan import RunPlan

DETAIL_INDENT = "        "
EXIT_PASSED, EXIT_MISMATCH, EXIT_USAGE, EXIT_BACKEND_FAILED = 0, 1, 2, 3


def exit_code(result: RunResult) -> int:
    """3 if any backend failed (it outranks a mismatch), 1 if any output mismatched, else 0."""
    if result.failures:
        return EXIT_BACKEND_FAILED
    if result.non_finite or any(not pair.passed for pair in result.pairs):
        return EXIT_MISMATCH
    return EXIT_PASSED


@dataclass
class TextReporter:
    echo: Callable[[str], None]
    debug: bool = False
    model_outputs: frozenset[str] = frozenset()  # with marking, other tensors get one line each
    marking: bool = False
    show_unmatched: bool = False

    def started(self, plan: RunPlan) -> None:
        model = plan.model.path if plan.model else "saved runs"
        iterations = f"{plan.iterations} iteration(s)" if plan.iterations else "iterations: all the data"
        marked = f" | {len(plan.mark)} marked tensor(s)" if plan.mark else ""
        self.echo(f"cmpx {__version__} | {model} | backends: {', '.join(plan.names)} | {iterations}{marked}")
        self.model_outputs = plan.required_outputs
        self.marking = plan.graph is not None
        self.show_unmatched = plan.show_unmatched

    def warning(self, message: str) -> None:
        self.echo(f"warning: {message}")

    def loaded(self, backend: str, seconds: float) -> None:
        self.echo(f"loaded {backend} in {seconds:.3f} s")

    def backend_failed(self, error: BackendError) -> None:
        self.echo(f"ERROR   {error}")
        if isinstance(error, BackendCrashed) and error.stderr_tail:
            self.echo(_indent(f"last lines of its stderr:\n{error.stderr_tail}", "        "))
        elif self.debug and error.__cause__ is not None:
            self.echo(_indent(str(error.__cause__), "        "))

    def pair_compared(self, pair: PairResult) -> None:
        self.echo(f"[iteration {pair.iteration}] {pair.backend} vs {pair.reference} (reference)")
        for output in pair.outputs:
            intermediate = self.marking and output.output not in self.model_outputs
            for line in format_output(output, details=not intermediate):
                self.echo("  " + line)
        if pair.unmatched:
            sides = sorted({side for _, side in pair.unmatched})
            self.echo(f"  {len(pair.unmatched)} marked tensor(s) only in {' or '.join(sides)}, not compared"
                      + ("" if self.show_unmatched else " (--show-unmatched lists them)"))
            if self.show_unmatched:
                for tensor, side in pair.unmatched:
                    self.echo(f"    {tensor} (only in {side})")
        divergence = pair.first_divergence
        if divergence is not None:
            where = ", ".join(p for p in (divergence.node, divergence.op_type) if p)
            first = divergence.result.metrics[0].summary if divergence.result.metrics else divergence.result.note
            self.echo(f"  first divergence: {divergence.tensor} ({where}): {first}")
            for line in format_output(divergence.result)[1:]:
                self.echo("  " + line)
        elif self.marking and not pair.passed:
            self.echo("  first divergence: none found among the compared tensors (the failing ones are not "
                      "computed from compared tensors that pass)")

    def non_finite(self, finding: NonFinite) -> None:
        self.echo(f"INVALID {finding} (--validate)")

    def summary(self, result: RunResult, interrupted: bool = False) -> None:
        self.echo("Summary (interrupted: what finished)" if interrupted else "Summary")
        by_pair: dict[tuple[str, str], list[PairResult]] = {}
        for pair in result.pairs:
            by_pair.setdefault((pair.backend, pair.reference), []).append(pair)
        for (backend, reference), pairs in by_pair.items():
            passed = sum(p.passed for p in pairs)
            self.echo(f"  {backend} vs {reference}: {passed}/{len(pairs)} iterations passed "
                      f"({100.0 * passed / len(pairs):.0f}%)")
        if not result.pairs:
            self.echo("  nothing was compared")
        if result.non_finite:
            self.echo(f"  --validate: {len(result.non_finite)} output(s) with NaN or Inf")
        if result.stopped_early:
            self.echo("  stopped at the first mismatch (--fail-fast)")
        for name, error in result.failures.items():
            self.echo(f"  {name}: FAILED during {error.phase}: {error.detail}")
        if interrupted:
            return
        code = exit_code(result)
        verdict = {EXIT_PASSED: "PASSED", EXIT_MISMATCH: "FAILED (mismatch)",
                   EXIT_BACKEND_FAILED: "FAILED (backend failure)"}[code]
        self.echo(f"{verdict} | {len(result.pairs)} comparison(s) over {result.iterations} iteration(s) "
                  f"| exit {code}")


def format_output(output: OutputResult, details: bool = True) -> list[str]:
    """One line per metric, ``STATUS  NAME: finding [criterion]``, each followed by its detail lines."""
    if output.failed_early:
        return [f"FAILED  {output.output}: {output.note}"]
    lines = []
    for metric in output.metrics:
        status = "PASSED" if metric.passed else "FAILED"
        lines.append(f"{status}  {output.output}: {metric.summary} [{metric.criterion}]")
        if details:
            lines += [DETAIL_INDENT + detail for detail in metric.details]
    if output.note:
        lines.append(DETAIL_INDENT + output.note)
    return lines


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())
