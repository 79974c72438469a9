"""``cmpx run``: built per invocation, because each registered backend adds its own options."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import tempfile
from typing import Any

import click

from cmpx.cli.argv import expand_multi_values, is_number
from cmpx.argtypes import CHECK_STATS
from cmpx.cli.grouped_help import GroupedCommand, GroupedOption
from cmpx.plugins import PluginSet, PluginSettings

MODEL_SUFFIXES = (".onnx", ".engine", ".plan")  # a model path ends a list of saved files


def _per_output_number(word: str) -> bool:
    return ":" in word or is_number(word)


# Options that take several space-separated values after one flag, and which words they accept.
MULTI_VALUE = {
    "--atol": _per_output_number,
    "--rtol": _per_output_number,
    "--error-quantile": _per_output_number,
    "--timeout": _per_output_number,
    "--check-error-stat": lambda w: ":" in w or w in CHECK_STATS,
    "--input-shapes": lambda w: ":" in w and "[" in w,
    "--val-range": lambda w: "[" in w,
    "--load-inputs": lambda w: not w.endswith(MODEL_SUFFIXES),
    "--load-outputs": lambda w: not w.endswith(MODEL_SUFFIXES),
    "--onnx-outputs": lambda w: not w.endswith(MODEL_SUFFIXES),
    "--keep-fp32": lambda w: not w.endswith(MODEL_SUFFIXES),
    "--onnx-exclude-outputs": lambda w: not w.endswith(MODEL_SUFFIXES),
}

BACKENDS, DATA, COMPARISON, LAYERS, PRECISION, REPORTS, EXECUTION = "Backends", "Data", "Comparison", \
    "Per-layer comparison", "Precision (--backend NAME:fp16|bf16|int8|fp8)", "Reports", "Execution and plugins"

RUN_HELP = """Run MODEL on every --backend with the same inputs and compare their outputs.

\b
By default each backend is compared with the next one, which is the reference (the relative error
divides by it); --reference NAME compares every other backend against NAME. A backend given twice is
named NAME#2. Outputs are paired by exact name.

\b
Exit codes: 0 all outputs passed, 1 a mismatch, 2 bad usage or input (found before any inference),
3 a backend failed (error, crash or timeout; the other backends are still compared).

\b
Example:
  cmpx run model.onnx --backend onnxrt --backend onnxref --input-shapes X:[1,3,224,224] --atol 1e-4
