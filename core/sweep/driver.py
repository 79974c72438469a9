"""``run_sweep``: a sweep file's models x runs, from the checks to the summaries.

    read and check    the sweep file, then every run's args as cmpx run would (UsageError: before any cell)
    resume            cells whose earlier result still holds are kept (cmpx.sweep.store; the models' digests from
                      cmpx.sweep.digests, the earlier results from the index, cmpx.sweep.index); cells of the same
                      inputs (model files of the same content) run once (cmpx.sweep.same_inputs)
    execute           the other cells, on the local or the Ray executor; each finished cell is written at once, by
                      the sweep's one writer (cmpx.sweep.writer)
    summarize         summary.json, summary.md, junit.xml, summary.html; the exit code (also after Ctrl-C, or
                      when the Ray cluster was lost: ClusterLost is raised again once the summaries of what
                      finished are written)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cmpx.errors import ClusterLost, UsageError
from cmpx.outcome.report_data import RunInterrupted
from cmpx.reports.terminal import Progress
from cmpx.sweep.executors import Executor, Job
from cmpx.sweep.digests import DigestCache
from cmpx.sweep.matrix import Cell, cells, check_runs
from cmpx.sweep.outcome import CellOutcome
from cmpx.sweep.overview import write_overview
from cmpx.sweep.progress import SweepProgress
from cmpx.sweep.same_inputs import same_inputs
from cmpx.sweep.store import CellStore
from cmpx.sweep.summary import CellEntry, SweepSummary, write_summary
from cmpx.sweep.sweepfile import SweepFile, read_sweep_file
from cmpx.sweep.tables import write_tables
from cmpx.sweep.writer import CellWriter

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class SweepOptions:
    """``cmpx sweep``'s options. ``jobs``: cells at once (default: what the machine allows, cmpx.sweep.capacity);
    ``plugin_args``: ``-p`` values every cell loads."""

    file: str
    out: str
    jobs: int | None = None
    executor: str = "local"
    ray_address: str | None = None
    rerun: str | None = None
    plugin_args: tuple[str, ...] = ()
    force_out: bool = False  # --force-out: write into a directory that is not a sweep's results
    ship_models: bool = False  # --ship-models: model files reach Ray's nodes through its object store
    pending_timeout: float | None = None  # --pending-timeout (Ray): None, the executor's default; 0, no limit


def run_sweep(options: SweepOptions, echo: Callable[[str], None], terminal: Progress | None = None,
              warn: Callable[[str], None] | None = None) -> int:
    """Run the sweep; return its exit code (0, 1 or 3). ``echo`` gets a line per finished cell and the totals,
    ``warn`` the warnings (default: ``echo``), ``terminal`` the status line. Raises UsageError before any cell
    runs, and RunInterrupted on Ctrl-C after the cells under way stopped and the summaries of what finished were
    written."""
    started = time.monotonic()
    if options.executor not in EXECUTORS:
        raise UsageError(f"--executor {options.executor}: choose one of {', '.join(EXECUTORS)}")
    if options.ray_address and options.executor != "ray":
        raise UsageError("--ray-address is for --executor ray")
    if options.ship_models and options.executor != "ray":
        raise UsageError("--ship-models is for --executor ray (local cells read the model files themselves)")
    if options.pending_timeout is not None and options.executor != "ray":
        raise UsageError("--pending-timeout is for --executor ray")
    sweep = read_sweep_file(options.file)
    runs = check_runs(sweep, options.plugin_args)
    executor, jobs_text = _executor(options, sweep, len(sweep.models) * len(runs),
                                    warn or (lambda message: echo(f"warning: {message}")))
    store = CellStore(options.out, options.force_out)
    matrix = cells(sweep, runs)
    digest_cache = DigestCache(options.out)
    digests = digest_cache.digests(sweep.models)
    digest_cache.save()
    fingerprints = {cell.key: cell.fingerprint(digests[cell.model], sweep.base) for cell in matrix}
    entries: dict[str, CellEntry] = {}
    to_run = []
    copies: dict[str, list[Cell]] = {}  # a cell to run -> the cells of the same inputs that take its result
    for group in same_inputs(matrix, fingerprints):
        kept = {cell.key: store.reusable(cell, fingerprints[cell.key], options.rerun) for cell in group}
        source = next(((cell, record) for cell in group if (record := kept[cell.key]) is not None), None)
        for cell in group:
            record = kept[cell.key]
            if record is None and source is not None:  # a model file of the same content was kept: take its result
                kept_outcome = store.kept_outcome(*source)
                record = store.record_of(cell, fingerprints[cell.key], kept_outcome, same_as=source[0].label)
                store.save(cell, record, kept_outcome, kept_outcome.summary)  # the writer has not started yet
            if record is not None:
                entries[cell.key] = CellEntry.of(cell.label, cell.run_name, record, store.report(cell, record),
                                                 cell.key, reused=True)
        if source is None:
            first = group[0]
            to_run.append(Job(first, first.task(sweep.base, digests[first.model]), dict(first.run.spec.resources)))
            copies[first.key] = group[1:]
    shared = sum(len(more) for more in copies.values())
    echo(f"cmpx sweep | {options.file} | {len(sweep.models)} model(s) x {len(runs)} run(s) = {len(matrix)} cells | "
         f"{len(matrix) - len(to_run) - shared} kept from an earlier sweep, {len(to_run)} to run"
         + (f" ({shared} more take the result of a model file of the same content)" if shared else "")
         + f" | {jobs_text}")
    progress = SweepProgress(len(to_run), echo, terminal or Progress())
    interrupted = False
    writer = CellWriter(store)
    lost: ClusterLost | None = None
    try:
        if to_run:
            executor.run(to_run, _Events(store, writer, fingerprints, entries, progress, copies))
    except KeyboardInterrupt:
        interrupted = True
    except ClusterLost as exc:
        lost = exc
    finally:
        progress.clear()
        writer.close()
    store.finish()
    return _summarize(options, sweep, matrix, entries, time.monotonic() - started, interrupted, echo, lost)


def _executor(options: SweepOptions, sweep: SweepFile, cells: int,
              warn: Callable[[str], None]) -> tuple[Executor, str]:
    from cmpx.sweep.capacity import default_jobs

    if options.executor == "ray":
        from cmpx.sweep.ray_executor import RayExecutor

        executor = RayExecutor(options.ray_address, options.jobs or default_jobs(sweep.models), options.jobs, warn,
                               options.ship_models, options.pending_timeout)
        return executor, f"executor ray: {executor.describe()}" + (
            f", at most {options.jobs} cells at once" if options.jobs else "")
    from cmpx.sweep.local import LocalExecutor

    jobs = options.jobs or default_jobs(sweep.models)
    if any(run.resources for run in sweep.runs):
        warn("the local executor runs up to --jobs cells at once and ignores the runs' resources (see --executor "
             "ray)")
    return LocalExecutor(jobs), f"executor local: {min(jobs, cells)} cell(s) at once"


class _Events:
    """Hands each finished cell to the writer and keeps its summary entry."""

    def __init__(self, store: CellStore, writer: CellWriter, fingerprints: dict[str, dict[str, Any]],
                 entries: dict[str, CellEntry], progress: SweepProgress, copies: dict[str, list[Cell]]):
        self.store = store
        self.writer = writer
        self.fingerprints = fingerprints
        self.entries = entries
        self.progress = progress
        self.copies = copies

    def started(self, job: Job) -> None:
        self.progress.cell_started()

    def finished(self, job: Job, outcome: CellOutcome) -> None:
        cell: Cell = job.cell
        if outcome.interrupted:  # not a result: the cell runs again next time
            self.progress.cell_dropped()
            return
        record = self.store.record_of(cell, self.fingerprints[cell.key], outcome)
        summary = outcome.summary
        self.writer.save(cell, record, outcome, summary)
        entry = CellEntry.of(cell.label, cell.run_name, record, summary, cell.key)
        self.entries[cell.key] = entry
        self.progress.cell_finished(entry)
        for same in self.copies.get(cell.key, ()):  # same model content, same run: the same result
            record = self.store.record_of(same, self.fingerprints[same.key], outcome, same_as=cell.label)
            self.writer.save(same, record, outcome, summary)
            self.entries[same.key] = CellEntry.of(same.label, same.run_name, record, summary, same.key)

    def tick(self) -> None:
        self.progress.tick()


def _summarize(options: SweepOptions, sweep: SweepFile, matrix: list[Cell], entries: dict[str, CellEntry],
               seconds: float, interrupted: bool, echo: Callable[[str], None], lost: ClusterLost | None = None) -> int:
    summary = SweepSummary(
        [entries.get(cell.key) or CellEntry(cell.label, cell.run_name) for cell in matrix],
        sweep_file=sweep.path, models=[sweep.label(m) for m in sweep.models], runs=[r.name for r in sweep.runs],
        executor=options.executor, seconds=seconds, interrupted=interrupted,
        cluster_failure=None if lost is None else str(lost))
    write_summary(options.out, summary)
    write_tables(options.out, summary)
    write_overview(options.out, summary)
    counts = ", ".join(f"{n} {verdict}" for verdict, n in summary.counts.items())
    echo(f"{len(matrix)} cells: {counts} | exit {int(summary.exit_code)} | {seconds:.1f} s | "
         f"results in {options.out} (summary.html, summary.md, summary.json, junit.xml)")
    if interrupted:
        echo(f"Interrupted: {len(entries)} of {len(matrix)} cells have results, kept in {options.out}; the same "
             "command runs the others")
        raise RunInterrupted()
    if lost is not None:
        raise ClusterLost(f"{lost}; {len(entries)} of {len(matrix)} cells have results, kept in {options.out}, the "
                          "others are listed as not run: the same command runs them once the cluster is back")
    return summary.exit_code
