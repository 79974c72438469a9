"""The ``cmpx`` command group and the error boundary: exceptions become one-line messages and exit codes here."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

import click

from cmpx._version import __version__
from cmpx.options import completion
from cmpx.options.argv import prescan
from cmpx.cli.invocation import Invocation, invocation
from cmpx.errors import CmpxError, ExitCode, exit_code_of
from cmpx.limits import exhausted
from cmpx.printable import printable

# The commands imported only when a command line names them, with the summary `cmpx --help` lists for each: so
# `cmpx --help` imports none of them, nor discovers plugins (which `run`'s options need). The summaries are
# defined here and nowhere else.
LAZY_COMMANDS = {
    "env": "Python environments for backends' workers (NAME@env:ENV).",
    "precision": "Find the fewest nodes to keep in float32 (or unquantized).",
    "reduce": "Reduce a failing model to the smallest failing subgraph.",
    "run": "Run a model on several backends and compare the outputs.",
    "sweep": "Run many models with many run configurations.",
    "tolerances": "Measure tolerances from the noise floor of two backends.",
}


class CmpxGroup(click.Group):
    """Imports its commands when named (LAZY_COMMANDS), builds the plugin manager on demand (never at import time)
    and converts errors to exit codes."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = _import_command(ctx, name) if name in LAZY_COMMANDS else super().get_command(ctx, name)
        if command is None:
            from cmpx.options.polygraphy import COMMANDS

            if name in COMMANDS:
                raise click.UsageError(f"'{name}' is a Polygraphy command that cmpx does not have: {COMMANDS[name]}")
        else:
            command.short_help = LAZY_COMMANDS.get(name, command.short_help)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``cmpx --help``, as click writes it, but the lazy commands' summaries are read from
        LAZY_COMMANDS instead of importing (and, for run, building) the commands."""
        rows = []
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        for name in names:
            if name in LAZY_COMMANDS:
                rows.append((name, click.Command(name, short_help=LAZY_COMMANDS[name]).get_short_help_str(limit)))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, invocation: Invocation | None = None, **extra: Any) -> Any:
        """``invocation``: what cmpx.cli.launch found and started (made here when cmpx runs in-process)."""
        args = list(sys.argv[1:] if args is None else args)
        completion.register()  # before click looks for _CMPX_COMPLETE: a word holding ':' completes in bash too
        invocation = invocation or Invocation(prescan(args))
        previous = _signals_interrupt()
        try:
            code = super().main(args, prog_name or "cmpx", complete_var, standalone_mode=False, obj=invocation,
                                **extra)
        except click.ClickException as exc:
            _show_debug(invocation.prescan.debug)
            click.echo(f"Error: {printable(exc.format_message())}", err=True)
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                click.echo(f"Try '{exc.ctx.command_path} --help' for help.", err=True)
            code = ExitCode.USAGE if isinstance(exc, click.UsageError) else exc.exit_code
        except CmpxError as exc:
            _show_debug(invocation.prescan.debug)
            click.echo(f"Error: {printable(str(exc))}", err=True)
            code = exc.exit_code
        except (click.Abort, KeyboardInterrupt) as exc:
            from cmpx.outcome.report_data import RunInterrupted

            click.echo("Interrupted: workers stopped, shared memory released.", err=True)
            code = exit_code_of(exc) if isinstance(exc, RunInterrupted) else ExitCode.INTERRUPTED
        except Exception as exc:  # a bug, or an environment cmpx did not foresee: never a verdict
            _show_debug(invocation.prescan.debug)
            limit = exhausted(exc)
            if limit is not None:  # a machine limit, at whatever point it ran out
                click.echo(f"Error: cmpx ran out of {limit}: {printable(str(exc))}; raise the limit (or run fewer "
                           "backends at once)", err=True)
                code = ExitCode.USAGE
            else:
                click.echo(f"Internal error: {type(exc).__name__}: {printable(str(exc))} (exit "
                           f"{int(ExitCode.INTERNAL)}; rerun with --debug for the traceback, and please report it)",
                           err=True)
                code = ExitCode.INTERNAL
        finally:
            _restore(previous)
        code = int(code or 0)
        if standalone_mode:
            sys.exit(code)
        return code


INTERRUPTING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _signals_interrupt() -> dict[int, Any]:
    """Make SIGTERM and SIGHUP (a closed terminal, a dropped ssh session) unwind like Ctrl-C, so that workers and
    segments are cleaned up; return the old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return {signum: signal.signal(signum, interrupt) for signum in INTERRUPTING_SIGNALS}


def _restore(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _show_debug(debug: bool) -> None:
    if debug:
        import traceback

        traceback.print_exc()


@click.group(cls=CmpxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cmpx")
@click.option("-p", "--plugin", "plugin_args", multiple=True, metavar="MODULE",
              help="load a plugin module (also CMPX_PLUGINS=a,b); -p no:NAME blocks plugin NAME")
@click.option("--debug", is_flag=True, help="show tracebacks of errors")
def cli(plugin_args: tuple[str, ...], debug: bool) -> None:
    """cmpx: run one model on several inference frameworks and compare their outputs.

    \b
    Plugins come from the entry-point group 'cmpx' (the built-in backends too);
    CMPX_DISABLE_PLUGIN_AUTOLOAD=1 turns that off, CMPX_TRACE_PLUGINS=1 traces hook calls.
    """


@cli.command("plugins")
def plugins_command() -> None:
    """List backends, data loaders and metrics, who provides them, and plugins that failed to load."""
    from cmpx.cli.plugins_cmd import show_plugins

    show_plugins(invocation(click.get_current_context()).plugins)



@cli.command("tensors")
@click.argument("model", metavar="MODEL", shell_complete=completion.paths())
def tensors_command(model: str) -> None:
    """List the tensors of MODEL that --onnx-outputs can mark: name, producing node, op type, dtype, shape."""
    from cmpx.cli.tensors_cmd import show_tensors

    show_tensors(model, invocation(click.get_current_context()).plugins)



def _import_command(ctx: click.Context, name: str) -> click.Command:
    """The command ``name`` of LAZY_COMMANDS, imported now (run's is built from this command line's plugins)."""
    if name == "run":
        from cmpx.cli.run import build_run_command

        return build_run_command(invocation(ctx).plugins)
    if name == "env":
        from cmpx.cli.env_cmd import env_group

        return env_group
    if name == "reduce":
        from cmpx.cli.reduce_cmd import reduce_command

        return reduce_command
    if name == "precision":
        from cmpx.cli.precision_cmd import precision_command

        return precision_command
    if name == "sweep":
        from cmpx.cli.sweep_cmd import sweep_command

        return sweep_command
    from cmpx.cli.tolerances_cmd import tolerances_command

    return tolerances_command