"""


def _names(names: list[str]):
    """Shell completion of a fixed list of names (cmpx's own completion: see the README)."""
    return lambda ctx, param, incomplete: [n for n in names if n.startswith(incomplete)]


class RunCommand(GroupedCommand):
    def __init__(self, *args: Any, multi_value: dict[str, Any], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.multi_value = multi_value

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, expand_multi_values(args, self.multi_value))


def build_run_command(plugins: PluginSet) -> click.Command:
    params: list[click.Parameter] = [
        click.Argument(["model"], metavar="[MODEL]", required=False),
        GroupedOption(["--backend", "backends"], multiple=True, metavar="NAME", group=BACKENDS,
                      shell_complete=_names(plugins.backends.names()),
                      help=f"a backend to run, in order; repeat for each; NAME:TRANSFORM runs it on a transformed model "
                           f"(onnxrt:fp16) [available: {', '.join(plugins.backends.names()) or 'none'}; transforms: "
                           f"{', '.join(plugins.transforms.names()) or 'none'}]"),
        GroupedOption(["--reference"], metavar="NAME", group=BACKENDS,
                      help="compare every other backend against this one (e.g. onnxref, or onnxrt#2)"),
        GroupedOption(["--seed"], type=int, default=1, show_default=True, group=DATA,
                      help="seed of the synthetic data; iteration i uses seed + i"),
        GroupedOption(["--iterations"], type=int, default=None, group=DATA,
                      help="number of input sets to run and compare [default: 1 for synthetic data, all of "
                           "loaded or scripted data]"),
        GroupedOption(["--input-shapes"], multiple=True, metavar="NAME:[D0,D1,...]", group=DATA,
                      help="shapes for inputs with dynamic dimensions, e.g. X:[1,3,224,224] Y:[1,10]"),
        GroupedOption(["--val-range"], multiple=True, metavar="[LO,HI] | NAME:[LO,HI]", group=DATA,
                      help="range of synthetic values [default: floats [0,1), integers [0,9] inclusive]"),
        GroupedOption(["--data-loader"], default=None, metavar="NAME", group=DATA,
                      help=f"where inputs come from [default: synthetic; available: "
                           f"{', '.join(plugins.data_loaders.names())}]"),
        GroupedOption(["--data-loader-script"], metavar="FILE.py[:FUNC]", group=DATA,
                      help="a Python function (default load_data) returning an iterable of {input name: array}"),
        GroupedOption(["--load-inputs"], multiple=True, metavar="PATH", group=DATA,
                      help="feed saved inputs: cmpx runs, Polygraphy JSON inputs, ONNX test-data directories"),
        GroupedOption(["--save-inputs"], metavar="DIR", group=DATA, help="save every iteration's inputs (cmpx run "
                      "directory)"),
        GroupedOption(["--load-outputs"], multiple=True, metavar="PATH", group=BACKENDS,
                      help="add saved outputs as backends after the live ones (named BACKEND@FILE): cmpx runs, "
                           "Polygraphy RunResults JSON, ONNX test-data directories"),
        GroupedOption(["--save-outputs"], metavar="DIR", group=BACKENDS,
                      help="save every live backend's outputs, every iteration (cmpx run directory)"),
        GroupedOption(["--atol"], multiple=True, metavar="[NAME:]VALUE", group=COMPARISON,
                      help="absolute tolerance; a bare value is the default, NAME:VALUE sets one output "
                           "[default: 1e-5]"),
        GroupedOption(["--rtol"], multiple=True, metavar="[NAME:]VALUE", group=COMPARISON,
                      help="relative tolerance, same forms as --atol [default: 1e-5]. An element fails only "
                           "if it exceeds both tolerances"),
        GroupedOption(["--check-error-stat"], multiple=True, metavar="[NAME:]STAT", group=COMPARISON,
                      help=f"statistic the tolerances apply to: {', '.join(CHECK_STATS)} [default: elemwise]"),
        GroupedOption(["--error-quantile"], multiple=True, metavar="[NAME:]Q", group=COMPARISON,
                      help="quantile for --check-error-stat quantile [default: 0.99]"),
        GroupedOption(["--compare"], multiple=True, metavar="METRIC", group=COMPARISON,
                      shell_complete=_names(plugins.metrics.names()),
                      help=f"metrics that must all pass [default: simple; available: "
                           f"{', '.join(plugins.metrics.names())}]"),
        GroupedOption(["--nan-equal"], is_flag=True, group=COMPARISON, help="NaN in both outputs counts as equal"),
        GroupedOption(["--infinities-compare-equal"], is_flag=True, group=COMPARISON,
                      help="equal infinities count as equal"),
        GroupedOption(["--validate"], is_flag=True, group=COMPARISON,
                      help="fail if any backend's output holds NaN or Inf"),
        GroupedOption(["--fail-fast"], is_flag=True, group=COMPARISON, help="stop at the first mismatching output"),
        GroupedOption(["--onnx-outputs"], multiple=True, metavar="NAME|PATTERN|@FILE", group=LAYERS,
                      help="also compare these intermediate tensors (ONNX-based backends): 'mark all' or '*' for "
                           "every one, names, fnmatch patterns, @file with one per line; see 'cmpx tensors MODEL'"),
        GroupedOption(["--onnx-exclude-outputs"], multiple=True, metavar="NAME|PATTERN|@FILE", group=LAYERS,
                      help="leave these out of --onnx-outputs / --mark-all"),
        GroupedOption(["--mark-all"], is_flag=True, group=LAYERS,
                      help="compare every intermediate tensor on every backend that can expose them, and report "
                           "the first diverging layer"),
        GroupedOption(["--show-unmatched"], is_flag=True, group=LAYERS,
                      help="list the marked tensors only one backend of a pair produced"),
        GroupedOption(["--save-error-plots"], metavar="DIR", group=REPORTS,
                      help="write a PNG per compared output with histograms of its errors (needs matplotlib: "
                           "pip install 'cmpx[plots]')"),
        GroupedOption(["--fp16", "precision_flag"], flag_value="fp16", group=PRECISION,
                      help="run TensorRT backends on the fp16 graph (others: --backend NAME:fp16)"),
        GroupedOption(["--bf16", "precision_flag"], flag_value="bf16", group=PRECISION,
                      help="run TensorRT backends on the bf16 graph"),
        GroupedOption(["--int8", "precision_flag"], flag_value="int8", group=PRECISION,
                      help="run TensorRT backends on the int8 Q/DQ graph"),
        GroupedOption(["--fp8", "precision_flag"], flag_value="fp8", group=PRECISION,
                      help="run TensorRT backends on the float8 (E4M3) Q/DQ graph"),
        GroupedOption(["--keep-fp32"], multiple=True, metavar="NODE|OP", group=PRECISION,
                      help="node names or op types the fp16/bf16 transforms leave in float32"),
        GroupedOption(["--calibration-iterations"], type=int, default=8, show_default=True, group=PRECISION,
                      help="feeds of the run's data used to calibrate int8 and fp8"),
        GroupedOption(["--calibration-cache"], metavar="PATH", group=PRECISION,
                      help="int8/fp8 calibrated ranges: read from PATH if it exists, written there otherwise"),
        GroupedOption(["--save-transformed"], metavar="DIR", group=PRECISION,
                      help="keep the transformed models (MODEL.fp16.onnx...) in DIR"),
        GroupedOption(["--report-json"], metavar="PATH", group=REPORTS,
                      help="write every pair, iteration and output with verdicts and statistics as JSON"),
        GroupedOption(["--junit"], metavar="PATH", group=REPORTS,
                      help="write a JUnit XML report: one test case per pair and output"),
        GroupedOption(["--timeout"], multiple=True, metavar="[BACKEND:]SECONDS", group=EXECUTION,
                      help="limit for each load and each inference; BACKEND:SECONDS for one backend (a name like "
                           "onnxrt, or onnxrt#2) [default: 600]. A backend past it is stopped (SIGTERM, then SIGKILL "
                           "2 s later) and reported; the others go on"),
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
    multi_value = dict(MULTI_VALUE, **{"--compare": lambda w: w in plugins.metrics})
    for metric in plugins.metrics:
        if getattr(metric.metric, "threshold", None) is None:
            continue
        flags = [f"--{name}-threshold" for name in (metric.name, *getattr(metric.metric, "aliases", ()))]
        multi_value.update(dict.fromkeys(flags, _per_output_number))
        params.append(GroupedOption(
            [*flags, f"threshold_{metric.name.replace('-', '_')}"], multiple=True, metavar="[NAME:]VALUE",
            group=COMPARISON, help=f"threshold of --compare {metric.name} [default: {metric.metric.threshold:g}]"))
    for spec in plugins.backends:
        for option in spec.options:
            if option.multiple:  # several values after one flag, as in Polygraphy (--trt-min-shapes X:[..] Y:[..])
                multi_value[spec.flag(option)] = lambda w: not w.endswith(MODEL_SUFFIXES)
            if option.is_flag:
                params.append(GroupedOption([spec.flag(option), spec.param(option)], is_flag=True, default=False,
                                            group=f"Backend {spec.name}", help=option.help))
                continue
            params.append(GroupedOption(
                [spec.flag(option), spec.param(option)], multiple=option.multiple, default=option.default,
                type=click.Choice(option.choices) if option.choices else option.type, group=f"Backend {spec.name}",
                help=option.help))

    def callback(**values: Any) -> int:
        return _run(plugins, values)

    return RunCommand("run", params=params, callback=callback, help=RUN_HELP, multi_value=multi_value,
                      short_help="Run a model on several backends and compare the outputs.")


def _run(plugins: PluginSet, values: dict[str, Any]) -> int:
    from cmpx.planning import RunRequest, build_plan, preflight

    settings: PluginSettings = click.get_current_context().find_root().obj["settings"]
    thresholds = {metric.name: values.pop(f"threshold_{metric.name.replace('-', '_')}")
                  for metric in plugins.metrics if f"threshold_{metric.name.replace('-', '_')}" in values}
    report_json, junit, plots = values.pop("report_json"), values.pop("junit"), values.pop("save_error_plots")
    request = RunRequest(
        model=values.pop("model"), backends=values.pop("backends"), reference=values.pop("reference"),
        seed=values.pop("seed"), iterations=values.pop("iterations"), input_shapes=values.pop("input_shapes"),
        val_ranges=values.pop("val_range"), data_loader=values.pop("data_loader"),
        data_loader_script=values.pop("data_loader_script"), load_inputs=values.pop("load_inputs"),
        load_outputs=values.pop("load_outputs"), save_inputs=values.pop("save_inputs"),
        save_outputs=values.pop("save_outputs"), atol=values.pop("atol"),
        rtol=values.pop("rtol"), check_error_stat=values.pop("check_error_stat"),
        error_quantile=values.pop("error_quantile"), compare=values.pop("compare"), thresholds=thresholds,
        nan_equal=values.pop("nan_equal"), infinities_compare_equal=values.pop("infinities_compare_equal"),
        validate=values.pop("validate"), fail_fast=values.pop("fail_fast"), timeout=values.pop("timeout"),
        onnx_outputs=values.pop("onnx_outputs"), onnx_exclude_outputs=values.pop("onnx_exclude_outputs"),
        mark_all=values.pop("mark_all"), show_unmatched=values.pop("show_unmatched"),
        precision_flag=values.pop("precision_flag"), keep_fp32=values.pop("keep_fp32"),
        calibration_iterations=values.pop("calibration_iterations"),
        calibration_cache=values.pop("calibration_cache"), save_transformed=values.pop("save_transformed"))
    debug = values.pop("debug")
    verbosity = max(0, 1 + values.pop("verbose") - (1 if values.pop("quiet") else 0))
    values.pop("plugin_args")
    request = dataclasses.replace(request, backend_options=values)  # what is left are the backends' own options
    checked = preflight(request, plugins, settings)
    if plots:
        from cmpx.reports.plots import check_plotting

        check_plotting()
    from cmpx.transport.supervisor import release_workers, start_workers

    # The workers start now, before anything heavy is imported here, and import their frameworks while this
    # process reads the model and makes data; if that finds a problem they are stopped before loading anything.
    ctx = click.get_current_context()
    workers = start_workers(checked.backends, settings, spares=ctx.find_root().obj.get("spares"))
    scratch = tempfile.mkdtemp(prefix="cmpx-transformed-")
    ctx.call_on_close(lambda: shutil.rmtree(scratch, ignore_errors=True))
    try:
        described = None
        if checked.model_format is not None:  # a model in its backends' own format: the first one describes it
            from cmpx.transport.describing import describe_model

            described = describe_model(workers, checked)
        plan, feeds = build_plan(checked, warn=lambda m: click.echo(f"warning: {m}", err=True), scratch=scratch,
                                 described=described)
        from cmpx.execution import RunInterrupted, execute
        from cmpx.reports.text import TextReporter, exit_code
        from cmpx.reports.terminal import Progress, colour_wanted
    except BaseException:
        release_workers(workers)
        raise
    reporter = TextReporter(click.echo, debug=debug, verbosity=verbosity, colour=colour_wanted(sys.stdout),
                            progress=Progress.for_terminal())
    reporter.started(plan)
    try:
        result = execute(plan, feeds, reporter, workers)
    except RunInterrupted as interrupted:
        reporter.summary(interrupted.result, interrupted=True)
        raise
    reporter.summary(result)
    code = exit_code(result)
    if report_json:
        from cmpx.reports.json_report import write_json_report

        write_json_report(report_json, plan, result, code)
    if junit:
        from cmpx.reports.junit import write_junit_report

        write_junit_report(junit, plan, result)
    if plots:
        from cmpx.reports.plots import write_error_plots

        written = write_error_plots(plots, result.pairs)
        click.echo(f"wrote {len(written)} error plot(s) to {plots}")
    return code
