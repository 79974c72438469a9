"""``cmpx run``'s grammar, below every command: its options, built per invocation from the run options
(cmpx.options.table) because each registered backend and metric adds options of its own; ``request_from_values`` maps
click's values to a RunRequest, and ``request_from_words`` parses a run's words with the same command without
running it (cmpx reduce, cmpx sweep's cells)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from cmpx.options import completion
from cmpx.options.argv import expand_multi_values
from cmpx.options.grouped_help import GroupedCommand, GroupedOption
from cmpx.options.polygraphy import translate
from cmpx.comparison.metric_names import metric_words, threshold_flags
from cmpx.errors import UsageError
from cmpx.plugin.manager import PluginSet
from cmpx.options.request import RunRequest, request_defaults
from cmpx.options.table import COMPARISON, EXECUTION, FLAG, INT, REPORTS, RUN_OPTIONS, WORDS, not_a_model, \
    per_output_value

RUN_HELP = """Run MODEL on every --backend with the same inputs and compare their outputs.

\b
By default each backend is compared with the next one, which is the reference (the relative error
divides by it); --reference NAME compares every other backend against NAME. A backend given twice is
named NAME#2. Outputs are paired by exact name.

\b
Exit codes: 0 all outputs passed, 1 a mismatch, 2 bad usage or input (found before any inference),
3 a backend failed (error, crash or timeout; the other backends are still compared), 4 an internal
error, 130 interrupted.

\b
Example:
  cmpx run model.onnx --backend onnxrt --backend onnxref --input-shapes X:[1,3,224,224] --atol 1e-4
"""

# Options of the command line only: how to report, not what to run.
CLI_ONLY = ("plugin_args", "debug", "verbose", "quiet")


class RunCommand(GroupedCommand):
    def __init__(self, *args: Any, multi_value: dict[str, Any], backends: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.multi_value = multi_value
        self.backends = backends

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Polygraphy's spellings first (its runner flags, its options cmpx lacks), then the multi-value form."""
        flags = {flag for param in self.get_params(ctx) for flag in getattr(param, "opts", ())}
        return super().parse_args(ctx, expand_multi_values(translate(args, self.backends, flags), self.multi_value))


def multi_value_options(plugins: PluginSet | None = None) -> dict[str, Any]:
    """Flags that take several space-separated values, and which words they accept."""
    multi = {flag: option.accepts for option in RUN_OPTIONS if option.accepts for flag in option.flags}
    if plugins is not None:
        words = set(metric_words(plugins))
        multi["--compare"] = multi["--compare-func"] = lambda word: word in words
        for metric in plugins.metrics:
            if getattr(metric.metric, "threshold", None) is not None:
                multi.update(dict.fromkeys(threshold_flags(metric), per_output_value))
        for spec in plugins.backends:
            for option in spec.options:
                if option.multiple:  # as in Polygraphy: --trt-min-shapes X:[..] Y:[..]
                    multi.update(dict.fromkeys([spec.flag(option), *option.aliases], not_a_model))
    return multi


