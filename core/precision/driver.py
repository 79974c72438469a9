"""``cmpx precision``'s steps: check the options; run the reduced-precision model with nothing kept (it must fail,
else there is nothing to search) and with every eligible node kept (it must pass, else no set will); rank the
nodes (cmpx.precision.ranking); search (cmpx.precision.search) with each candidate a whole run in fresh workers
(cmpx.reduce.observe, as ``cmpx reduce`` runs its candidates: a crash is one more failing observation); then write
the node list and check it by an independent run (cmpx.precision.result).

Exit codes: 0 a node list was written and the model passes with it, 1 no set of kept nodes makes it pass (or the
list written does not pass by itself), 2 bad usage, 3 a backend cannot run the model at all, 130 interrupted (the
best set found so far is written first).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from cmpx.errors import ExitCode, UsageError
from cmpx.outcome.report_data import RunInterrupted
from cmpx.precision.nodes import kept_option
from cmpx.precision.macs import fed_shapes
from cmpx.precision.reference import saved_reference
from cmpx.precision.request import Pair, PrecisionOptions, with_kept

if TYPE_CHECKING:
    from cmpx.lifecycle.preflight import Preflight
    from cmpx.options.request import RunRequest
    from cmpx.plugin.manager import PluginSet, PluginSettings
    from cmpx.precision.reference import SavedReference
    from cmpx.precision.result import Outcome
    from cmpx.reduce.observe import Observation, Observer

KINDS = ("fp16", "bf16", "int8", "fp8")
STRATEGIES = ("search", "bisect")  # bisect: the shortest passing prefix of the ranking, unshrunk (for comparison)
SHOWN_NAMES = 4  # node names on a candidate's progress line

# Options cmpx precision sets itself on the runs it makes, or that name files one run would write.
REFUSED = {"load_outputs": "the reference is a live backend", "mark_all": "it marks what it ranks nodes with",
           "onnx_outputs": "it marks what it ranks nodes with", "onnx_exclude_outputs": "it marks what it needs",
           "local_error": "it measures it itself", "report_json": "it runs many models",
           "junit": "it runs many models", "report_html": "it runs many models", "log_file": "it runs many models",
           "save_error_plots": "it runs many models", "save_transformed": "it writes the transformed model itself",
           "fp16": "name the transform on the backend: --backend NAME:fp16", "bf16": "use --backend NAME:bf16",
           "int8": "use --backend NAME:int8", "fp8": "use --backend NAME:fp8"}


class CandidateLimit(Exception):
    """--max-candidates were run."""


def search_precision(options: PrecisionOptions, plugins: PluginSet, settings: PluginSettings,
                     echo: Callable[[str], None]) -> ExitCode:
    """Run the search, printing progress through ``echo``; return the exit code (module docstring)."""
    from cmpx.lifecycle.preflight import preflight
    from cmpx.reduce.observe import Observer
    from cmpx.reports.terminal import Progress

    request = options.request
    if request.reference and request.reference not in request.backends and len(request.backends) == 1:
        options = replace(options, request=replace(request, backends=(*request.backends, request.reference)))
    checked = preflight(options.request, plugins, settings)
    pair = _check(options, checked)
    options = replace(options, request=replace(options.request, reference=pair.reference))  # whatever the order
    echo(f"cmpx precision | {options.request.model} | {pair.backend} against {pair.reference} | "
         f"{'keep in float32' if kept_option(pair.kind) == 'keep_fp32' else 'leave unquantized'}: the fewest nodes "
         "that make it pass")
    observer = Observer(plugins, settings, 1, Progress.for_terminal())
    try:
        with tempfile.TemporaryDirectory(prefix="cmpx-precision-") as scratch:
            reference = None if options.live_reference else saved_reference(options.request, checked, pair, scratch)
            return _search(options, pair, observer, echo, reference, fed_shapes(options.request, checked))
    finally:
        observer.close()


def _search(options: PrecisionOptions, pair: Pair, observer: Observer, echo: Callable[[str], None],
            reference: SavedReference | None, fed: dict[str, tuple[int, ...]]) -> ExitCode:
    from cmpx.model.graph import load_structure
    from cmpx.model.subgraph import index_graph
    from cmpx.precision.nodes import eligible_nodes
    from cmpx.precision.result import Outcome, finish

    request, started = options.request, time.monotonic()
    index = index_graph(load_structure(str(request.model)))
    eligible = eligible_nodes(index, pair.kind, pair.given)
    outcome = Outcome(index, eligible, pair, started, fed=fed)
    try:
        found = _kept(options, pair, observer, echo, outcome, reference)
    except (KeyboardInterrupt, RunInterrupted):
        outcome.interrupted(options.output, echo)
        raise
    if isinstance(found, ExitCode):
        return found
    kept, outcome = found
    return finish(options, outcome, kept, observer, echo)


def _kept(options: PrecisionOptions, pair: Pair, observer: Observer, echo: Callable[[str], None], outcome: Outcome,
          reference: SavedReference | None) -> ExitCode | tuple[list[str], Outcome]:
    """The runs before the search and the search: the nodes to keep and the outcome to write them with, or the
    exit code of a search that cannot start or ends with nothing passing."""
    from cmpx.precision.ranking import suspect_order
    from cmpx.precision.search import (SINGLES, bisect_prefix, candidate_bound, search_kept, shrink_bound,
                                       shrink_from_all)

    request, started, eligible, index = options.request, outcome.started, outcome.eligible, outcome.index
    total = len(eligible.names)
    say = echo if options.verbose else None
    compared = request if reference is None else reference.compare  # what every run but the ranking compares
    observer.spares = 1 if reference is not None else 2  # the workers started ahead for the next run
    if reference is not None:
        observer.label("reference", started)
        saved = _preliminary(observer(reference.save, say), f"the reference's outputs, saved once ({pair.reference} "
                             f"alone; the runs below compare against them as {reference.name})", echo)
        cannot = _cannot_run(saved, pair)
        if cannot:
            echo(f"cannot search: {cannot} (exit {int(ExitCode.BACKEND_FAILED)})")
            return ExitCode.BACKEND_FAILED
    observer.label("nothing kept", started)
    baseline = _preliminary(observer(compared, say), "nothing kept", echo)
    cannot = _cannot_run(baseline, pair)
    if cannot:
        echo(f"cannot search: {cannot} (exit {int(ExitCode.BACKEND_FAILED)})")
        return ExitCode.BACKEND_FAILED
    if baseline.passed:
        echo("it passes with nothing kept: nothing to search")
        return [], outcome
    if not total:
        echo(f"no node can be kept: the {pair.kind} transform changes no named node computing on floats here"
             f"{_unnamed(eligible.unnamed)} (exit {int(ExitCode.MISMATCH)})")
        return ExitCode.MISMATCH
    observer.label(f"all {total} kept", started)
    observer.spares = 2  # the workers started during this run serve the ranking, which runs both backends
    whole = observer(with_kept(compared, pair, eligible.names), say)
    # set before its line is said: Ctrl-C from then on writes every node until a candidate passes
    outcome.all_passed = whole.passed and whole.error is None
    whole = _preliminary(whole, f"all {total} nodes kept", echo)
    if not whole.passed:
        echo(f"keeping all {total} node(s) does not pass either: the failure is not the {pair.kind} transform's "
             "(compare the backends without it), or the tolerances are tighter than they agree on"
             f"{_unnamed(eligible.unnamed)} (exit {int(ExitCode.MISMATCH)})")
        return ExitCode.MISMATCH
    observer.label("ranking", started)
    observer.spares = 1 if reference is not None else 2
    ranking = observer(replace(request, mark_all=True, local_error=True))
    producers = {node.name: [index.nodes[index.producer[name]].name for name in node.input if name in index.producer]
                 for node in index.nodes if node.name}
    if ranking.error is not None or ranking.failures:
        echo(f"warning: the ranking run {ranking.verdict()}; the nodes it did not measure are tried in graph order")
    suspects = suspect_order(ranking.report, pair.backend, pair.reference, eligible.names, producers)
    echo(f"ranking: {suspects.measured} node(s) measured, {suspects.failing_alone} failing on their own; first "
         f"divergence: {suspects.first_divergence or 'none among them'} ({ranking.seconds:.1f} s)")
    from_all = options.strategy == "search" and 2 * suspects.failing_alone > total  # most nodes are needed
    outcome.bound = shrink_bound if from_all else candidate_bound
    how = (f", most failing on their own: shrinking from all kept, by halves, the least suspect first; at most "
           f"{shrink_bound(total, total)} candidates (min(N + 2N/{SINGLES}, k*(2*ceil(log2 N) + {2 * SINGLES})))"
           if from_all else f"; at most {candidate_bound(total, 1)} candidates if one is needed, "
           f"{candidate_bound(total, 3)} if 3 (2*ceil(log2 N) + k*(2*ceil(log2 N) + 3) + 1)")
    echo(f"search: {total} node(s) may be kept ({eligible.unnamed} unnamed cannot be){how}" +
         (f", --max-candidates {options.max_candidates}" if options.max_candidates else ""))
    passes = _candidate_runner(options, compared, pair, outcome, observer, echo)
    strategy = shrink_from_all if from_all else search_kept if options.strategy == "search" else bisect_prefix
    try:
        return strategy(suspects.order, passes), outcome
    except CandidateLimit:
        if outcome.best is None:
            echo(f"no candidate passed within --max-candidates {options.max_candidates} (exit "
                 f"{int(ExitCode.MISMATCH)})")
            return ExitCode.MISMATCH
        echo(f"stopped at --max-candidates {options.max_candidates}: the smallest set seen passing is kept (the "
             "search did not finish; some of its nodes may not be needed)")
        return outcome.best, replace(outcome, finished=False)


def _cannot_run(seen: Observation, pair: Pair) -> str | None:
    """Why no kept set can help, if so: the reference failed on the model itself, or a backend could not start."""
    if pair.reference in seen.failures:
        phase, kind = seen.failures[pair.reference]
        return f"the reference {pair.reference} failed on the model itself ({kind} during {phase}), not the transform"
    started = [name for name, (phase, _) in seen.failures.items() if phase == "start"]
    return f"{started[0]} could not start, on any model" if started else None


def _preliminary(seen: Observation, what: str, echo: Callable[[str], None]) -> Observation:
    """A run before the search: its verdict said; a run that could not be made is the user's problem (exit 2)."""
    for warning in seen.warnings:
        echo(f"warning: {warning}")
    if seen.error is not None:
        raise UsageError(seen.error)
    echo(f"{what}: {seen.verdict()} ({seen.seconds:.1f} s)")
    return seen


