"""``cmpx tolerances MODEL --backend A --backend B [run options] -o FILE.toml``: measure A against B over many
seeded iterations and write the tolerances that pass them with a margin (cmpx.tolerances.noise_floor's method, written by
cmpx.tolerances.tolerance_file). Its own options are -o, --safety-factor and --floor; every other word is parsed by
``cmpx run``'s own command. Imports nothing heavy until it runs."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click

DEFAULT_ITERATIONS = 32
SAFETY_FACTOR = 4.0  # each tolerance is this many times the largest error measured (docs/tolerances.md)
ORACLE = "onnxref:fp64"  # the fp64 oracle: onnx.reference on the model in float64

TOLERANCES_HELP = f"""Measure how far --backend A is from --backend B (the reference) on MODEL over many seeded
iterations, and write per-output tolerances (atol, rtol, check statistic) that pass every measured element with
a margin, to -o FILE.toml for 'cmpx run --tolerances FILE.toml'.

\b
Per output: the largest relative error where |B| is at least a tenth of its root mean square, the largest
absolute error of the elements that rtol does not cover, each times the safety factor, and never below the
floor: B's own error against the fp64 oracle ({ORACLE}), or one float32 ulp without it. The file's comments
say every number used; docs/tolerances.md the method. Every option of 'cmpx run' applies (--input-shapes,
--seed, --iterations [default: {DEFAULT_ITERATIONS} of synthetic data], --check-error-stat STAT, backend options).

\b
Example:
  cmpx tolerances model.onnx --backend onnxrt:fp16 --backend onnxrt -o fp16.toml
  cmpx run model.onnx --backend onnxrt:fp16 --backend onnxrt --tolerances fp16.toml --seed 1000