def build_run_command(plugins: PluginSet, callback: Callable[..., Any] | None = None) -> click.Command:
    """``cmpx run``'s command: its options from the run option table (cmpx.options.table) and the plugins' backends
    and metrics; ``callback`` (click's values as keywords) runs it, None for a command that only parses."""
    defaults = request_defaults()
    dynamic = {  # what the registered plugins add to an option: the names it takes, and their completion
        "backends": (f" [available: {', '.join(plugins.backends.names()) or 'none'}; transforms: "
                     f"{', '.join(plugins.transforms.names()) or 'none'}]",
                     completion.backends(plugins.backends.names(), plugins.transforms.names())),
        "compare": (f" [available: {', '.join(metric_words(plugins))}]", completion.names(metric_words(plugins))),
    }
    params: list[click.Parameter] = [click.Argument(["model"], metavar="[MODEL]", required=False,
                                                    shell_complete=completion.paths())]
    for option in RUN_OPTIONS:
        suffix, complete = dynamic.get(option.name, ("", None))
        if option.python == "path":  # the option table says which options take a path: the shell completes it
            complete = completion.paths("dir" if option.metavar == "DIR" else "file")
        kwargs: dict[str, Any] = {"group": option.group, "help": option.help + suffix, "metavar": option.metavar,
                                  "shell_complete": complete}
        if option.kind == WORDS:
            kwargs["multiple"] = True
        elif option.kind == FLAG:
            kwargs["is_flag"] = True
        else:
            kwargs["type"] = int if option.kind == INT else str
            kwargs["default"] = defaults[option.name]
            kwargs["show_default"] = defaults[option.name] is not None
        params.append(GroupedOption([*option.flags, option.name], **kwargs))
    for metric in plugins.metrics:
        if getattr(metric.metric, "threshold", None) is None:
            continue
        params.append(GroupedOption(
            [*threshold_flags(metric), _threshold_param(metric.name)], multiple=True,
            metavar="[NAME:]VALUE", group=COMPARISON,
            help=f"threshold of --compare {metric.name} [default: {metric.metric.threshold:g}]"))
    for spec in plugins.backends:
        for own in spec.options:  # the backend's own options
            kwargs = {"group": f"Backend {spec.name}", "help": own.help}
            if own.is_flag:
                kwargs.update(is_flag=True, default=False)
            else:
                kwargs.update(multiple=own.multiple, default=own.default,
                              type=click.Choice(own.choices) if own.choices else own.type)
            params.append(GroupedOption([spec.flag(own), *own.aliases, spec.param(own)], **kwargs))
    params += [
        GroupedOption(["-p", "--plugin", "plugin_args"], multiple=True, metavar="MODULE", group=EXECUTION,
                      help="load a plugin module here and in every worker (also CMPX_PLUGINS=a,b); "
                           "-p no:NAME blocks plugin NAME"),
        GroupedOption(["--debug"], is_flag=True, group=EXECUTION, help="show tracebacks"),
        GroupedOption(["-v", "--verbose"], count=True, group=REPORTS,
                      help="also show the statistics of passing outputs; -vv also what each backend's worker "
                           "printed (framework warnings)"),
        GroupedOption(["-q", "--quiet"], is_flag=True, group=REPORTS,
                      help="show only failures, errors and the summary"),
    ]

    return RunCommand("run", params=params, callback=callback, help=RUN_HELP, multi_value=multi_value_options(plugins),
                      backends=plugins.backends.names())


def _threshold_param(metric: str) -> str:
    """click's parameter name of a metric's threshold option."""
    return f"threshold_{metric.replace('-', '_')}"


def request_from_values(plugins: PluginSet, values: dict[str, Any]) -> tuple[RunRequest, dict[str, Any]]:
    """click's values of ``cmpx run`` -> the RunRequest, and the command line's own options (CLI_ONLY: -p,
    --debug, -v, -q) by name. The one mapping from command-line values to a request."""
    values = dict(values)
    cli = {name: values.pop(name) for name in CLI_ONLY}
    thresholds = {metric.name: values.pop(_threshold_param(metric.name))
                  for metric in plugins.metrics if _threshold_param(metric.name) in values}
    static = {name: values.pop(name) for name in list(values) if name in RunRequest.__dataclass_fields__}
    request = RunRequest(**static, thresholds={k: v for k, v in thresholds.items() if v}, backend_options=values)
    return request, cli


def request_from_words(words: Sequence[str], plugins: PluginSet) -> tuple[RunRequest, dict[str, Any]]:
    """The words a user would type after ``cmpx run`` (the model and options) -> what ``request_from_values``
    returns, parsed by the very command ``cmpx run`` is (same options, multi-value forms and defaults), without
    running it. A word the command refuses is a UsageError with click's message. ``plugins`` must be those the
    words' own ``-p`` options load (cmpx.options.argv.prescan finds them)."""
    words = list(words)
    if {"-h", "--help"} & set(words[:words.index("--")] if "--" in words else words):
        raise UsageError("--help is not an option of a run")
    command = build_run_command(plugins)
    try:
        context = command.make_context("run", words)
    except click.ClickException as exc:
        raise UsageError(exc.format_message()) from None
    return request_from_values(plugins, context.params)