def _candidate_runner(options: PrecisionOptions, compared: RunRequest, pair: Pair, outcome: Outcome,
                      observer: Observer, echo: Callable[[str], None]) -> Callable[[Sequence[str], str], bool]:
    """``passes`` for the search: one run of ``compared`` (the user's run, its reference maybe saved) with those
    nodes kept, its line printed."""
    total = len(outcome.eligible.names)

    def passes(nodes: Sequence[str], step: str) -> bool:
        if options.max_candidates is not None and outcome.count >= options.max_candidates:
            raise CandidateLimit
        outcome.count += 1
        best = len(outcome.best) if outcome.best is not None else None
        observer.label(f"candidate {outcome.count} ({step}), {len(nodes)}/{total} kept, best "
                       f"{best if best is not None else '-'}", outcome.started)
        seen = observer(with_kept(compared, pair, nodes), echo if options.verbose else None)
        passed = seen.passed
        if passed and (outcome.best is None or len(nodes) < len(outcome.best)):
            outcome.best = list(nodes)
        shown = ", ".join(nodes[:SHOWN_NAMES]) + (f" and {len(nodes) - SHOWN_NAMES} more"
                                                  if len(nodes) > SHOWN_NAMES else "")
        best = len(outcome.best) if outcome.best is not None else None
        echo(f"candidate {outcome.count} ({step}): keep {len(nodes)}/{total} ({shown}): {seen.verdict()} "
             f"({seen.seconds:.1f} s) | best: {best if best is not None else '-'}")
        return passed

    return passes