"""


@click.command("tolerances", help=TOLERANCES_HELP,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("-o", "--output", required=True, metavar="FILE.toml", help="where to write the tolerance file")
@click.option("--safety-factor", type=float, default=SAFETY_FACTOR, show_default=True, metavar="S",
              help="each tolerance is S times the largest error measured (1 or more)")
@click.option("--floor", type=click.Choice(["oracle", "ulp"]),
              help=f"the least tolerance: B's error against the fp64 oracle ({ORACLE}), or one float32 ulp "
                   "[default: oracle when its transform is installed]")
@click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="MODEL --backend A --backend B [RUN OPTIONS]")
def tolerances_command(output: str, safety_factor: float, floor: str | None, words: tuple[str, ...]) -> int:
    from cmpx.cli.invocation import invocation
    from cmpx.printable import printable
    from cmpx.reports.terminal import PipeSafeEcho

    here = invocation(click.get_current_context())
    out = PipeSafeEcho()  # a reader gone (| head) ends the lines, not the measurement
    return derive(list(words), output, safety_factor, floor, here, lambda text: out(printable(text)))


def derive(words: list[str], output: str, factor: float, floor: str | None, here: Any,
           echo: Callable[[str], None]) -> int:
    """Check the words, run A, B (and the oracle) with their outputs saved, measure, write ``output``."""
    from cmpx.options.argtypes import check_stat, parse_per_output, quantile
    from cmpx.options.grammar import request_from_words
    from cmpx.errors import UsageError
    from cmpx.outputs import check_file_output

    request, _ = request_from_words(words, here.plugins)
    if len(request.backends) != 2:
        raise UsageError(f"cmpx tolerances measures one --backend against another: give exactly two (got "
                         f"{len(request.backends)}), e.g. --backend onnxrt:fp16 --backend onnxrt")
    for name in ("load_outputs", "tolerances", "atol", "rtol"):
        if getattr(request, name):
            raise UsageError(f"--{name.replace('_', '-')} is not an option of cmpx tolerances: it measures two live "
                             "backends and writes the tolerances (-o)")
    if not factor >= 1 or factor == float("inf"):
        raise UsageError(f"--safety-factor {factor}: give a number of 1 or more (the margin over the errors measured)")
    check = parse_per_output("--check-error-stat", request.check_error_stat, "elemwise", check_stat)
    q = parse_per_output("--error-quantile", request.error_quantile, 0.99, quantile)
    if check.overrides or q.overrides:
        raise UsageError("--check-error-stat / --error-quantile: give one bare value for cmpx tolerances (it "
                         "measures every output the same way)")
    check_file_output("-o", output)
    _check_replaceable(output)
    oracle = _oracle("oracle" if request.oracle and floor is None else floor, here.plugins, request.model)
    iterations = request.iterations
    if iterations is None and not (request.load_inputs or request.data_loader_script or request.data_loader):
        iterations = DEFAULT_ITERATIONS
    with tempfile.TemporaryDirectory(prefix="cmpx-tolerances-") as scratch:
        saved = request.save_outputs or os.path.join(scratch, "outputs")
        run = replace(request, backends=(*request.backends, *([ORACLE] if oracle else [])), iterations=iterations,
                      oracle=False, save_outputs=saved, check_error_stat=(), error_quantile=())
        report = _run(run, here, echo)
        from cmpx.tolerances.measure import measure_outputs

        header, entries, lines = measure_outputs(report, saved, check.default, q.default, factor, oracle)
    from cmpx.tolerances.tolerance_file import tolerance_file_text

    options = (f" --safety-factor {factor:g}" if factor != SAFETY_FACTOR else "") + (f" --floor {floor}" if floor
                                                                                     else "")
    header = [*header, f"command: cmpx tolerances {shlex.join(words)} -o {shlex.quote(output)}{options}"]
    text = tolerance_file_text(entries, header)
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise UsageError(f"-o {output}: cannot write it ({exc.strerror or exc})") from None
    for line in lines:
        echo(line)
    echo(f"wrote {output}: {len(entries)} output(s); use it with 'cmpx run ... --tolerances {output}'")
    return 0


def _check_replaceable(output: str) -> None:
    """-o replaces only a tolerance file cmpx wrote: never another file, a device or a pipe."""
    from cmpx.errors import UsageError
    from cmpx.tolerances.tolerance_file import FORMAT

    if not os.path.lexists(output):
        return
    if not os.path.isfile(output):
        raise UsageError(f"-o {output} exists and is not a regular file; give the path of a new .toml file")
    with open(output, "rb") as f:
        head = f.read(4096)
    if f'format = "{FORMAT}"'.encode() not in head:
        raise UsageError(f"-o {output} exists and is not a tolerance file cmpx wrote; choose a new path (cmpx "
                         "replaces only its own tolerance files)")


def _oracle(floor: str | None, plugins: Any, model: str | None) -> bool:
    """Whether the run adds the fp64 oracle: asked for, or by default where it is installed and the model is ONNX."""
    from cmpx.errors import UsageError

    name, transform = ORACLE.split(":")
    available = name in plugins.backends.names() and transform in plugins.transforms.names()
    if floor == "oracle" and not available:
        raise UsageError(f"--floor oracle needs the fp64 oracle ({ORACLE}: backend {name} with transform "
                         f"{transform}), which is not installed; use --floor ulp")
    if floor == "oracle" and not (model or "").lower().endswith(".onnx"):
        raise UsageError(f"--floor oracle: the fp64 oracle runs ONNX models, not {model}; use --floor ulp")
    available = available and (model or "").lower().endswith(".onnx")
    return available and floor != "ulp"


def _run(run: Any, here: Any, echo: Callable[[str], None]) -> Any:
    from cmpx.lifecycle.session import Session

    with Session(run, here.plugins, here.settings, warn=lambda message: echo(f"warning: {message}"),
                 pool=here.pool) as session:
        report = session.run()
    if report.failures:
        if ORACLE in report.failures:
            echo(f"hint: the fp64 oracle ({ORACLE}) gives the tolerances' floor and failed; measure without it "
                 "with --floor ulp (one float32 ulp)")
        raise next(iter(report.failures.values()))
    return report
