"""Which error plots a run draws, under which file names, and drawing them as the run goes.

Plotted outputs: every model output of every pair and iteration, and each pair's first divergence (in a run that
marks tensors, the other intermediate tensors are in the per-layer profile instead: one figure per pair). With
--save-error-plots each figure is written as soon as its iteration is compared, so the sampled elements are let
go at once; for --report-html the collector keeps, per pair and output, the iteration with the largest error.
File names are unique per pair, iteration and tensor (a short digest of the exact names tells ``a/b`` from ``a_b``,
and ``Y`` from ``y`` on case-insensitive file systems) and at most 100 characters long.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cmpx.errors import OutputFailed
from cmpx.outputs import write_file
from cmpx.reports.reporter import SilentReporter

if TYPE_CHECKING:
    from cmpx.plan import RunPlan
    from cmpx.options.request import RunRequest
    from cmpx.outcome.results import OutputResult, PairResult

SAMPLE_POINTS = 2000  # elements sampled per output for the magnitude plot: 200 largest errors, 1,800 at random
HTML_OUTPUT_FIGURES = 48  # per-output figures an HTML report embeds at most (failing and largest errors first)
MAX_STEM = 80
NO_MATPLOTLIB = ("--report-html: matplotlib is not installed, so the report has no plots (pip install "
                 "'cmpx[plots]')")


@dataclass(frozen=True)
class Picture:
    """One drawn figure: ``kind`` "output" (one tensor of one pair and iteration) or "profile" (one pair)."""

    kind: str
    backend: str
    reference: str
    tensor: str | None
    iteration: int | None
    caption: str
    file_name: str
    png: bytes
    failed: bool
    panels: tuple[bytes, ...] = ()  # the figure's side-by-side panels cut apart (a narrow page stacks them)


def plot_file_name(*parts: str) -> str:
    """A short, portable and unique file name for the figure of ``parts`` (iteration, pair, tensor)."""
    stem = re.sub(r"[^A-Za-z0-9.+=@-]+", "_", "-".join(parts)).strip("._-")[:MAX_STEM] or "plot"
    digest = hashlib.sha1("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{stem}-{digest}.png"


def plots_wanted(request: RunRequest, warn: Callable[[str], None]) -> bool:
    """Whether the run draws plots. --save-error-plots without matplotlib is a UsageError (before any work);
    --report-html without it gets a report without plots, and a warning that says so."""
    from cmpx.reports.plots import check_plotting, plotting_available

    if request.save_error_plots:
        check_plotting()
        return True
    if request.report_html:
        if plotting_available():
            return True
        warn(NO_MATPLOTLIB)
    return False


@dataclass
class _Candidate:
    """The figure of one pair's output that the HTML report will show: the iteration with the largest error."""

    rank: tuple[bool, float]  # (failed, largest abs error)
    iteration: int
    output: OutputResult  # with its sample until the figure is drawn
    picture: Picture | None


class FigureCollector(SilentReporter):
    """A reporter that draws each compared pair's plots (see the module docstring)."""

    def __init__(self, plan: RunPlan, directory: str | None, for_html: bool):
        self.plan = plan
        self.directory = directory
        self.for_html = for_html
        self.written: list[str] = []
        self.left_out = 0  # per-output figures the HTML report does not show (past HTML_OUTPUT_FIGURES)
        self._best: dict[tuple[str, str, str], _Candidate] = {}
        self.error: OutputFailed | None = None
        if directory:
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as exc:
                self.error = OutputFailed(f"--save-error-plots {directory}: {exc.strerror or exc}")

    def pair_compared(self, pair: PairResult) -> None:
        divergence = pair.first_divergence.tensor if pair.first_divergence else None
        outputs = self.plan.required_outputs
        for output in pair.outputs:
            data = _tolerance_data(output)
            if data is None or (outputs and output.output not in outputs and output.output != divergence):
                continue
            writing = self.directory and self.error is None  # after a failed write, draw only what the HTML needs
            picture = self._draw(pair.backend, pair.reference, pair.iteration, output) if writing else None
            if picture is not None:
                self._write(picture)
            if self.for_html:
                key = (pair.backend, pair.reference, output.output)
                rank = (not output.passed, _magnitude(output.worst("abs")))
                if key not in self._best or rank > self._best[key].rank:
                    self._best[key] = _Candidate(rank, pair.iteration, output.without_sample() if picture else output,
                                                 picture)

    def finish(self, document: Mapping[str, Any]) -> list[Picture]:
        """Draw the per-layer profiles (and for the HTML report the figures not drawn yet); return the pictures
        the HTML report shows: profiles first, then each pair's outputs."""
        from cmpx.reports.profile import layer_profiles
        from cmpx.reports.profile_plot import profile_figure
        from cmpx.reports.plots import png_bytes

        pictures = []
        for profile in layer_profiles(document):
            iterations = f", worst of {profile.iterations} iterations" if profile.iterations > 1 else ""
            caption = (f"per-layer error: {profile.backend} vs {profile.reference} ({len(profile.rows)} tensors, "
                       f"{profile.failing} failing{iterations})")
            picture = Picture("profile", profile.backend, profile.reference, None, None, caption,
                              plot_file_name("profile", profile.backend, "vs", profile.reference),
                              png_bytes(profile_figure(profile, caption)), profile.failing > 0)
            if self.directory:
                self._write(picture)
            pictures.append(picture)
        if self.for_html:
            chosen = sorted(self._best.values(), key=lambda c: c.rank, reverse=True)[:HTML_OUTPUT_FIGURES]
            kept = {id(candidate) for candidate in chosen}
            self.left_out = len(self._best) - len(chosen)
            for (backend, reference, _), candidate in self._best.items():  # in the order the outputs came
                if id(candidate) in kept:
                    pictures.append(candidate.picture or self._draw(backend, reference, candidate.iteration,
                                                                    candidate.output))
        self._best.clear()
        if self.error is not None:
            raise self.error
        return pictures

    def _draw(self, backend: str, reference: str, iteration: int, output: OutputResult) -> Picture:
        from cmpx.reports.plots import output_figure, png_and_panels

        data = _tolerance_data(output)
        if data is None:
            raise ValueError(f"{output.output}: no tolerance check's data to plot")  # its callers checked
        verdict = "PASSED" if output.passed else "FAILED"
        criterion = next((m.criterion for m in output.metrics if m.data is data), "")
        caption = (f"{output.output}: {backend} vs {reference}, iteration {iteration}: {verdict}"
                   + (f" [{criterion}]" if criterion else ""))
        png, panels = png_and_panels(output_figure(caption, data, output.sample))
        return Picture("output", backend, reference, output.output, iteration, caption,
                       plot_file_name(str(iteration), backend, "vs", reference, output.output), png,
                       not output.passed, panels)

    def _write(self, picture: Picture) -> None:
        """Write one plot; the first one that cannot be written (a full or read-only disk) stops the writing, and
        ``finish`` raises it: the run and its other reports go on."""
        if self.error is not None or self.directory is None:
            return
        path = os.path.join(self.directory, picture.file_name)
        try:
            write_file("--save-error-plots", path, lambda f: f.write(picture.png), mode="wb")
        except OutputFailed as exc:
            self.error = exc
            return
        self.written.append(path)


def _tolerance_data(output: OutputResult) -> Mapping[str, Any] | None:
    if output.failed_early:
        return None
    return next((m.data for m in output.metrics if "abs_histogram" in m.data and "atol" in m.data), None)


def _magnitude(value: float | None) -> float:
    if value is None:
        return -1.0
    return math.inf if math.isnan(value) else value
