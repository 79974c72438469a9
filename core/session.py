"""``Session``: the one owner of a run's lifecycle. Both ``cmpx run`` and ``cmpx.run()`` go through it.

    preflight   check every option that needs neither the model nor a file            (cmpx.preflight)
    start       take a worker per backend from the pool; each imports its framework   (cmpx.transport.pool)
    describe    a model in a backend's own format is described by that backend        (cmpx.transport.describing)
    plan        read the model and saved runs, make data and transformed models       (cmpx.planner)
    execute     load, infer, compare iteration by iteration                           (cmpx.execution)
    report      the Report, the reporter's summary, the report files                  (cmpx.report, cmpx.reports)
    release     workers, scratch directories; segments are swept by the execution

The session holds what it started from ``start`` on, and releases all of it when it ends, however it ends.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from cmpx.errors import RunInterrupted
from cmpx.planner import build_plan
from cmpx.preflight import preflight
from cmpx.report import Report
from cmpx.reports.reporter import Reporter, Reporters, SilentReporter
from cmpx.transport.pool import WorkerPool, release_workers

if TYPE_CHECKING:
    from cmpx.plan import RunPlan
    from cmpx.plugins import PluginSet, PluginSettings
    from cmpx.reports.figures import FigureCollector
    from cmpx.request import RunRequest
    from cmpx.transport.supervisor import Worker

ReporterFactory = Callable[["RunPlan"], Reporter]


class Session:
    """One run of ``request``. Use it as a context manager and call ``run()`` once::

        with Session(request, plugins, settings, reporter_for=make_reporter) as session:
            report = session.run()

    ``reporter_for(plan)`` makes the reporter once the plan exists; ``warn(message)`` receives the warnings found
    before that (while planning); ``pool`` supplies the workers (spares started early by the ``cmpx`` script).
    """

    def __init__(self, request: RunRequest, plugins: PluginSet, settings: PluginSettings, *,
                 reporter_for: ReporterFactory | None = None, warn: Callable[[str], None] | None = None,
                 pool: WorkerPool | None = None):
        self.request = request
        self.plugins = plugins
        self.settings = settings
        self.reporter_for = reporter_for or (lambda plan: SilentReporter())
        self.warn = warn or (lambda message: None)
        self.pool = pool
        self.warnings: list[str] = []
        self.workers: dict[str, Worker] = {}
        self.reporter: Reporter | None = None
        self.figures: FigureCollector | None = None  # draws the plots as the run goes, when asked for
        self._scratch: str | None = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def run(self) -> Report:
        """Every step of the lifecycle; returns the Report. Raises UsageError (or another CmpxError) for a problem
        found before any inference, BackendFailed when a model in a backend's own format cannot be described,
        and RunInterrupted (holding the partial report) on Ctrl-C."""
        checked = preflight(self.request, self.plugins, self.settings)
        if self.request.save_error_plots or self.request.report_html:
            from cmpx.reports.figures import SAMPLE_POINTS, plots_wanted

            if plots_wanted(self.request, self._warn):  # the comparison samples elements for the plots
                checked = replace(checked, comparison=replace(checked.comparison, samples=SAMPLE_POINTS))
        # The workers start now, before anything heavy is imported here, and import their frameworks while this
        # process reads the model and makes data; if that finds a problem they are stopped before loading anything.
        self.workers = (self.pool or WorkerPool()).assign(checked.backends, self.settings)
        described = None
        if checked.model_format is not None:  # a model in its backends' own format: the first one describes it
            from cmpx.transport.describing import describe_model

            first = checked.backends[0]
            described = describe_model(self.workers[first.name], first, self.request.model,
                                       checked.timeouts[first.name])
        self._scratch = tempfile.mkdtemp(prefix="cmpx-transformed-")
        plan, feeds = build_plan(checked, warn=self._warn, scratch=self._scratch, described=described)
        from cmpx.execution import execute
        from cmpx.results import RunResult

        reporters = [self.reporter_for(plan), _WarningsKept(self.warnings)]
        if checked.comparison.samples:
            from cmpx.reports.figures import FigureCollector

            self.figures = FigureCollector(plan, self.request.save_error_plots, bool(self.request.report_html))
            reporters.append(self.figures)
        self.reporter = Reporters(*reporters)
        self.reporter.started()
        result = RunResult()
        try:
            execute(plan, feeds, self.reporter, self.workers, result)
        except KeyboardInterrupt:
            report = Report(plan, result, self.warnings, interrupted=True, request=self.request)
            self.reporter.finished(report)
            raise RunInterrupted(report) from None
        finally:
            self._show_worker_output()
        report = Report(plan, result, self.warnings, request=self.request)
        self.reporter.finished(report)
        self._write_reports(report)
        return report

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self.warn(message)

    def _write_reports(self, report: Report) -> None:
        request = self.request
        document = report.to_dict() if request.report_json or request.report_html or self.figures else None
        if request.report_json:
            from cmpx.reports.json_report import write_json_document

            write_json_document(request.report_json, document)
        if request.junit:
            from cmpx.reports.junit import write_junit_report

            write_junit_report(request.junit, report)
        pictures = self.figures.finish(document) if self.figures is not None else []
        if request.save_error_plots:
            self.reporter.wrote(f"{len(self.figures.written)} error plot(s)", request.save_error_plots)
        if request.report_html:
            from cmpx.reports.html_report import write_html_report

            left_out = self.figures.left_out if self.figures is not None else 0
            write_html_report(request.report_html, document, pictures, plots=self.figures is not None,
                              figures_left_out=left_out)
            self.reporter.wrote("the HTML report", request.report_html)

    def _show_worker_output(self) -> None:
        """Hand the reporter what each worker printed (framework warnings, the backend's own prints), before the
        logs close with the workers."""
        for name, worker in self.workers.items():
            if not worker.closed and self.reporter is not None:
                text = worker.stderr_text().strip()
                if text:
                    self.reporter.worker_output(name, text)

    def release(self) -> None:
        """Stop every worker the session took and remove its scratch directory; safe to call more than once."""
        workers, self.workers = self.workers, {}
        release_workers(workers)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


class _WarningsKept(SilentReporter):
    """Keeps the warnings of the execution for the Report."""

    def __init__(self, warnings: list[str]):
        self.warnings = warnings

    def warning(self, message: str) -> None:
        self.warnings.append(message)
