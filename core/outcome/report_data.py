"""What one run found, as data: ``ReportData`` (``cmpx.report.Report`` adds its renderings: the JSON document,
the text report), the verdict words, and ``RunInterrupted``, which carries the report of an interrupted run. The
reporters (cmpx.reports) read this, so it imports none of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cmpx.errors import ExitCode

if TYPE_CHECKING:
    from cmpx.errors import BackendFailed
    from cmpx.plan import RunPlan
    from cmpx.options.request import RunRequest
    from cmpx.outcome.results import Divergence, NonFinite, PairResult, PairTally, RunResult
    from cmpx.outcome.runtimes import BackendRuntime


VERDICTS = {ExitCode.PASSED: "PASSED", ExitCode.MISMATCH: "FAILED (mismatch)",
            ExitCode.BACKEND_FAILED: "FAILED (backend failure)", ExitCode.USAGE: "FAILED (a report was not written)",
            ExitCode.INTERRUPTED: "INTERRUPTED"}
NOT_COMPARED = "NOT COMPARED"  # one backend alone ran cleanly: exit 0 (a golden run), but nothing was compared
STOPPED = "FAILED (stopped by its data)"  # a later feed was bad: exit 2, the iterations before it reported


@dataclass
class ReportData:
    """The outcome of one run.

    ``exit_code`` and ``passed`` are the verdict; ``tallies`` has one ``PairTally`` per compared pair (iterations
    and outputs passed, worst errors, the first divergence), ``pairs`` the per-iteration results with every
    output's metrics and statistics (all of them unless the run was very long: see cmpx.outcome.results), ``failures``
    the backends that failed, by name; ``request`` the options the run was asked for. (``Report.to_json()`` is the
    --report-json document; ``Report.text()`` the CLI's report.)
    """

    plan: RunPlan
    result: RunResult
    warnings: list[str] = field(default_factory=list)
    interrupted: bool = False
    output_failures: list[str] = field(default_factory=list)  # report files that could not be written
    request: RunRequest | None = None
    stopped: str | None = None  # why the run stopped before its data ended (a data loader failing on a later feed)

    @property
    def exit_code(self) -> ExitCode:
        """INTERRUPTED; else USAGE when the data stopped the run (``stopped``); else BACKEND_FAILED; else USAGE when
        a report file asked for could not be written; else
        MISMATCH for NaN/Inf (--validate), a failing pair, or a run that compared nothing; else PASSED."""
        result = self.result
        if self.interrupted:
            return ExitCode.INTERRUPTED
        if self.stopped is not None:  # bad data, found after some iterations: usage, what finished reported
            return ExitCode.USAGE
        if result.failures:
            return ExitCode.BACKEND_FAILED
        if self.output_failures:
            return ExitCode.USAGE
        if result.non_finite:
            return ExitCode.MISMATCH
        if self.plan.single:  # one backend: nothing to compare, nothing failed
            return ExitCode.PASSED
        if not result.tallies or any(not tally.passed for tally in result.tallies.values()):
            return ExitCode.MISMATCH  # a mismatch, or nothing compared at all: a pass must mean something
        return ExitCode.PASSED

    @property
    def passed(self) -> bool:
        """Exit 0: every pair passed, or one backend alone ran cleanly (then ``compared`` is False)."""
        return self.exit_code == ExitCode.PASSED

    @property
    def compared(self) -> bool:
        """Whether the run compared anything: False for one backend alone (described, not compared)."""
        return not self.plan.single

    @property
    def verdict(self) -> str:
        """The verdict's words, the one place they are decided: ``PASSED``, ``NOT COMPARED`` (one backend alone: its
        outputs described, exit 0 as a golden run), ``FAILED (mismatch)``, ``FAILED (validation: NaN/Inf in an
        output)`` (--validate), both joined when both hold, ``FAILED (backend failure)``, ``FAILED (a report was not
        written)``, ``FAILED (stopped by its data)`` (``stopped``), ``INTERRUPTED``."""
        code = self.exit_code
        if self.stopped is not None and not self.interrupted:
            return STOPPED
        if code == ExitCode.PASSED and not self.compared:
            return NOT_COMPARED
        if code != ExitCode.MISMATCH:
            return VERDICTS[code]
        result = self.result
        mismatch = not self.plan.single and (not result.tallies or any(not t.passed for t in result.tallies.values()))
        kinds = (["mismatch"] if mismatch else []) + (["validation: NaN/Inf in an output"] if result.non_finite else [])
        return f"FAILED ({'; '.join(kinds)})"

    @property
    def backends(self) -> list[str]:
        """Every backend of the run, live then saved, in the order that decides the default pairs."""
        return self.plan.names

    @property
    def runtimes(self) -> dict[str, BackendRuntime]:
        """Where each live backend ran, by name: ``framework_version``, ``python``, ``python_version``, ``place`` (its
        environment), ``separate`` (another Python, as asked with ``NAME@PYTHON``), ``linked`` (it ran this cmpx's
        worker code, linked in); a backend that failed to start has none."""
        return self.result.runtimes

    def label(self, backend: str) -> str:
        """How the reports name a live backend: ``onnxrt 1.32.0``, ``onnxrt 1.20.1 (/opt/ort-1.20)``."""
        from cmpx.outcome.runtimes import labels

        return labels(self.plan.backends, self.result.runtimes).get(backend, backend)

    @property
    def tallies(self) -> list[PairTally]:
        return list(self.result.tallies.values())

    @property
    def pairs(self) -> list[PairResult]:
        return self.result.pairs

    @property
    def failures(self) -> dict[str, BackendFailed]:
        return self.result.failures

    @property
    def mismatched(self) -> list[PairTally]:
        """The pairs that had outputs to compare and failed (a pair that compared nothing is not among them)."""
        return [tally for tally in self.result.tallies.values() if not tally.passed and tally.outputs]

    def failing_outputs(self, backend: str, reference: str) -> list[str]:
        """The outputs of ``backend`` compared with ``reference`` that failed in a retained iteration, in order."""
        names: dict[str, None] = {}
        for pair in self.result.pairs:
            if (pair.backend, pair.reference) == (backend, reference):
                names.update(dict.fromkeys(o.output for o in pair.outputs if not o.passed))
        return list(names)

    @property
    def non_finite(self) -> list[NonFinite]:
        return self.result.non_finite

    @property
    def iterations(self) -> int:
        return self.result.iterations

    @property
    def first_divergence(self) -> Divergence | None:
        """Where the error enters (marked runs): the first pair's first divergence, if any pair has one."""
        return next((t.first_divergence[1] for t in self.result.tallies.values() if t.first_divergence), None)

    def pair(self, backend: str, reference: str | None = None) -> PairTally:
        """The tally of ``backend`` compared with ``reference`` (or with whichever backend it was compared with)."""
        for tally in self.result.tallies.values():
            if tally.backend == backend and reference in (None, tally.reference):
                return tally
        raise KeyError(f"no pair {backend} vs {reference or '?'} in this report; pairs: "
                       f"{', '.join(f'{t.backend} vs {t.reference}' for t in self.result.tallies.values())}")


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP during a run, raised after cleanup; ``report`` holds what finished."""

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, report: ReportData | None = None):
        super().__init__()
        self.report = report
