"""``cmpx reduce MODEL --backend A --backend B [run options] -o reduced.onnx``: the command line of cmpx.reduce.
Its own options are -o and --fail-on; every other word is parsed by ``cmpx run``'s own command (the same options,
forms and checks). Imports nothing heavy until it runs."""

from __future__ import annotations

import sys

import click

from cmpx.options import completion

REDUCE_HELP = """Cut MODEL down to the smallest subgraph that still fails when its --backend's are compared, and
write it to -o with its inputs and the reference's outputs as cmpx runs beside it (OUT.inputs, OUT.outputs), so
that 'cmpx run OUT --backend A --load-inputs OUT.inputs --load-outputs OUT.outputs' reproduces it.

\b
Bisection first (the end of the failing part, then its start), then a linear pass over what is left. Each
candidate's inputs are the reference's values of the tensors at its boundary (realistic data, not random), and
each candidate runs in fresh workers, so a crash is one more observation. Every option of 'cmpx run' applies
(tolerances, transforms such as --backend onnxrt:fp16, --onnxrt-optimization, --iterations...), except those
naming files one run would write.

\b
Exit codes: 1 a failing subgraph was written (it fails by itself), 0 the full model passes, 2 bad usage, 3 the
backends cannot run the model at all, 5 a subgraph was written but does not fail by itself against the saved
outputs (not reproduced), 130 interrupted.

\b
Example:
  cmpx reduce model.onnx --backend onnxrt:fp16 --backend onnxrt --atol 1e-3 --rtol 1e-3 -o reduced.onnx
"""


@click.command("reduce", help=REDUCE_HELP, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("-o", "--output", required=True, metavar="OUT.onnx", shell_complete=completion.paths(), help="where to write the reduced model")
@click.option("--fail-on", type=click.Choice(["mismatch", "crash", "any"]),
              help="what counts as failing: a mismatch, a backend failure (an error, crash or timeout in the same "
                   "phase as on the full model), or either [default: what the full model shows]")
@click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="MODEL --backend A --backend B [RUN OPTIONS]",
                shell_complete=completion.paths())
def reduce_command(output: str, fail_on: str | None, words: tuple[str, ...]) -> int:
    from cmpx.cli.invocation import invocation
    from cmpx.options.grammar import request_from_words
    from cmpx.printable import printable
    from cmpx.reduce.driver import ReduceOptions, reduce_model
    from cmpx.reports.terminal import PipeSafeEcho, terminal_width
    from cmpx.reports.text_lines import wrapped

    here = invocation(click.get_current_context())
    request, cli = request_from_words(list(words), here.plugins)
    options = ReduceOptions(request, output, fail_on, verbose=cli["verbose"] > 0)
    width = terminal_width(sys.stdout)  # a terminal's lines wrap at word boundaries; a pipe's stay whole
    out = PipeSafeEcho()  # a reader gone (| head) ends the lines, not the reduction
    return int(reduce_model(options, here.plugins, here.settings,
                            lambda text: out(wrapped(printable(text), width))))
