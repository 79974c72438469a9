"""What a run tells its reporters as it goes (the text report on the terminal, streamed machine reports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cmpx.comparison.values import ValueStats
    from cmpx.errors import BackendFailed
    from cmpx.outcome.runtimes import BackendRuntime
    from cmpx.outcome.report_data import ReportData
    from cmpx.outcome.results import NonFinite, PairResult


class Reporter(Protocol):
    """Receives a run's events in order: ``started`` (once the backends have loaded, with what their workers said
    about where they run: ``runtimes``), then any of the others, then ``finished`` once (also after an
    interruption), then ``wrote`` for each report file written; ``waiting`` and ``backend_failed`` (a backend that
    failed to start or load: said at once) may also come before ``started``. A reporter is made for one run, with
    its plan."""

    def started(self, runtimes: Mapping[str, BackendRuntime]) -> None: ...
    def warning(self, message: str) -> None: ...
    def waiting(self, phase: str, pending: list[str], elapsed: float, status: dict[str, str]) -> None: ...
    def loaded(self, backend: str, seconds: float) -> None: ...
    def backend_failed(self, error: BackendFailed) -> None: ...
    def pair_compared(self, pair: PairResult) -> None: ...
    def slice_ran(self, iteration: int, number: int, count: int, seconds: float) -> None: ...
    def outputs_described(self, backend: str, iteration: int, stats: list[ValueStats]) -> None: ...
    def non_finite(self, finding: NonFinite) -> None: ...
    def worker_output(self, backend: str, text: str) -> None: ...
    def finished(self, report: ReportData) -> None: ...
    def wrote(self, what: str, path: str) -> None: ...


class SilentReporter:
    """Reports nothing: the Python API's default (the returned Report holds everything)."""

    def started(self, runtimes: Mapping[str, BackendRuntime]) -> None:
        pass

    def warning(self, message: str) -> None:
        pass

    def waiting(self, phase: str, pending: list[str], elapsed: float, status: dict[str, str]) -> None:
        pass

    def loaded(self, backend: str, seconds: float) -> None:
        pass

    def backend_failed(self, error: BackendFailed) -> None:
        pass

    def pair_compared(self, pair: PairResult) -> None:
        pass

    def slice_ran(self, iteration: int, number: int, count: int, seconds: float) -> None:
        """Slice ``number`` (from 0) of ``count`` of a sliced run ran and was compared, in ``seconds``."""

    def outputs_described(self, backend: str, iteration: int, stats: list[ValueStats]) -> None:
        pass

    def non_finite(self, finding: NonFinite) -> None:
        pass

    def worker_output(self, backend: str, text: str) -> None:
        pass

    def finished(self, report: ReportData) -> None:
        pass

    def wrote(self, what: str, path: str) -> None:
        pass


class Reporters:
    """Several reporters, each told every event in turn."""

    def __init__(self, *reporters: Reporter):
        self.reporters = reporters

    def started(self, runtimes: Mapping[str, BackendRuntime]) -> None:
        for reporter in self.reporters:
            reporter.started(runtimes)

    def warning(self, message: str) -> None:
        for reporter in self.reporters:
            reporter.warning(message)

    def waiting(self, phase: str, pending: list[str], elapsed: float, status: dict[str, str]) -> None:
        for reporter in self.reporters:
            reporter.waiting(phase, pending, elapsed, status)

    def loaded(self, backend: str, seconds: float) -> None:
        for reporter in self.reporters:
            reporter.loaded(backend, seconds)

    def backend_failed(self, error: BackendFailed) -> None:
        for reporter in self.reporters:
            reporter.backend_failed(error)

    def pair_compared(self, pair: PairResult) -> None:
        for reporter in self.reporters:
            reporter.pair_compared(pair)

    def slice_ran(self, iteration: int, number: int, count: int, seconds: float) -> None:
        for reporter in self.reporters:  # a reporter written before sliced runs may lack it
            method = getattr(reporter, "slice_ran", None)
            if method is not None:
                method(iteration, number, count, seconds)

    def outputs_described(self, backend: str, iteration: int, stats: list[ValueStats]) -> None:
        for reporter in self.reporters:
            reporter.outputs_described(backend, iteration, stats)

    @property
    def wants_values(self) -> bool:
        """Whether any reporter shows each output's value statistics (computed only then)."""
        return any(getattr(reporter, "wants_values", False) for reporter in self.reporters)

    def non_finite(self, finding: NonFinite) -> None:
        for reporter in self.reporters:
            reporter.non_finite(finding)

    def worker_output(self, backend: str, text: str) -> None:
        for reporter in self.reporters:
            reporter.worker_output(backend, text)

    def finished(self, report: ReportData) -> None:
        for reporter in self.reporters:
            reporter.finished(report)

    def wrote(self, what: str, path: str) -> None:
        for reporter in self.reporters:
            reporter.wrote(what, path)
