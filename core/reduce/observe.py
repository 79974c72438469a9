"""Run one model (the whole one, or a candidate) as ``cmpx run`` would, in fresh workers, and say how it failed:
a mismatch, a backend failure (by backend, phase and kind: a crash is one more observation, not the end), both,
or neither."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from cmpx.errors import CmpxError, telling_line
from cmpx.outcome.report_data import RunInterrupted

if TYPE_CHECKING:
    from cmpx.lifecycle.preflight import Preflight
    from cmpx.plugin.manager import PluginSet, PluginSettings
    from cmpx.report import Report
    from cmpx.reports.terminal import Progress
    from cmpx.options.request import RunRequest
    from cmpx.transport.pool import WorkerPool

FAIL_ON = ("mismatch", "crash", "any")
FAILING = {"mismatch": "a mismatch", "crash": "a backend failing as on the full model", "any": "either"}
MESSAGE_LIMIT = 300  # characters of a backend failure's message under a candidate's line


@dataclass
class Observation:
    """What one run showed, read from its Report (``of``). ``failures``: backend -> (phase, kind), the kind as the
    failure says it (``BackendFailed.kind``: error, protocol, crash, timeout)."""

    mismatch: bool = False
    failures: dict[str, tuple[str, str]] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)  # what failed, for the progress line
    messages: list[str] = field(default_factory=list)  # each backend failure in full (its first line)
    error: str | None = None  # the run could not be made (not an observation of the backends)
    seconds: float = 0.0
    report: Report | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.error is None and not self.mismatch and not self.failures

    def shows(self, fail_on: str, expected: Mapping[str, tuple[str, str]]) -> bool:
        """Whether this run fails the way ``fail_on`` asks. A crash counts when a backend fails in the same phase
        and the same way as on the whole model (``expected``), or, if none failed there, when any backend fails
        after it started."""
        crashed = any(expected.get(name) == how for name, how in self.failures.items()) if expected else \
            any(phase != "start" for phase, _ in self.failures.values())
        return {"mismatch": self.mismatch, "crash": crashed, "any": self.mismatch or crashed}[fail_on]

    def verdict(self) -> str:
        if self.error is not None:
            return f"could not run ({self.error})"
        if self.passed:
            return "passed"
        kinds = ([] if not self.mismatch else ["mismatch"]) + sorted({kind for _, kind in self.failures.values()})
        return f"FAILED ({', '.join(kinds)}: {'; '.join(self.details)})"

    def outcome(self, fail_on: str, expected: Mapping[str, tuple[str, str]]) -> str:
        """The verdict as failing is meant (``shows``): FAILED only where this run fails that way; a backend failure
        or a mismatch that does not count is said as what it is (a load error where failing means a mismatch)."""
        if self.error is not None or self.passed or self.shows(fail_on, expected):
            return self.verdict()
        return f"does not count (failing means {FAILING[fail_on]}): {self.showed()}"

    def showed(self) -> str:
        """What failed, in words: each backend failure, then the mismatches."""
        failed, compared = self.details[:len(self.failures)], self.details[len(self.failures):]
        return "; ".join(failed + ([f"mismatch ({'; '.join(compared)})"] if compared else []))

    @classmethod
    def of(cls, report: Report, seconds: float, warnings: list[str]) -> Observation:
        """What ``report`` shows: its backend failures (each one's phase and kind, as the failure says), and a
        mismatch where a pair that had outputs to compare failed, or --validate found NaN or Inf. A candidate that
        compared nothing (a prefix of Identity nodes on weights, which takes no graph input) shows no mismatch."""
        observation = cls(seconds=seconds, report=report, warnings=warnings)
        for name, error in report.failures.items():
            observation.failures[name] = (error.phase, error.kind)
            observation.details.append(f"{name} {error.how} during {error.phase}")
            observation.messages.append(telling_line(str(error)) or error.how)
        observation.mismatch = bool(report.mismatched or report.non_finite)
        for tally in report.mismatched:
            outputs = report.failing_outputs(tally.backend, tally.reference)
            shown = ", ".join(outputs[:3]) + (f" and {len(outputs) - 3} more" if len(outputs) > 3 else "")
            observation.details.append(f"{tally.backend} vs {tally.reference}: {shown or 'nothing compared'}")
        if report.non_finite:
            observation.details.append(f"NaN or Inf in {report.non_finite[0].backend} {report.non_finite[0].output}")
        return observation

    def uncounted_messages(self, fail_on: str, expected: Mapping[str, tuple[str, str]]) -> list[str]:
        """Each backend failure's message (its first line, cut to MESSAGE_LIMIT characters) where they do not count
        as failing: why the backend failed on this candidate but not as it did on the full model."""
        if self.error is not None or self.shows(fail_on, expected):
            return []
        keep = MESSAGE_LIMIT // 3
        return [m if len(m) <= MESSAGE_LIMIT else f"{m[:MESSAGE_LIMIT - keep - 5]} ... {m[-keep:]}"
                for m in self.messages]


class Observer:
    """Runs one model after another, each in a Session of its own with fresh workers, so no worker ever serves two
    runs. The workers are forked from one fork server kept for all the runs (cmpx.transport.worker.forkserver),
    which imports numpy and each forkable backend's framework once instead of once per worker and run; where it
    cannot be used, the workers of the next run are spawned while the current one runs (a fresh interpreter takes
    a while to start; it is told its backend only when its run begins). ``close`` stops the spares and the
    server."""

    def __init__(self, plugins: PluginSet, settings: PluginSettings, spares: int, progress: Progress | None = None):
        from cmpx.transport.forking import ForkServer
        from cmpx.transport.pool import worker_environment

        self.progress = progress  # a terminal's progress line, for the runs whose report is not shown
        self.plugins = plugins
        self.settings = settings
        self.spares = spares
        self._next: WorkerPool | None = None
        try:
            self.server: ForkServer | None = ForkServer(worker_environment())
        except OSError:
            self.server = None

    def __call__(self, request: RunRequest, echo: Callable[[str], None] | None = None) -> Observation:
        from cmpx.transport.pool import WorkerPool

        pool, self._next = self._next, None
        try:
            if self.server is not None and not self.server.broken:
                pool = pool or WorkerPool(server=self.server)
            else:
                self._next = WorkerPool(self.spares)
            return observe(request, self.plugins, self.settings, echo, pool, None if echo else self.progress)
        finally:
            if pool is not None:
                pool.release()

    def label(self, what: str, started: float) -> None:
        """The progress line's prefix for the next runs: ``candidate 7 (end), 40/60 nodes, 1 min 02 s | ``; a
        terminal shows what each run is waiting for after it."""
        if self.progress is not None:
            from cmpx.reports.terminal import clock

            self.progress.prefix = f"{what}, {clock(time.monotonic() - started)} | "

    def close(self) -> None:
        pool, self._next = self._next, None
        if pool is not None:
            pool.release()
        server, self.server = self.server, None
        if server is not None:
            server.close()


def observe(request: RunRequest, plugins: PluginSet, settings: PluginSettings,
            echo: Callable[[str], None] | None = None, pool: WorkerPool | None = None,
            progress: Progress | None = None) -> Observation:
    """Run ``request`` in a Session of its own (fresh workers, from ``pool`` if given) and say what its report
    shows. ``echo`` receives the run's text report (``cmpx reduce -v``); else ``progress`` (a terminal's progress
    line) shows what the run waits for."""
    from cmpx.lifecycle.session import Session

    started = time.monotonic()
    warnings: list[str] = []
    reporter_for = None
    if echo is not None or progress is not None:
        from cmpx.reports.text import TextReporter

        def reporter_for(plan):
            return TextReporter(plan, echo or (lambda _: None), progress=progress)
    try:
        with Session(request, plugins, settings, reporter_for=reporter_for, warn=warnings.append,
                     pool=pool) as session:
            report = session.run()
    except RunInterrupted:
        raise
    except CmpxError as exc:
        return Observation(error=str(exc), seconds=time.monotonic() - started, warnings=warnings)
    return Observation.of(report, time.monotonic() - started, warnings)


def for_backends(request: RunRequest, checked: Preflight, names: set[str]) -> RunRequest:
    """The request for a run of only the backends ``names``: the options of the others left out (a run refuses
    options of backends it does not use). Its ``backends`` are left to the caller."""
    specs = {b.name: b.spec for b in checked.backends}
    kept = {specs[n].param(o) for n in names for o in specs[n].options}
    dropped = {spec.param(o) for n, spec in specs.items() if n not in names for o in spec.options} - kept
    request = replace(request, backend_options={k: v for k, v in request.backend_options.items() if k not in dropped})
    if not any(b.transform for b in checked.backends if b.name in names):  # node lists of the transforms it lacks
        request = replace(request, keep_fp32=(), no_quantize=())
    return request
