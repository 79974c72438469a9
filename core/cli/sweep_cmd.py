"""``cmpx sweep FILE --out DIR`` and ``cmpx sweep diff OLD NEW``: the command line of cmpx.sweep. Imports nothing
heavy until it runs."""

from __future__ import annotations

from typing import Any

import click

from cmpx.options import completion
from cmpx.sweep.ray_cluster import DEFAULT_PENDING_TIMEOUT

SWEEP_HELP = """Run every model of the sweep FILE (TOML) with every run configuration in it, each cell a full
'cmpx run' with its own workers, and write the results to DIR: a report and a log per cell, summary.json,
summary.md (models x runs), summary.html (the same, coloured, linking each cell's page) and junit.xml.
'cmpx sweep diff OLD NEW' says what changed between two sweeps' results (see 'cmpx sweep diff --help').

\b
Exit codes: 0 every cell passed, 1 a cell mismatched, 3 a cell's backend failed (or a cell could not run,
which its failure says), 2 a bad sweep file or option (before any cell), 6 the Ray cluster failed (its head
was lost, or a cell's node, process or memory failed past Ray's retries; finished cells are kept), 130
interrupted (finished cells are kept). Running again with the same DIR runs only the cells without a current result.

\b
A sweep file:
  models = ["models/*.onnx"]          # globs, relative to the file
  [defaults]
  args = ["--iterations", "2"]        # every run's args start with these
  [[runs]]
  name = "ort-vs-ref"
  args = ["--backend", "onnxrt", "--backend", "onnxref"]
  [[runs]]
  name = "trt-fp16"
  args = "--backend trt:fp16 --backend onnxrt --atol 1e-2"
  resources = {GPU = 1}               # what a cell needs on a Ray cluster

See docs/sweep.md.
"""


DIFF_HELP = """What changed between the results of two sweeps (directories 'cmpx sweep --out' wrote), cell by
cell (model and run): new failures, fixed cells, verdicts that changed, worst errors that grew or shrank by more
than --factor, cells not run in NEW, and cells in one sweep only.

\b
Exit codes: 0 nothing got worse, 1 something did (a new failure, a graver verdict, an error grown more than
--factor, a cell without a result in NEW), 2 OLD or NEW is not a sweep's results.
"""


@click.command("diff", help=DIFF_HELP, short_help="What changed between two sweeps' results.")
@click.argument("old", metavar="OLD", shell_complete=completion.paths("dir"))
@click.argument("new", metavar="NEW", shell_complete=completion.paths("dir"))
@click.option("--factor", type=click.FloatRange(min=1.0, min_open=True), default=2.0, show_default=True,
              metavar="F", help="a worst error (abs or rel) more than F times the old one grew (less than 1/F: shrank)")
@click.option("--json", "as_json", is_flag=True, help="print the changes as JSON instead of text")
@click.option("--html", "html_path", metavar="FILE", shell_complete=completion.paths(),
              help="also write NEW's overview page (as its summary.html) with the changes first")
def diff_command(old: str, new: str, factor: float, as_json: bool, html_path: str | None) -> int:
    import json
    import os

    from cmpx.outputs import check_file_output, write_whole
    from cmpx.printable import printable
    from cmpx.reports.terminal import PipeSafeEcho
    from cmpx.sweep.diff import compare, read_results
    from cmpx.sweep.overview import Links, render_overview

    before, after = read_results(old, "OLD"), read_results(new, "NEW")
    if html_path:
        check_file_output("--html", html_path)
    changes = compare(before, after, old, new, factor)
    out = PipeSafeEcho()  # a reader gone (| head): the page is still written, the exit code still the changes'
    if as_json:
        out(json.dumps(changes.to_document(), indent=1, allow_nan=False))
    else:
        for line in changes.lines():
            out(printable(line))
    if html_path:
        links = Links(new, os.path.dirname(os.path.abspath(html_path)))
        write_whole("--html", html_path, render_overview(after, links, changes))
        PipeSafeEcho(err=True)(f"wrote the overview with the changes to {html_path}")
    return 1 if changes.worse else 0


class SweepCommand(click.Command):
    """``cmpx sweep FILE``, which also leads to ``cmpx sweep diff OLD NEW`` (a sweep file named diff: ./diff)."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        if args[:1] == ["diff"]:
            # a context of a command without arguments, so that diff's usage reads 'cmpx sweep diff', not FILE diff
            here = click.Context(click.Command(info_name), info_name=info_name, parent=parent, **extra)
            return diff_command.make_context("diff", args[1:], parent=here, **extra)
        return super().make_context(info_name, args, parent, **extra)


@click.command("sweep", cls=SweepCommand, help=SWEEP_HELP)
@click.argument("sweep_file", metavar="FILE", shell_complete=completion.paths())
@click.option("--out", required=True, metavar="DIR", shell_complete=completion.paths("dir"), help="results directory; an earlier sweep's results in it are "
              "reused where still current")
@click.option("--jobs", type=click.IntRange(min=1), metavar="N",
              help="cells at once [default: local: one per CPU, fewer if memory is short; ray: as Ray schedules]")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="local: runner processes on this machine; ray: a Ray task per cell (pip install 'cmpx[ray]')")
@click.option("--ray-address", metavar="ADDR", help="the Ray cluster to use [default: RAY_ADDRESS, else a local "
              "Ray started for the sweep]")
@click.option("--pending-timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="ray: end a cell that waits longer for a node able to hold its resources, as an infrastructure "
              f"failure naming them; 0: no limit [default: {DEFAULT_PENDING_TIMEOUT:g}]")
@click.option("--rerun", type=click.Choice(["failed", "all"]),
              help="also run again the cells that did not pass (failed), or every cell (all)")
@click.option("-p", "--plugin", "plugin_args", multiple=True, metavar="MODULE",
              help="load a plugin module in every cell (as cmpx run -p)")
@click.option("--ship-models", is_flag=True, help="send each model file to the Ray nodes through Ray's object "
              "store, for a cluster without a shared file system (the files runs read must still be on every node)")
@click.option("--force-out", is_flag=True, help="write into DIR even if it holds files that are not a sweep's "
              "results (summary.md, summary.json, junit.xml and cells/ are replaced)")
def sweep_command(sweep_file: str, out: str, jobs: int | None, executor: str, ray_address: str | None,
                  pending_timeout: float | None, rerun: str | None, plugin_args: tuple[str, ...], ship_models: bool,
                  force_out: bool) -> int:
    from cmpx.cli.invocation import invocation
    from cmpx.printable import printable
    from cmpx.reports.terminal import PipeSafeEcho, Progress
    from cmpx.sweep.driver import SweepOptions, run_sweep

    everywhere = invocation(click.get_current_context()).prescan.plugin_args  # cmpx -p X sweep ..., and sweep's -p
    options = SweepOptions(sweep_file, out, jobs, executor, ray_address, rerun, tuple(everywhere) or plugin_args,
                           force_out, ship_models, pending_timeout)
    echo, echo_err = PipeSafeEcho(), PipeSafeEcho(err=True)  # a reader gone (| head) ends the lines, not the sweep
    return run_sweep(options, lambda text: echo(printable(text)), Progress.for_terminal(),
                     warn=lambda message: echo_err(f"warning: {printable(message)}"))
