"""The ``cmpx`` command group and the error boundary: cmpx exceptions become one-line messages here."""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any

import click

from cmpx import __version__
from cmpx.cli.argv import option_values
from cmpx.errors import BackendError, CmpxError, PluginError, UsageError
from cmpx.plugins import PluginSet, PluginSettings, make_plugin_manager

if TYPE_CHECKING:
    from cmpx.transport.supervisor import SpareWorkers

EXIT_USAGE, EXIT_BACKEND_FAILED, EXIT_INTERRUPTED = 2, 3, 130


class CmpxGroup(click.Group):
    """Builds the plugin manager on demand (never at import time) and converts errors to exit codes."""

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name == "run":
            from cmpx.cli.run import build_run_command

            return build_run_command(_plugins(ctx))
        return super().get_command(ctx, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), "run"})

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, spares: SpareWorkers | None = None, **extra: Any) -> Any:
        """``spares``: workers already started for this run (see cmpx.cli.launch), which ``run`` takes."""
        args = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in args[: args.index("--")] if "--" in args else "--debug" in args
        previous_sigterm = _sigterm_interrupts()
        try:
            code = super().main(args, prog_name or "cmpx", complete_var, standalone_mode=False,
                                obj={"argv": args, "spares": spares}, **extra)
        except click.ClickException as exc:
            _show_debug(debug)
            message = exc.format_message()
            click.echo(f"Error: {message}", err=True)
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                click.echo(f"Try '{exc.ctx.command_path} --help' for help.", err=True)
            code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
        except (UsageError, PluginError) as exc:
            _show_debug(debug)
            click.echo(f"Error: {exc}", err=True)
            code = EXIT_USAGE
        except BackendError as exc:
            _show_debug(debug)
            click.echo(f"Error: {exc}", err=True)
            code = EXIT_BACKEND_FAILED
        except CmpxError as exc:
            _show_debug(debug)
            click.echo(f"Error: {exc}", err=True)
            code = 1
        except (click.Abort, KeyboardInterrupt):
            click.echo("Interrupted: workers stopped, shared memory released.", err=True)
            code = EXIT_INTERRUPTED
        finally:
            if previous_sigterm is not None:
                signal.signal(signal.SIGTERM, previous_sigterm)
        code = code or 0
        if standalone_mode:
            sys.exit(code)
        return code


def _sigterm_interrupts() -> Any:
    """Make SIGTERM unwind like Ctrl-C, so workers and segments are cleaned up; return the old handler."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def _show_debug(debug: bool) -> None:
    if debug:
        traceback.print_exc()


def _plugins(ctx: click.Context) -> PluginSet:
    state = ctx.find_root().ensure_object(dict)
    if "plugins" not in state:
        state["settings"] = settings = PluginSettings.from_cli(option_values(state.get("argv", []), "-p", "--plugin"))
        state["plugins"] = make_plugin_manager(autoload=settings.autoload, extra=settings.extra,
                                               blocked=settings.blocked)
    return state["plugins"]


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

    show_plugins(_plugins(click.get_current_context()))


@cli.command("tensors")
@click.argument("model", metavar="MODEL")
def tensors_command(model: str) -> None:
    """List the tensors of MODEL that --onnx-outputs can mark: name, producing node, op type, dtype, shape."""
    from cmpx.model.graph import load_structure, tensor_graph
    from cmpx.model.info import format_shape, read_model
    from cmpx.planning import native_format

    suffix = native_format(model, list(_plugins(click.get_current_context()).backends))
    if suffix is not None:
        raise UsageError(f"cmpx tensors lists the tensors of an ONNX model, and {model} is a {suffix} model; give "
                         "the ONNX model it was made from")
    info = read_model(model)
    graph = tensor_graph(load_structure(info.path))
    markable = set(graph.markable())
    outputs = set(graph.graph_outputs)
    rows = [(t.name, t.node or "-", t.op_type, t.dtype or "?", format_shape(t.shape),
             "output" if t.name in outputs else ("" if t.name in markable else "not markable"))
            for t in graph.tensors]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(TENSOR_COLUMNS)]
    for row in [TENSOR_COLUMNS, *rows]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    click.echo(f"{len(markable)} markable tensor(s) of {len(graph.tensors)}; mark them with "
               f"--onnx-outputs NAME|PATTERN|@FILE or --mark-all")


TENSOR_COLUMNS = ("TENSOR", "NODE", "OP", "DTYPE", "SHAPE", "NOTE")