def _check(options: PrecisionOptions, checked: Preflight) -> Pair:
    """Usage errors, before anything runs: which backend runs the transformed model, against which reference."""
    from cmpx.model.info import read_model
    from cmpx.outputs import check_file_output
    from cmpx.precision.result import not_the_model
    from cmpx.transforms.options import transform_options

    request = options.request
    for name, why in REFUSED.items():
        if getattr(request, name):
            raise UsageError(f"cmpx precision does not take --{name.replace('_', '-')} ({why})")
    if request.model is None:
        raise UsageError("cmpx precision needs a MODEL: cmpx precision MODEL --backend onnxrt:fp16 --reference "
                         "onnxrt -o kept.txt")
    if checked.model_format is not None:
        raise UsageError(f"cmpx precision transforms ONNX models, and {request.model} is a {checked.model_format} "
                         "model")
    read_model(request.model)
    transformed = [b for b in checked.backends if b.transform in KINDS]
    plain = [b for b in checked.backends if not b.transform]
    if len(transformed) != 1 or len(plain) != 1 or len(checked.backends) != 2:
        raise UsageError("cmpx precision compares one backend on a reduced-precision model with one on the model "
                         "itself: --backend NAME:fp16 (or :bf16, :int8, :fp8) and --reference NAME")
    if request.reference is not None and request.reference != plain[0].name:
        raise UsageError(f"--reference {request.reference}: the reference is the backend without a transform, "
                         f"{plain[0].name}")
    if options.strategy not in STRATEGIES:
        raise UsageError(f"--strategy {options.strategy}: choose {', '.join(STRATEGIES)}")
    if options.max_candidates is not None and options.max_candidates < 1:
        raise UsageError(f"--max-candidates {options.max_candidates}: give at least 1")
    check_file_output("-o", options.output)
    kind = str(transformed[0].transform)
    not_the_model(options.output, kind, str(request.model))
    words = transform_options(request.keep_fp32, request.no_quantize, 1, None)  # its @FILEs read now
    given = words.keep_fp32 if kept_option(kind) == "keep_fp32" else words.no_quantize
    return Pair(transformed[0].name, plain[0].name, kind, tuple(given), tuple(b.spec for b in checked.backends))


def _unnamed(count: int) -> str:
    """What the unnamed nodes the transform changes add to a 'no list passes' verdict: a list names nodes."""
    return (f"; {count} node(s) the transform changes have no name and no list can keep them (name the model's "
            "nodes)") if count else ""

