"""``cmpx sweep FILE --out DIR``: the command line of cmpx.sweep. Imports nothing heavy until it runs."""

from __future__ import annotations

import click

from cmpx.options import completion
from cmpx.sweep.ray_cluster import DEFAULT_PENDING_TIMEOUT

SWEEP_HELP = """Run every model of the sweep FILE (TOML) with every run configuration in it, each cell a full
'cmpx run' with its own workers, and write the results to DIR: a report and a log per cell, summary.json,
summary.md (models x runs) and junit.xml.

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


@click.command("sweep", help=SWEEP_HELP, short_help="Run many models with many run configurations.")
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
@click.option("--force-out", is_flag=True, help="write into DIR even if it holds files that are not a sweep's "
              "results (summary.md, summary.json, junit.xml and cells/ are replaced)")
def sweep_command(sweep_file: str, out: str, jobs: int | None, executor: str, ray_address: str | None,
                  pending_timeout: float | None, rerun: str | None, plugin_args: tuple[str, ...],
                  force_out: bool) -> int:
    from cmpx.cli.invocation import invocation
    from cmpx.printable import printable
    from cmpx.reports.terminal import Progress
    from cmpx.sweep.driver import SweepOptions, run_sweep

    everywhere = invocation(click.get_current_context()).prescan.plugin_args  # cmpx -p X sweep ..., and sweep's -p
    options = SweepOptions(sweep_file, out, jobs, executor, ray_address, rerun, tuple(everywhere) or plugin_args,
                           force_out, pending_timeout)
    return run_sweep(options, lambda text: click.echo(printable(text)), Progress.for_terminal(),
                     warn=lambda message: click.echo(f"warning: {printable(message)}", err=True))
