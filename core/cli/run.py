"""``cmpx run``: the command (its grammar is cmpx.options.grammar, which sweeps and reduce also parse their runs'
words with) and its action, a Session with the text report."""

from __future__ import annotations

import sys
from typing import Any

import click

from cmpx.cli.invocation import invocation
from cmpx.options.grammar import build_run_command as _grammar, request_from_values
from cmpx.plugin.manager import PluginSet


def build_run_command(plugins: PluginSet) -> click.Command:
    def callback(**values: Any) -> int:
        return _run(plugins, values)

    return _grammar(plugins, callback)


def _run(plugins: PluginSet, values: dict[str, Any]) -> int:
    """Run the request of click's values in a Session with the text report, return the exit code."""
    from cmpx.reports.terminal import PipeSafeEcho, Progress, colour_wanted, terminal_width
    from cmpx.reports.text import TextReporter
    from cmpx.lifecycle.session import Session

    request, cli = request_from_values(plugins, values)
    verbosity = max(0, 1 + cli["verbose"] - (1 if cli["quiet"] else 0))

    colour = colour_wanted(sys.stdout)
    out, err = PipeSafeEcho(colour=colour or None), PipeSafeEcho(err=True)

    def reporter_for(plan):
        return TextReporter(plan, out, debug=cli["debug"], verbosity=verbosity, colour=colour,
                            progress=Progress.for_terminal(), width=terminal_width(sys.stdout))

    ctx = click.get_current_context()
    with Session(request, plugins, invocation(ctx).settings, reporter_for=reporter_for, pool=invocation(ctx).pool,
                 warn=lambda message: err(f"warning: {message}"), verbosity=verbosity) as session:
        return int(session.run().exit_code)
