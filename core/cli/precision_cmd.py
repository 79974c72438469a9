"""``cmpx precision MODEL --backend onnxrt:fp16 --reference onnxrt [run options] -o kept.txt``: the command line of
cmpx.precision. Its own options are -o, --max-candidates and --strategy; every other word is parsed by ``cmpx
run``'s own command (the same options, forms and checks). Imports nothing heavy until it runs."""

from __future__ import annotations

import sys

import click

from cmpx.options import completion

PRECISION_HELP = """Find the fewest nodes to keep in float32 (NAME:fp16, NAME:bf16) or to leave unquantized
(NAME:int8, NAME:fp8) so that the reduced-precision model passes against the reference, and write them to -o, one
per line, as --keep-fp32 @FILE or --no-quantize @FILE reads them, with the transformed model beside it
(kept.txt -> kept.fp16.onnx).

\b
The nodes are ranked by one run with every tensor marked and --local-error (the first divergence, then the nodes
that fail on their own); the kept set grows along that ranking, then shrinks by delta debugging until each node
kept is needed: at most 2*ceil(log2 N) + k*(2*ceil(log2 N) + 3) + 1 candidates for k nodes kept of N. When most
nodes fail on their own it starts from all kept instead and drops groups by halves, the least suspect first: at
most min(N + N/2, k*(2*ceil(log2 N) + 8)). Each candidate is a whole run in fresh workers (a crash is one more
failing observation), compared against the reference's outputs computed once (--live-reference: the reference
runs on every candidate). Ctrl-C writes the smallest set seen passing so far. Every option of 'cmpx run' applies
(tolerances, data, shapes, metrics...), except those naming files one run would write.

\b
Exit codes: 0 the list was written and the model passes with it, 1 no set of kept nodes makes it pass, 2 bad
usage, 3 a backend cannot run the model, 130 interrupted.

\b
Example:
  cmpx precision model.onnx --backend onnxrt:fp16 --reference onnxrt --atol 1e-3 -o kept.txt
"""


@click.command("precision", help=PRECISION_HELP,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("-o", "--output", required=True, metavar="LIST.txt", shell_complete=completion.paths(),
              help="where to write the node list (the transformed model goes beside it)")
@click.option("--max-candidates", type=click.IntRange(min=1), metavar="N",
              help="run at most N candidates, then keep the smallest set seen passing [default: the search's bound]")
@click.option("--strategy", type=click.Choice(["search", "bisect"]), default="search", show_default=True,
              help="search: grow along the ranking, then shrink; bisect: the shortest passing prefix of the ranking "
                   "(fewer candidates, more nodes kept)")
@click.option("--live-reference", is_flag=True,
              help="run the reference backend on every candidate too, not once for the whole search (for a reference "
                   "that may give other outputs on each run; a --data-loader-script keeps it live anyway)")
@click.argument("words", nargs=-1, type=click.UNPROCESSED, metavar="MODEL --backend NAME:fp16 --reference NAME [RUN OPTIONS]",
                shell_complete=completion.paths())
def precision_command(output: str, max_candidates: int | None, strategy: str, live_reference: bool,
                      words: tuple[str, ...]) -> int:
    from cmpx.cli.invocation import invocation
    from cmpx.options.grammar import request_from_words
    from cmpx.precision.driver import search_precision
    from cmpx.precision.request import PrecisionOptions
    from cmpx.printable import printable
    from cmpx.reports.terminal import PipeSafeEcho, terminal_width
    from cmpx.reports.text_lines import wrapped

    here = invocation(click.get_current_context())
    request, cli = request_from_words(list(words), here.plugins)
    options = PrecisionOptions(request, output, max_candidates, strategy, verbose=cli["verbose"] > 0,
                               live_reference=live_reference)
    width = terminal_width(sys.stdout)  # a terminal's lines wrap at word boundaries; a pipe's stay whole
    out = PipeSafeEcho()  # a reader gone (| head) ends the lines, not the search
    return int(search_precision(options, here.plugins, here.settings,
                                lambda text: out(wrapped(printable(text), width))))
