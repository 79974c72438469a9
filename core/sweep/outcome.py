"""``CellOutcome``: what running one sweep cell gave, as the runner process or the Ray task hands it back to the
sweep (through a pipe as one JSON line: ``to_dict``, ``from_dict``; through Ray as it is)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from cmpx.errors import ExitCode
from cmpx.reports.json_report import RunSummary


@dataclass(frozen=True)
class CellOutcome:
    """What running one cell gave: ``exit_code`` (what ``cmpx run`` would exit with, or, from the Ray executor,
    ExitCode.INFRASTRUCTURE when the cluster failed under the cell past Ray's retries or no node could hold it in
    time: no verdict, never kept by a later sweep; ``failure`` says what failed), ``report`` (the
    --report-json document, or None when the run never started), ``failure`` (why the cell gave no verdict),
    ``log`` (the text report ``cmpx run`` would print, and the error), ``seconds``, ``host``, ``pid``, ``threads``
    (what its backends computed with; None when it never started), and ``page`` (the report as an HTML page,
    cmpx.reports.html_report, made where the cell ran)."""

    exit_code: int
    report: dict[str, Any] | None = None
    failure: str | None = None
    log: str = ""
    seconds: float | None = None
    host: str | None = None
    pid: int | None = None
    page: str | None = None
    threads: int | None = None

    @property
    def interrupted(self) -> bool:
        """Stopped before its end: not a result (the cell runs again next time)."""
        return self.exit_code == ExitCode.INTERRUPTED

    @property
    def summary(self) -> RunSummary | None:
        """The report, read back typed (None when the run never started)."""
        return None if self.report is None else RunSummary.from_document(self.report)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellOutcome:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})
