"""Plain-text report: results as they arrive, then a summary table and the verdict.

Verbosity: -q shows failures, errors and the summary; the default adds one line per compared output (with
statistics, histogram and worst elements for failing ones); -v adds the statistics of passing outputs too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cmpx import __version__
from cmpx.errors import BackendCrashed, BackendFailed, ExitCode
from cmpx.reports.terminal import Progress, paint
from cmpx.results import NonFinite, OutputResult, PairResult, PairTally
from cmpx.runtimes import labels, linked_note

if TYPE_CHECKING:
    from cmpx.plan import RunPlan
    from cmpx.report import Report
    from cmpx.runtimes import BackendRuntime

DETAIL_INDENT = "        "
LOCAL_ERRORS_SHOWN = 10  # nodes listed by --local-error, failing ones first (the JSON report has every one)
QUIET, NORMAL, VERBOSE, VERY_VERBOSE = 0, 1, 2, 3
VERDICTS = {ExitCode.PASSED: "PASSED", ExitCode.MISMATCH: "FAILED (mismatch)",
            ExitCode.BACKEND_FAILED: "FAILED (backend failure)", ExitCode.USAGE: "FAILED (a report was not written)"}


class TextReporter:
    """The human-readable report of one run, written line by line through ``echo`` as the run goes."""

    def __init__(self, plan: RunPlan, echo: Callable[[str], None], *, debug: bool = False, verbosity: int = NORMAL,
                 colour: bool = False, progress: Progress | None = None):
        self.plan = plan
        self.echo = echo
        self.debug = debug
        self.verbosity = verbosity
        self.colour = colour
        self.progress = progress or Progress()
        self.model_outputs = plan.required_outputs  # with marking, other tensors get one line each
        self.suggestions = {b.name: (b.transform, b.suggested_tolerance) for b in plan.backends
                            if b.suggested_tolerance is not None}
        self.default_tolerances = (not plan.comparison.atol.overrides and not plan.comparison.rtol.overrides
                                   and plan.comparison.atol.default == plan.comparison.rtol.default == 1e-5)
        self.marking = plan.graph is not None
        self.show_unmatched = plan.show_unmatched
        self.labels: dict[str, str] = {}  # each live backend with its framework's version (the header, the summary)
        self.shown: dict[str, str] = {}  # the name used line by line: a backend under another Python by its label

    def name(self, backend: str) -> str:
        return self.shown.get(backend, backend)

    def say(self, text: str, word: str | None = None) -> None:
        self.progress.clear()
        self.echo(paint(text, word, self.colour) if word else text)

    def started(self, runtimes: Mapping[str, BackendRuntime]) -> None:
        """The header, once the backends have loaded: each backend with its framework's version (and environment,
        for one under another Python), then where each backend under another Python ran."""
        plan = self.plan
        self.labels = labels(plan.backends, runtimes)
        self.shown = {b.name: self.labels[b.name] for b in plan.backends if b.python is not None}
        model = plan.model.path if plan.model else "saved runs"
        iterations = f"{plan.iterations} iteration(s)" if plan.iterations else "iterations: all the data"
        marked = f" | {len(plan.mark)} marked tensor(s)" if plan.mark else ""
        names = [self.labels[b.name] for b in plan.backends] + [_saved_label(b) for b in plan.saved_backends]
        if plan.slicing is not None:
            from cmpx.slicing.planning import memory_note

            marked += f" | sliced: {memory_note(plan.slicing)}"
        if self.verbosity > QUIET:
            self.say(f"cmpx {__version__} | {model} | backends: {', '.join(names)} | {iterations}{marked}")
            for backend in plan.backends:
                if backend.python is not None and backend.name in runtimes:
                    self.say(f"  {linked_note(backend, runtimes[backend.name])}")

    def waiting(self, phase: str, pending: list[str], elapsed: float, status: dict[str, str] | None = None) -> None:
        """Backends still busy in ``phase``; ``status``: what some of them said they are doing."""
        status = status or {}
        self.progress.update(phase, [f"{name} ({status[name]})" if status.get(name) else name for name in pending],
                             elapsed)

    def warning(self, message: str) -> None:
        self.say(f"warning: {message}", "warning")

    def worker_output(self, backend: str, text: str) -> None:
        """What a worker printed; shown with -vv (a crash shows its tail anyway)."""
        if self.verbosity >= VERY_VERBOSE:
            self.say(f"output of {backend}'s worker:")
            self.say(_indent(text, DETAIL_INDENT))

    def loaded(self, backend: str, seconds: float) -> None:
        if self.verbosity > QUIET:
            self.say(f"loaded {self.name(backend)} in {seconds:.3f} s")

    def backend_failed(self, error: BackendFailed) -> None:
        self.say(f"ERROR   {error}", "ERROR")
        if isinstance(error, BackendCrashed) and error.stderr_tail:
            self.say(_indent(f"last lines of its stderr:\n{error.stderr_tail}", DETAIL_INDENT))
        elif self.debug and error.__cause__ is not None:
            self.say(_indent(str(error.__cause__), DETAIL_INDENT))

    def slice_ran(self, iteration: int, number: int, count: int, seconds: float) -> None:
        if self.verbosity >= VERBOSE:
            self.say(f"[iteration {iteration}] slice {number + 1}/{count} ran and was compared in {seconds:.3f} s")

    def pair_compared(self, pair: PairResult) -> None:
        if self.verbosity == QUIET and pair.passed:
            return
        compared = [o for o in pair.outputs if not o.failed_early]
        self.say(f"[iteration {pair.iteration}] {self.name(pair.backend)} vs {self.name(pair.reference)} (reference): "
                 f"{len(compared)} output(s), {sum(o.elements for o in compared)} element(s) compared")
        for output in pair.outputs:
            if self.verbosity == QUIET and output.passed:
                continue
            intermediate = self.marking and output.output not in self.model_outputs
            details = not intermediate and (self.verbosity >= VERBOSE or not output.passed)
            for line in format_output(output, details=details):
                self.say("  " + line, "PASSED" if line.startswith("PASSED") else "FAILED")
        if pair.note:
            self.say(f"  {'FAILED  ' if not pair.outputs else ''}{pair.note}", "FAILED")
        if pair.unmatched:
            sides = sorted({side for _, side in pair.unmatched})
            self.say(f"  {len(pair.unmatched)} marked tensor(s) only in {' or '.join(sides)}, not compared"
                     + ("" if self.show_unmatched else " (--show-unmatched lists them)"))
            if self.show_unmatched:
                for tensor, side in pair.unmatched:
                    self.say(f"    {tensor} (only in {side})")
        divergence = pair.first_divergence
        if divergence is not None:
            where = ", ".join(p for p in (divergence.node, divergence.op_type) if p)
            first = divergence.result.metrics[0].summary if divergence.result.metrics else divergence.result.note
            self.say(f"  first divergence: {divergence.tensor} ({where}): {first}")
            for line in format_output(divergence.result)[1:]:
                self.say("  " + line)
        elif self.marking and not pair.passed:
            self.say("  first divergence: none found among the compared tensors (the failing ones are not "
                     "computed from compared tensors that pass)")

    @property
    def wants_values(self) -> bool:
        return self.plan.single or self.verbosity >= VERBOSE

    def outputs_described(self, backend: str, iteration: int, stats: list[Any]) -> None:
        """Each output's shape, dtype and value statistics: single-backend runs, and -v."""
        if self.verbosity > QUIET or self.plan.single:
            self.say(f"[iteration {iteration}] {backend} outputs")
            for line in stats:
                self.say(f"  {line}")

    def non_finite(self, finding: NonFinite) -> None:
        self.say(f"INVALID {finding} (--validate)", "INVALID")

    def finished(self, report: Report) -> None:
        """The summary: per pair, per backend, failures and hints; then the verdict (unless interrupted)."""
        result = report.result
        for tally in result.tallies.values():
            if tally.local_errors is not None:
                self._local_errors(tally)
        self.say("Summary (interrupted: what finished)" if report.interrupted else "Summary")
        for tally in result.tallies.values():
            self.say(f"  {self.name(tally.backend)} vs {self.name(tally.reference)}: {_pair_line(tally)}")
        if self.plan.single:
            self.say(f"  one backend, {self.name(self.plan.names[0])}: its outputs were described and checked, not "
                     "compared")
        elif not result.tallies:
            self.say("  nothing was compared", "FAILED")
        for saved in self.plan.saved_backends:
            if len(saved.source) > result.iterations and not report.interrupted:
                self.say(f"  {saved.name}: {result.iterations} of its {len(saved.source)} iteration(s) compared "
                         f"(give --iterations {len(saved.source)} or --load-inputs of the run that saved it)")
        if result.load_seconds:
            loaded = [b.name for b in self.plan.backends if b.name in result.load_seconds]  # command-line order
            width = max(14, *(len(self.labels.get(name, name)) for name in loaded))
            self.say(f"  {'backend':<{width}} load s   mean infer s")
            for name in loaded:
                seconds, timing = result.load_seconds[name], result.infer_seconds.get(name)
                mean = f"{timing.mean:13.4f}" if timing is not None and timing.mean is not None else "            -"
                self.say(f"  {self.labels.get(name, name):<{width}} {seconds:6.3f}  {mean}")
        if result.non_finite:
            self.say(f"  --validate: {len(result.non_finite)} output(s) with NaN or Inf")
        if result.stopped_early:
            self.say("  stopped at the first mismatch (--fail-fast)")
        for name, error in result.failures.items():
            self.say(f"  {name}: FAILED during {error.phase}: {error.detail}", "FAILED")
        for failure in report.output_failures:
            self.say(f"  FAILED to write {failure}", "FAILED")
        if self.default_tolerances:
            failing = {name for t in result.tallies.values() if not t.passed for name in (t.backend, t.reference)}
            for name in sorted(failing & set(self.suggestions)):
                transform, tolerance = self.suggestions[name]
                self.say(f"  hint: {name} runs the {transform} graph; tolerances around --atol {tolerance:g} "
                         f"--rtol {tolerance:g} suit it better than the fp32 defaults")
        if report.interrupted:
            return
        code = report.exit_code
        compared = sum(t.iterations for t in result.tallies.values())
        outputs = sum(t.outputs for t in result.tallies.values())
        elements = sum(t.elements for t in result.tallies.values())
        what = (f"{result.iterations} iteration(s) of {self.plan.names[0]}, not compared" if self.plan.single else
                f"{compared} comparison(s) over {result.iterations} iteration(s), {outputs} output(s), "
                f"{elements} element(s) compared")
        self.say(f"{VERDICTS[code]} | {what} | exit {int(code)}", "PASSED" if code == ExitCode.PASSED else "FAILED")


    def _local_errors(self, tally: PairTally) -> None:
        """--local-error: the nodes with the largest errors of their own, and how many fail or inherit."""
        errors = tally.local_errors
        failing = [e for e in errors if e.passed is False]
        inheriting = [e for e in errors if e.inheriting]
        unmeasured = [e for e in errors if e.passed is None]
        self.say(f"Local error of {self.name(tally.backend)} vs {self.name(tally.reference)} (each node run on the "
                 f"reference's values of its inputs, iteration 0; {tally.local_error_seconds or 0:.2f} s): "
                 f"{len(failing)} of {len(errors)} node output(s) fail on their own, {len(inheriting)} only inherit "
                 f"an error" + (f", {len(unmeasured)} not measured" if unmeasured else ""),
                 "FAILED" if failing else None)
        if self.verbosity == QUIET and not failing:
            return
        # the nodes that fail on their own first (largest first), then the largest of the others: by max abs alone,
        # nodes that pass by the relative tolerance on large values would hide those that fail
        shown = sorted(errors, key=lambda e: e.passed is not False)[:LOCAL_ERRORS_SHOWN]
        for error in shown:
            where = ", ".join(p for p in (error.node, error.op_type) if p)
            if error.passed is None:
                self.say(f"  ------  {error.tensor} ({where}): {error.note}")
                continue
            status = "PASSED" if error.passed else "FAILED"
            numbers = (f"max abs {error.max_abs:.3g}, max rel {error.max_rel:.3g}" if error.max_abs is not None
                       and error.max_rel is not None else "no abs/rel statistics (see the metrics of the run)")
            group = f" (with {error.subgraph_nodes - 1} uncompared node(s))" if error.subgraph_nodes > 1 else ""
            self.say(f"  {status}  {error.tensor} ({where}): {numbers}{group}" +
                     (" (inheriting: fails in the run)" if error.inheriting else ""), status)
        if len(errors) > LOCAL_ERRORS_SHOWN:
            self.say(f"  ... {len(errors) - LOCAL_ERRORS_SHOWN} more (all of them: --report-json, local_errors)")

    def wrote(self, what: str, path: str) -> None:
        self.say(f"wrote {what} to {path}")


def _saved_label(saved) -> str:
    """A saved run's backend, with what made it where the run says so: ``onnxrt@golden (saved by onnxrt 1.20.1)``."""
    about = getattr(saved.source, "about", None) or {}
    return f"{saved.name} (saved by {about['label']})" if about.get("label") else saved.name


def _pair_line(tally: PairTally) -> str:
    text = (f"{tally.iterations_passed}/{tally.iterations} iterations passed ({100.0 * tally.pass_rate:.0f}%), "
            f"{tally.outputs_passed}/{tally.outputs} outputs passed ({tally.elements} elements)")
    if tally.worst_abs is not None:
        text += f", worst abs {tally.worst_abs:.3g}, worst rel {tally.worst_rel:.3g}"
    return text


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
