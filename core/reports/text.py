"""Plain-text report: results as they arrive, then a summary table and the verdict.

Verbosity: -q shows failures, errors and the summary; the default adds one line per compared output (with
statistics, histogram and worst elements for failing ones); -v adds the statistics of passing outputs too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cmpx._version import __version__
from cmpx.errors import BackendCrashed, BackendFailed, ExitCode
from cmpx.printable import printable, printable_lines
from cmpx.reports.advice import hinted, local_error_numbers, lowered, measured_tolerance, pass_options, \
    rank_local_errors, round_up, tolerance_hint
from cmpx.reports import oracle_text
from cmpx.reports.terminal import Progress, paint
from cmpx.reports.text_lines import DETAIL_INDENT, blind_lines, format_output, pair_line, reminder, saved_label, \
    wrapped
from cmpx.outcome.results import LocalError, NonFinite, PairResult, PairTally
from cmpx.outcome.runtimes import labels, linked_note

if TYPE_CHECKING:
    from cmpx.plan import RunPlan
    from cmpx.outcome.report_data import ReportData
    from cmpx.outcome.runtimes import BackendRuntime

HALF_SPACING = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}  # the relative gap between neighbouring values
QUIET, NORMAL, VERBOSE, VERY_VERBOSE = 0, 1, 2, 3


class TextReporter:
    """The human-readable report of one run, written line by line through ``echo`` as the run goes."""

    def __init__(self, plan: RunPlan, echo: Callable[[str], None], *, debug: bool = False, verbosity: int = NORMAL,
                 colour: bool = False, progress: Progress | None = None, width: int | None = None):
        self.plan = plan
        self.width = width  # a terminal's columns: longer lines wrap at word boundaries (logs and pipes: never)
        self.echo = echo
        self.debug = debug
        self.verbosity = verbosity
        self.colour = colour
        self.progress = progress or Progress()
        self.model_outputs = plan.required_outputs  # with marking, other tensors get one line each
        self.transforms = {b.name: b.transform for b in plan.backends if b.transform}
        self.lowered = lowered(self.transforms)
        self.needed: dict[tuple[str, str], tuple[float, float]] = {}  # per pair: the tolerances its failures need
        declared = plan.model.outputs if plan.model else ()
        self.narrow = {spec.name: spec.dtype for spec in declared if spec.dtype in HALF_SPACING}
        self.narrow_failed: dict[str, float] = {}  # a 16-bit float model output failing at an rtol below its spacing
        self.marking = plan.graph is not None
        self.show_unmatched = plan.show_unmatched
        self.labels: dict[str, str] = {}  # each live backend with its framework's version (the header, the summary)
        self.shown: dict[str, str] = {}  # the name used line by line: a backend under another Python by its label
        # the --input-shapes words of the dynamic dimensions' sizes cmpx chose, said once if a backend fails on them
        self.chosen = list(dict.fromkeys(word for spec in plan.inputs for word in spec.chosen))
        # what is said before the header (a backend failing to start or load while others load): held, and said
        # right after it, so that the header is the report's first line; the progress line names the failed
        self.held: list[tuple[str, str | None]] | None = []
        self.failed_early: list[str] = []

    def name(self, backend: str) -> str:
        return self.shown.get(backend, backend)

    def say(self, text: str, word: str | None = None) -> None:
        """One line; what it holds of names from files is escaped (cmpx.printable), so it stays one line."""
        if self.held is not None:
            self.held.append((text, word))
            return
        self.progress.clear()
        text = wrapped(printable(text), self.width)
        self.echo(paint(text, word, self.colour) if word else text)

    def release(self) -> None:
        """Say what was held back until the header (once)."""
        held, self.held = self.held or [], None
        for text, word in held:
            self.say(text, word)

    def say_block(self, text: str) -> None:
        """A block a framework wrote (stderr, a traceback), indented, each of its lines escaped."""
        for line in printable_lines(text.rstrip("\n")):
            self.say(DETAIL_INDENT + line)

    def started(self, runtimes: Mapping[str, BackendRuntime]) -> None:
        """The header: each backend with its framework's version (and environment), then where each ran."""
        plan = self.plan
        self.progress.begin("iteration")  # the loads are done: the iterations' estimate counts from here
        self.labels = labels(plan.backends, runtimes)
        self.shown = {b.name: self.labels[b.name] for b in plan.backends if b.python is not None}
        model = plan.model.path if plan.model else "saved runs"
        iterations = f"{plan.iterations} iteration(s)" if plan.iterations else "iterations: all the data"
        marked = f" | {len(plan.mark)} marked tensor(s)" if plan.mark else ""
        names = [self.labels[b.name] for b in plan.backends] + [saved_label(b) for b in plan.saved_backends]
        if plan.slicing is not None:
            from cmpx.slicing.planning import memory_note

            marked += f" | sliced: {memory_note(plan.slicing)}"
        held, self.held = self.held, None
        if self.verbosity > QUIET:
            self.say(f"cmpx {__version__} | {model} | backends: {', '.join(names)} | {iterations}{marked}")
        self.held = held
        self.release()
        if self.verbosity > QUIET:
            for backend in plan.backends:
                if backend.python is not None and backend.name in runtimes:
                    self.say(f"  {linked_note(backend, runtimes[backend.name])}")
        if self.verbosity >= VERBOSE:
            for value_range in plan.data_ranges:
                self.say(f"  data: {value_range}")

    def waiting(self, phase: str, pending: list[str], elapsed: float, status: dict[str, str] | None = None) -> None:
        """Backends still busy in ``phase``; ``status``: what some of them said they are doing."""
        status = status or {}
        failed = f"({', '.join(self.failed_early)} FAILED: said after the header)" if self.failed_early else ""
        phase, step = self._step(phase)
        self.progress.update(phase, [f"{name} ({status[name]})" if status.get(name) else name for name in pending],
                             elapsed, failed, step)

    def _step(self, phase: str) -> tuple[str, tuple[str, int, int | None] | None]:
        """``iteration 4`` of 10 shows as ``iteration 4 (5/10)``; a phase that counts its steps (``slice 2/5``,
        ``node 3/40``) is one of them: either way the progress line adds the time spent and an estimate of the rest."""
        found = re.fullmatch(r"iteration (\d+)", phase)
        if found:
            number, total = int(found[1]), self.plan.iterations
            return (f"{phase} ({number + 1}/{total})" if total else phase), ("iteration", number, total)
        counted = re.search(r"(\d+)/(\d+)", phase)
        if counted:
            return phase, (phase[:counted.start()], int(counted[1]) - 1, int(counted[2]))
        return phase, None

    def warning(self, message: str) -> None:
        self.say(f"warning: {message}", "warning")

    def worker_output(self, backend: str, text: str) -> None:
        """What a worker printed; shown with -vv (a crash shows its tail anyway)."""
        if self.verbosity >= VERY_VERBOSE:
            self.say(f"output of {backend}'s worker:")
            self.say_block(text)

    def loaded(self, backend: str, seconds: float) -> None:
        if self.verbosity > QUIET:
            self.say(f"loaded {self.name(backend)} in {seconds:.3f} s")

    def backend_failed(self, error: BackendFailed) -> None:
        if self.held is not None:
            self.failed_early.append(self.name(error.backend))
        head, _, rest = str(error).partition("\n")
        self.say(f"ERROR   {head}", "ERROR")
        if rest.strip():  # a framework's message of several lines: the rest below it, as it wrote it
            self.say_block(rest)
        transform = self.transforms.get(error.backend)
        if transform and error.phase == "load":  # the model it refused is cmpx's, in a scratch file gone after the run
            self.say(f"  hint: the model {self.name(error.backend)} loads is cmpx's {transform} transform of the "
                     "model, in a scratch file removed after the run: --save-transformed DIR keeps it to look at"
                     + (", and --keep-fp32 NODE_OR_OP keeps in float32 a node the converter got wrong"
                        if transform in ("fp16", "bf16") else ""))
        if self.chosen and error.phase in ("load", "infer"):
            self.say(f"  hint: cmpx chose the sizes of the model's dynamic dimensions ({' '.join(self.chosen)}); if "
                     f"the model needs others, give them: --input-shapes {' '.join(self.chosen)} with your sizes")
            self.chosen = []  # once
        if isinstance(error, BackendCrashed) and error.stderr_tail:
            self.say_block(f"last lines of its stderr:\n{error.stderr_tail}")
        elif self.debug and error.__cause__ is not None:
            self.say_block(str(error.__cause__))

    def slice_ran(self, iteration: int, number: int, count: int, seconds: float) -> None:
        if self.verbosity >= VERBOSE:
            self.say(f"[iteration {iteration}] slice {number + 1}/{count} ran and was compared in {seconds:.3f} s")

    def pair_compared(self, pair: PairResult) -> None:
        self._measure(pair)
        self._note_narrow(pair)
        if self.verbosity == QUIET and pair.passed:
            return
        compared = [o for o in pair.outputs if not o.failed_early]
        self.say(f"[iteration {pair.iteration}] {self.name(pair.backend)} vs {self.name(pair.reference)} (reference): "
                 f"{len(compared)} output(s), {sum(o.elements for o in compared)} element(s) compared")
        tallied = 0  # --mark-all: passing intermediate tensors are counted, not listed (-v lists them)
        for output in pair.outputs:
            if self.verbosity == QUIET and output.passed:
                continue
            intermediate = self.marking and output.output not in self.model_outputs
            if intermediate and output.passed and self.plan.mark_all and self.verbosity < VERBOSE:
                tallied += 1
                continue
            details = not intermediate and (self.verbosity >= VERBOSE or not output.passed)
            for line in format_output(output, details=details):
                self.say("  " + line, "PASSED" if line.startswith("PASSED") else "FAILED")
        if tallied:
            self.say(f"  PASSED  {tallied} more marked tensor(s) (one line each with -v)", "PASSED")
        for name, why in pair.not_comparable:
            self.say(f"  NOT COMPARED  {name}: {why}")
        for line in oracle_text.pair_lines(pair, self.model_outputs):
            self.say("  " + line)
        if pair.note:
            self.say(f"  {'FAILED  ' if not pair.outputs else ''}{pair.note}", "FAILED")
        if pair.unmatched:
            self._unmatched(pair)
        divergence = pair.first_divergence
        if divergence is not None:
            where = ", ".join(p for p in (divergence.node, divergence.op_type) if p)
            first = divergence.result.metrics[0].summary if divergence.result.metrics else divergence.result.note
            self.say(f"  first divergence: {divergence.tensor} ({where}): {first}")
            for line in format_output(divergence.result)[1:]:
                self.say("  " + line)
        elif (self.marking and any(o.output not in self.model_outputs for o in pair.outputs)
              and any(not o.passed and not o.missing_in for o in pair.outputs)):  # a value failed, not a name
            self.say("  first divergence: none found among the compared tensors (the failing ones are not "
                     "computed from compared tensors that pass)")

    def _note_narrow(self, pair: PairResult) -> None:
        """A model output itself float16 or bfloat16 failing at an rtol finer than its type's spacing (noted)."""
        for output in pair.outputs:
            if output.output in self.narrow and not output.passed:
                rtols = [m.data["rtol"] for m in output.metrics if isinstance(m.data.get("rtol"), float)]
                spacing = HALF_SPACING[self.narrow[output.output]]
                if rtols and min(rtols) < spacing:
                    self.narrow_failed[output.output] = min(rtols)

    def _measure(self, pair: PairResult) -> None:
        """Keep the largest minimum tolerances of the failing model outputs of a pair where exactly one side runs a
        lower-precision graph: the summary's hint is what was measured, not a guess."""
        if not hinted(pair.backend in self.lowered, pair.reference in self.lowered):
            return
        key = (pair.backend, pair.reference)
        atol, rtol = measured_tolerance(self.needed.get(key, (0.0, 0.0)), (
            (metric.passed, metric.data) for output in pair.outputs  # an intermediate tensor's errors say where
            if not self.model_outputs or output.output in self.model_outputs for metric in output.metrics))
        if atol or rtol:
            self.needed[key] = (atol, rtol)

    def _unmatched(self, pair: PairResult) -> None:
        """Tensors only one side produced: those a transformed graph no longer computes, then the others."""
        what = "marked tensor(s)" if self.plan.mark else "output(s)"
        groups: dict[str, list[tuple[str, str]]] = {}
        for tensor, side in pair.unmatched:
            lacking = pair.reference if side == pair.backend else pair.backend
            reason = pair.lacking.get(lacking)
            groups.setdefault(f"{reason} of {self.name(lacking)}" if reason else f"only in {self.name(side)}",
                              []).append((tensor, side))
        hint = "" if self.show_unmatched else " (--show-unmatched lists them)"
        for where, tensors in groups.items():
            self.say(f"  {len(tensors)} {what} {where}, not compared{hint}")
            if self.show_unmatched:
                for tensor, side in tensors:
                    self.say(f"    {tensor} (only in {self.name(side)})")

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

    def finished(self, report: ReportData) -> None:
        """The summary: per pair, per backend, failures and hints; then the verdict (unless interrupted)."""
        self.release()  # a run interrupted before its header: what it held is still said
        result = report.result
        for tally in result.tallies.values():
            if tally.local_errors is not None:
                self._local_errors(tally, tally.local_errors)
        self.say("Summary (interrupted: what finished)" if report.interrupted else
                 "Summary (stopped: what finished)" if report.stopped is not None else "Summary")
        if report.stopped is not None:
            self.say(f"  stopped: {report.stopped}", "FAILED")
        for tally in result.tallies.values():
            self.say(f"  {self.name(tally.backend)} vs {self.name(tally.reference)}: {pair_line(tally)}")
            for line in blind_lines(tally):
                self.say(f"  warning: {line}", "FAILED")
        for line in oracle_text.summary_lines(result.oracle, self.model_outputs,
                                              {tally.reference for tally in result.tallies.values()}):
            self.say("  " + line)
        if self.plan.single and not result.failures:
            checked = " and checked for NaN and Inf (--validate)" if self.plan.validate else ""
            self.say(f"  one backend, {self.name(self.plan.names[0])}: its outputs were described{checked}, not "
                     "compared")
            if not self.plan.validate and any(v.nan_count or v.inf_count for _, _, stats in result.values
                                              for v in stats):
                self.say("  hint: outputs hold NaN or Inf (above); --validate fails the run on them")
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
        for name, error in result.failures.items():  # shown in full when it happened: a reminder here
            self.say(f"  {name}: FAILED during {error.phase}: {reminder(error.detail)}", "FAILED")
        for failure in report.output_failures:
            self.say(f"  FAILED to write {failure}", "FAILED")
        for (backend, reference), (atol, rtol) in self.needed.items():
            transformed = backend if backend in self.lowered else reference
            options = pass_options(atol, rtol)
            if options:
                self.say("  hint: " + tolerance_hint(self.name(transformed), self.transforms[transformed],
                                                     self.name(backend), self.name(reference), options))
        for name, rtol in list(self.narrow_failed.items())[:5]:
            dtype = self.narrow[name]
            self.say(f"  hint: {name} is {dtype} in the model itself, whose neighbouring values are "
                     f"{HALF_SPACING[dtype]:.1e} apart relative to their size: at rtol {rtol:g} rounding alone "
                     f"fails; compare it at --rtol {round_up(2 * HALF_SPACING[dtype]):g} or more (a rounding on "
                     f"each side; --rtol {name}:{round_up(2 * HALF_SPACING[dtype]):g} for it alone)")
        for line in self._transform_notes(result):
            self.say(f"  hint: {line}")
        if report.interrupted:
            return
        code = report.exit_code
        compared = result.compared
        outputs = sum(t.outputs_compared for t in result.tallies.values())
        elements = sum(t.elements for t in result.tallies.values())
        single = self.plan.single and not result.failures
        what = (f"{result.iterations} iteration(s) of {self.plan.names[0]} described" if single else
                f"{compared} comparison(s) over {result.iterations} iteration(s), {outputs} output(s), "
                f"{elements} element(s) compared")
        word = "FAILED" if code != ExitCode.PASSED else "PASSED" if report.compared else "NOT COMPARED"
        self.say(f"{report.verdict} | {what} | exit {int(code)}", word)

    def _transform_notes(self, result: Any) -> list[str]:
        """What a passing pair with a transformed backend does not prove, as its backend registered it (once per
        backend): a pass of onnxrt:fp16 on the CPU is not one of true float16 arithmetic."""
        plans = {b.name: b for b in self.plan.backends}
        said: list[str] = []
        for tally in result.tallies.values():
            for name in (tally.backend, tally.reference):
                plan = plans.get(name)
                note = dict(plan.spec.transform_notes).get(plan.transform or "") if plan else None
                if note and tally.passed and not any(line.startswith(self.name(name) + " ") for line in said):
                    said.append(f"{self.name(name)} passes, but {note}")
        return said

    def _local_errors(self, tally: PairTally, errors: list[LocalError]) -> None:
        """--local-error: the nodes with the largest errors of their own, and how many fail or inherit."""
        ranking = rank_local_errors(errors)
        self.say(f"Local error of {self.name(tally.backend)} vs {self.name(tally.reference)} (each node run on the "
                 f"reference's values of its inputs, iteration 0; {tally.local_error_seconds or 0:.2f} s): "
                 + ranking.headline(), "FAILED" if ranking.failing else None)
        if self.verbosity == QUIET and not ranking.failing:
            return
        for error in ranking.shown:
            where = ", ".join(p for p in (error.node, error.op_type) if p)
            if error.passed is None:
                self.say(f"  ------  {error.tensor} ({where}): {error.note}")
                continue
            status = "PASSED" if error.passed else "FAILED"
            group = f" (with {error.subgraph_nodes - 1} uncompared node(s))" if error.subgraph_nodes > 1 else ""
            self.say(f"  {status}  {error.tensor} ({where}): {local_error_numbers(error)}{group}" +
                     (" (inheriting: fails in the run)" if error.inheriting else ""), status)
        if ranking.more:
            self.say(f"  ... {ranking.more} more (all of them: --report-json, local_errors)")

    def wrote(self, what: str, path: str) -> None:
        self.say(f"wrote {what} to {path}")
