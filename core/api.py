"""``cmpx.run()``: the Python API, the same run as ``cmpx run`` with the same options, checks, workers and verdicts."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from cmpx.outcome.report_data import RunInterrupted

if TYPE_CHECKING:
    from cmpx.report import Report
    from cmpx.transport.forking import ForkServers


def run(model: str | os.PathLike[str] | None = None, backends: str | Sequence[str] = (), *,
        plugins: Iterable[str] = (), echo: Callable[[str], None] | None = None, verbosity: int = 1,
        fork_servers: ForkServers | None = None, **options: Any) -> Report:
    """Run ``model`` on every backend of ``backends`` (in order, as ``--backend`` on the command line) with the
    same inputs, compare their outputs, and return the ``cmpx.Report``.

    ``options`` are ``cmpx run``'s options by their long names, with ``_`` for ``-``: ``atol=1e-3``,
    ``atol={"logits": 1e-2}`` (one output), ``input_shapes={"x": [1, 3, 224, 224]}``, ``val_range=(0, 1)``,
    ``mark_all=True``, ``load_outputs=["golden"]``, ``reference="onnxref"``, ``compare=["cosine"]``,
    ``cosine_threshold=0.99``, a backend's own options by their parameter names (``onnxrt_providers=["cpu"]``),
    and every other option of ``cmpx run --help`` (``report_json="r.json"`` writes that report too). Values may
    also be given as on the command line (``atol=["1e-3", "logits:1e-2"]``).

    ``plugins``: extra plugin modules, as ``-p`` (``"no:NAME"`` blocks one); CMPX_PLUGINS and
    CMPX_DISABLE_PLUGIN_AUTOLOAD apply as on the command line. ``echo``: a function that receives the text report
    line by line as the run goes (``print``); silent by default, but for a progress line in a Jupyter cell (what is
    waited for, which iteration of how many, the time left) that ends with the verdict. ``verbosity``: 0 failures only,
    1 every output, 2 statistics of passing outputs too. ``fork_servers``: a ``cmpx.ForkServers`` kept across many
    runs (``with cmpx.ForkServers() as servers: cmpx.run(..., fork_servers=servers)``): each run's workers are then
    forked with numpy and the forkable frameworks already imported, instead of importing them again (about 0.25 s
    of CPU per worker); each run still gets workers of its own.

    Raises ``cmpx.UsageError`` (and its subclasses ``ModelError``, ``PluginError``) for anything wrong found before
    inference, ``cmpx.BackendFailed`` when a model in a backend's own format cannot be described, and
    ``cmpx.RunInterrupted`` (with ``.report``, what finished) on Ctrl-C. A backend that fails during the run does
    not raise: the report has it in ``failures`` and ``exit_code`` 3, and the other backends are still compared.
    """
    try:
        return _run(model, backends, plugins, echo, verbosity, options, fork_servers)
    except RunInterrupted:
        raise
    except KeyboardInterrupt:  # before the session began (loading plugins): a report of nothing, as later ones
        from cmpx.lifecycle.session import unstarted_report

        raise RunInterrupted(unstarted_report(None)) from None


def _run(model: str | os.PathLike[str] | None, backends: str | Sequence[str], plugins: Iterable[str],
         echo: Callable[[str], None] | None, verbosity: int, options: dict[str, Any],
         fork_servers: ForkServers | None = None) -> Report:
    from cmpx.comparison.metric_names import threshold_keywords
    from cmpx.plugin.manager import PluginSettings, make_plugin_manager
    from cmpx.options.request import from_python
    from cmpx.lifecycle.session import Session

    settings = PluginSettings.from_cli(list(plugins))
    plugin_set = make_plugin_manager(autoload=settings.autoload, extra=settings.extra, blocked=settings.blocked)
    request = from_python(model, backends, options, threshold_keywords(plugin_set),
                          [spec.param(option) for spec in plugin_set.backends for option in spec.options])
    reporter_for = warn = None
    progress = None
    if echo is not None:
        from cmpx.reports.text import TextReporter

        def reporter_for(plan):
            return TextReporter(plan, echo, verbosity=verbosity)

        def warn(message: str) -> None:
            echo(f"warning: {message}")
    else:
        from cmpx.reports.notebook import NotebookProgress, in_notebook

        if in_notebook():  # a live line in the cell: what is waited for, which iteration of how many, what is left
            from cmpx.reports.text import TextReporter

            progress = NotebookProgress()

            def reporter_for(plan):
                return TextReporter(plan, lambda text: None, progress=progress)

    pool = None
    if fork_servers is not None:
        from cmpx.transport.pool import WorkerPool

        pool = WorkerPool.forked_from(fork_servers)
    with Session(request, plugin_set, settings, reporter_for=reporter_for, warn=warn, pool=pool) as session:
        report = session.run()
    if progress is not None:
        progress.done(f"{report.verdict} | {report.iterations} iteration(s) | exit {int(report.exit_code)}")
    return report
