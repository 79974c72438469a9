"""``cmpx reduce``'s steps: check the options, run the whole model (its verdict decides what "fails" means),
save the reference's values of every tensor, search (cmpx.reduce.search) with each candidate in fresh workers,
write the smallest failing subgraph with its inputs and the reference's outputs, and check that the written run
fails by itself.

Exit codes: 1 a failing subgraph was written (and fails by itself), 0 the whole model passes (or does not fail the
way --fail-on asks), 2 bad usage, 3 the backends cannot run the model at all (nothing to compare, no values to feed
candidates, or a backend failure kept that shows as well on a node unlike those kept: the backend fails on any
model), 5 a subgraph was written but does not fail by itself against the saved outputs (not reproduced).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cmpx.errors import ExitCode, UsageError
from cmpx.outcome.report_data import RunInterrupted
from cmpx.reduce.command_lines import polygraphy_command
from cmpx.reduce.observe import FAIL_ON, FAILING, Observation, Observer, for_backends
from cmpx.options.words import command_line, request_words
from cmpx.options.table import COMPARISON

# what a reduced model needs to be run as it was checked, besides the comparison options: the transforms' settings
REPRODUCED = ("fp16", "bf16", "int8", "fp8", "keep_fp32", "no_quantize", "calibration_iterations",
              "calibration_cache")

if TYPE_CHECKING:
    from cmpx.plugin.manager import PluginSet, PluginSettings
    from cmpx.lifecycle.preflight import Preflight
    from cmpx.reduce.candidates import Candidate, CandidateMaker
    from cmpx.options.request import RunRequest

# Options cmpx reduce sets itself on the runs it makes, or that name files one run would write.
REFUSED = {"load_outputs": "the reference is a live backend", "mark_all": "it marks what it needs",
           "onnx_outputs": "it marks what it needs", "onnx_exclude_outputs": "it marks what it needs",
           "local_error": "run it on the reduced model", "report_json": "it runs many models",
           "junit": "it runs many models", "report_html": "it runs many models", "log_file": "it runs many models",
           "save_error_plots": "it runs many models", "save_transformed": "it runs many models"}


@dataclass(frozen=True)
class ReduceOptions:
    request: RunRequest  # the run, as cmpx run would take it
    output: str  # -o: the reduced model
    fail_on: str | None = None  # mismatch, crash, any; None: what the whole model showed
    verbose: bool = False  # each run's own report too
    shown: tuple[str, ...] = ()  # backend options' words, for the command printed to reproduce the result


@dataclass(frozen=True)
class Written:
    """Where the result goes and how it is checked."""

    inputs_run: str  # OUT.inputs, or --save-inputs (a .json path: Polygraphy's file)
    outputs_run: str  # OUT.outputs, or --save-outputs: the values backend's values of its outputs
    live: tuple[str, ...]  # the words of the backends that check it: all but the one whose values it holds
    request: RunRequest  # the request they check it with (their backends' options only)
    every: tuple[str, ...]  # every backend's words and options: the command comparing them live on what is written
    why: str | None = None  # what may make the saved values differ from the live ones


def reduce_model(options: ReduceOptions, plugins: PluginSet, settings: PluginSettings,
                 echo: Callable[[str], None]) -> ExitCode:
    """Run the reduction, printing progress through ``echo``; return the exit code (module docstring)."""
    from cmpx.lifecycle.preflight import preflight

    request = options.request
    checked = preflight(request, plugins, settings)
    _check(options, checked)
    started = time.monotonic()
    names = [b.name for b in checked.backends]
    echo(f"cmpx reduce | {request.model} | backends: {', '.join(names)} (reference {request.reference or names[-1]})"
         f" | fail on: {options.fail_on or 'what the full model shows'}")
    from cmpx.reports.terminal import Progress

    observer = Observer(plugins, settings, sum(1 for b in checked.backends if b.python is None),
                        Progress.for_terminal())
    observer.label("full model", started)
    try:
        return _reduce(options, checked, observer, echo, started)
    finally:
        observer.close()


def _reduce(options: ReduceOptions, checked: Preflight, observer: Observer, echo: Callable[[str], None],
            started: float) -> ExitCode:
    from cmpx.transport.runspace import RunSpace

    inputs_run, outputs_run = _outputs(options)
    # the runs cmpx reduce makes save nothing themselves: what it writes goes where --save-inputs/--save-outputs say
    options = replace(options, request=replace(options.request, save_inputs=None, save_outputs=None))
    request, fail_on = options.request, options.fail_on
    whole = observer(request, echo if options.verbose else None)
    for warning in whole.warnings:
        echo(f"warning: {warning}")
    if whole.error is not None:
        raise UsageError(whole.error)
    if whole.passed:
        echo(f"full model: passed ({whole.seconds:.1f} s)")
        echo(f"the full model passes: nothing to reduce (exit {int(ExitCode.PASSED)})")
        return ExitCode.PASSED
    fail_on = fail_on or ("any" if whole.mismatch and whole.failures else "crash" if whole.failures else "mismatch")
    echo(f"full model: {whole.verdict()} ({whole.seconds:.1f} s) | failing means: "
         f"{FAILING[fail_on]}{'' if options.fail_on else ' (what the full model showed)'}")
    for message in whole.messages:
        echo(f"  {message}")
    cannot = [n for n, (phase, _) in whole.failures.items() if phase == "start"]
    if cannot:
        echo(f"cannot reduce: {', '.join(cannot)} could not start, on any model "
             f"(exit {int(ExitCode.BACKEND_FAILED)})")
        return ExitCode.BACKEND_FAILED
    expected = dict(whole.failures)
    if not whole.shows(fail_on, {}):
        if fail_on == "crash":
            echo("the full model fails by a mismatch, not a crash: nothing to reduce for --fail-on crash "
                 f"(exit {int(ExitCode.PASSED)})")
            return ExitCode.PASSED
        echo("the full model shows no mismatch: a backend failed and nothing was compared; --fail-on crash reduces "
             f"that (exit {int(ExitCode.BACKEND_FAILED)})")
        return ExitCode.BACKEND_FAILED
    space = RunSpace()
    try:
        maker = _values(request, checked, whole, space.scratch_directory(), observer, echo)
        if maker is None:
            return ExitCode.BACKEND_FAILED
        source = maker.values.backend
        live = {b.name: word for b, word in zip(checked.backends, request.backends) if b.name != source}
        verifying = for_backends(request, checked, set(live))
        shown = tuple(request_words(verifying, (), [b.spec for b in checked.backends if b.name in live]))
        every = tuple(request_words(request, ("backends", "reference"), [b.spec for b in checked.backends]))
        marking = next(b.spec.marking_changes_fusion for b in checked.backends if b.name == source)
        why = (f"{source} computed its saved values with every tensor marked, which changes what it computes (its "
               "layer fusion)") if marking else None
        written = Written(inputs_run, outputs_run, tuple(live.values()), verifying, every, why)
        return _search(replace(options, shown=shown), maker, fail_on, expected, written, observer, echo, started)
    finally:
        space.close()


def _outputs(options: ReduceOptions) -> tuple[str, str]:
    """Where the reduced model's inputs and reference outputs go: --save-inputs and --save-outputs (cmpx runs, or
    Polygraphy's JSON for .json paths, which polygraphy run reads), by default OUT.inputs and OUT.outputs beside
    it."""
    stem = os.path.splitext(options.output)[0]
    return options.request.save_inputs or stem + ".inputs", options.request.save_outputs or stem + ".outputs"


def _check_saved_output(option: str, path: str, directory_ok: bool) -> None:
    from cmpx.outputs import check_directory_output, check_file_output

    if path.lower().endswith(".json"):
        check_file_output(option, path)
    else:
        check_directory_output(option, path, directory_ok)


def _check(options: ReduceOptions, checked: Preflight) -> None:
    """Usage errors, before anything runs."""
    from cmpx.comparison.pairing import check_reference
    from cmpx.model.info import read_model
    from cmpx.outputs import check_file_output

    request = options.request
    for name, why in REFUSED.items():
        if getattr(request, name):
            raise UsageError(f"cmpx reduce does not take --{name.replace('_', '-')} ({why})")
    if request.model is None:
        raise UsageError("cmpx reduce needs a MODEL: cmpx reduce MODEL --backend A --backend B -o reduced.onnx")
    if checked.model_format is not None:
        raise UsageError(f"cmpx reduce cuts ONNX models, and {request.model} is a {checked.model_format} model")
    read_model(request.model)  # missing, a directory, not ONNX: said now, not after the first run
    if len(checked.backends) < 2:
        raise UsageError("cmpx reduce compares backends: give at least two --backend")
    check_reference(request.reference, [b.name for b in checked.backends])
    _check_not_the_model(options.output, request.model)
    if not any(b.spec.supports_marking for b in checked.backends):
        raise UsageError("cmpx reduce feeds each candidate the values of its input tensors, which only a backend "
                         "that marks tensors gives; none of these does (" +
                         ", ".join(dict.fromkeys(b.spec.name for b in checked.backends)) + ")")
    if options.fail_on is not None and options.fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on {options.fail_on}: choose {', '.join(FAIL_ON)}")
    check_file_output("-o", options.output)
    inputs_run, outputs_run = _outputs(options)
    if len({os.path.realpath(p) for p in (options.output, inputs_run, outputs_run)}) < 3:
        raise UsageError("-o, --save-inputs and --save-outputs must name three different paths")
    _check_saved_output("--save-inputs" if request.save_inputs else "-o (its inputs)", inputs_run, True)
    _check_saved_output("--save-outputs" if request.save_outputs else "-o (its reference outputs)", outputs_run,
                        True)


def _check_not_the_model(output: str, model: str) -> None:
    """-o (and the weights file it may write beside it) must not overwrite the model or the files it reads."""
    from cmpx.model.external import external_locations
    from cmpx.model.graph import model_directory

    locations = external_locations(model)
    written = {os.path.realpath(output): "-o", os.path.realpath(output + ".data"): "-o's weights file (OUT.data)"}
    for path in [model, *(os.path.join(model_directory(model), location) for location in sorted(locations))]:
        what = written.get(os.path.realpath(path))
        if what is not None:
            raise UsageError(f"{what} would overwrite {path}, which the model being reduced reads; write the reduced "
                             "model elsewhere")


def _values(request: RunRequest, checked: Preflight, whole: Observation, scratch: str, observer: Observer,
            echo: Callable[[str], None]) -> CandidateMaker | None:
    """Run the backend whose values feed the candidates (the reference, else the first that ran the model and marks
    tensors) with every tensor marked; the maker of candidates from its values."""
    from cmpx.model.graph import load_structure
    from cmpx.model.subgraph import index_graph
    from cmpx.reduce.candidates import CandidateMaker, ReferenceValues, values_request
    from cmpx.saved.cmpx_format import read_cmpx_run

    words = dict(zip((b.name for b in checked.backends), request.backends))
    order = [request.reference or checked.backends[-1].name] + [b.name for b in checked.backends]
    marking = {b.name for b in checked.backends if b.spec.supports_marking}
    usable = [name for name in dict.fromkeys(order) if name in marking and name not in whole.failures]
    if not usable:
        echo("cannot reduce: no backend that marks tensors ran the full model, so there are no values to feed "
             f"candidates with (exit {int(ExitCode.BACKEND_FAILED)})")
        return None
    backend = usable[0]
    outputs, inputs = os.path.join(scratch, "values"), os.path.join(scratch, "values-inputs")
    observer.label("reference values", time.monotonic())
    seen = observer(values_request(for_backends(request, checked, {backend}), words[backend], outputs, inputs))
    if seen.error is not None or seen.failures:
        echo(f"cannot reduce: {backend} failed to compute every tensor of the model: {seen.error or seen.verdict()} "
             f"(exit {int(ExitCode.BACKEND_FAILED)})")
        return None
    saved = read_cmpx_run(outputs).sources
    values = ReferenceValues(backend, read_cmpx_run(inputs).sources[0], saved[0])
    echo(f"reference values: {len(values.names())} tensors (inputs included) of {values.iterations} iteration(s) "
         f"from {backend} ({seen.seconds:.1f} s)")
    model = request.model
    if model is None:
        raise UsageError("cmpx reduce needs the model to reduce")  # its command line always names one
    if request.external_data_dir:  # candidates take their weights from beside the model they are cut from
        from cmpx.model.external import external_data_view

        model = external_data_view(model, request.external_data_dir, scratch, lambda text: echo(f"warning: {text}"))
    index = index_graph(load_structure(model))
    return CandidateMaker(index, model, values, scratch)


def _search(options: ReduceOptions, maker: CandidateMaker, fail_on: str, expected: dict, written: Written,
            observer: Observer, echo: Callable[[str], None], started: float) -> ExitCode:
    """Search, then write the result and check that it fails by itself (exit 1), or say that it does not (exit 5)."""
    from cmpx.reduce.candidates import candidate_request
    from cmpx.reduce.search import reduce_nodes

    request = options.request
    total = len(maker.index.nodes)
    best = [list(range(total))]
    count = [0]
    crashed = [False]  # whether the smallest failing candidate so far failed by a backend failure, not a mismatch
    failed_any = [False]

    def fails(window, step: str) -> bool:
        count[0] += 1
        observer.label(f"candidate {count[0]} ({step}), {len(best[0])}/{total} nodes", started)
        candidate = maker.make(window, count[0])
        seen = observer(candidate_request(request, candidate, maker.index), echo if options.verbose else None)
        removed = [n for n in best[0] if n not in candidate.nodes] if step == "linear" else []
        what = f"without {', '.join(maker.index.node_label(n) for n in removed)}" if removed else \
            maker.describe(candidate.nodes)
        failed = seen.shows(fail_on, expected)
        if failed:
            best[0] = list(candidate.nodes)
            crashed[0] = not (fail_on != "crash" and seen.mismatch)
            failed_any[0] = True
        echo(f"candidate {count[0]} ({step}): {what}: {seen.outcome(fail_on, expected)} ({seen.seconds:.1f} s) | "
             f"nodes left: {len(best[0])}")
        for message in seen.uncounted_messages(fail_on, expected):
            echo(f"  {message}")
        return failed

    try:
        kept = maker.nodes(reduce_nodes(total, fails))
    except (KeyboardInterrupt, RunInterrupted):
        _interrupted(options, maker, best[0] if failed_any[0] else None, written, count[0], total, echo)
        raise
    if crashed[0]:
        checked = _fails_anywhere(options, maker, kept, count[0] + 1, expected, observer, echo)
        if checked is not None:
            count[0] += 1
        if checked:
            return ExitCode.BACKEND_FAILED
    if count[0] and not failed_any[0]:
        echo("no candidate failed as the full model does, so every node is kept")
    final = maker.make(kept, 0, options.output, written.inputs_run)
    structured = sorted(maker.values.structured() & set(final.outputs))
    if structured and written.outputs_run.lower().endswith(".json"):  # known only now: the reduced model's outputs
        instead = os.path.splitext(options.output)[0] + ".outputs"
        echo(f"warning: --save-outputs {written.outputs_run}: Polygraphy's JSON holds tensors only, and the reduced "
             f"model's output {structured[0]} is not one; its outputs go to {instead} (a cmpx run) instead")
        written = replace(written, outputs_run=instead)
    _write_outputs(maker, final, written.outputs_run)
    echo(f"wrote {options.output}, its inputs {written.inputs_run} and {maker.values.backend}'s outputs "
         f"{written.outputs_run}")
    observer.label("the written model", started)
    reproduced = _verify(options, maker, final, written, fail_on, expected, failed_any[0], observer, echo)
    echo(f"{count[0]} candidate(s) in {time.monotonic() - started:.1f} s; kept {len(kept)} of {total} node(s): "
         + ", ".join(maker.index.node_label(n) for n in kept))
    if not reproduced:
        echo(f"the written model does not reproduce the failure by itself (exit {int(ExitCode.NOT_REPRODUCED)})")
        return ExitCode.NOT_REPRODUCED
    return ExitCode.MISMATCH


def _interrupted(options: ReduceOptions, maker: CandidateMaker, smallest: list[int] | None, written: Written,
                 count: int, total: int, echo: Callable[[str], None]) -> None:
    """Ctrl-C during the search: the smallest failing subgraph seen is written (with its inputs and the reference's
    outputs), said to be unfinished and unchecked; reducing it again goes on from there."""
    if smallest is None:
        echo(f"interrupted after {count} candidate(s): none failed yet, nothing written")
        return
    final = maker.make(smallest, 0, options.output, written.inputs_run)
    _write_outputs(maker, final, written.outputs_run)
    echo(f"interrupted after {count} candidate(s): wrote the smallest failing subgraph seen, {len(smallest)} of "
         f"{total} node(s), to {options.output}, its inputs {written.inputs_run} and {maker.values.backend}'s "
         f"outputs {written.outputs_run} (not reduced to the end, nor checked by itself: cmpx reduce on it goes on)")


def _fails_anywhere(options: ReduceOptions, maker: CandidateMaker, kept: list[int], number: int, expected: dict,
                    observer: Observer, echo: Callable[[str], None]) -> bool | None:
    """Whether a backend failure kept is the backend's on any model, not this part's (a backend that cannot run
    here, such as TensorRT without a GPU, fails every candidate the same way, down to the first node): one more
    candidate, a node of an op type none of the kept nodes has, that needs none of them. True: said, exit 3;
    None: there is no such node, nothing ran."""
    from cmpx.reduce.candidates import candidate_request

    types = {maker.index.nodes[n].op_type for n in kept}
    other = next((n for n, node in enumerate(maker.index.nodes) if node.op_type not in types
                  and not set(maker.nodes([n])) & set(kept)), None)
    if other is None:
        return None
    candidate = maker.make([other], number)
    seen = observer(candidate_request(options.request, candidate, maker.index),
                    echo if options.verbose else None)
    echo(f"candidate {number} (check): {maker.describe(candidate.nodes)}, unlike the node(s) kept: "
         f"{seen.outcome('crash', expected)} ({seen.seconds:.1f} s)")
    if not seen.shows("crash", expected):
        return False
    echo(f"cannot reduce: {', '.join(sorted(seen.failures))} failed the same way on {maker.index.node_label(other)}"
         f" alone: it fails on any model, not because of a part of this one (exit {int(ExitCode.BACKEND_FAILED)})")
    return True


def _write_outputs(maker: CandidateMaker, candidate: Candidate, path: str) -> None:
    """The values backend's values of the candidate's outputs, every iteration, as a cmpx saved run."""
    from cmpx.saved.polygraphy_writer import run_writer

    writer = run_writer(path, "outputs", candidate.model, "cmpx reduce")
    try:
        for iteration in range(maker.values.iterations):
            outputs = [name for name in candidate.outputs if name in maker.known]
            writer.add(maker.values.backend, iteration, maker.values.load(iteration, outputs), None)
    finally:
        writer.close()


def _verify(options: ReduceOptions, maker: CandidateMaker, candidate: Candidate, written: Written, fail_on: str,
            expected: dict, failed_live: bool, observer: Observer, echo: Callable[[str], None]) -> bool:
    """Run what was written as a user would (the live backends against the saved reference outputs), with the
    candidates' comparison options, and say whether it fails by itself, with the command that does it."""
    from cmpx.reduce.candidates import candidate_request

    source, live, outputs_run = maker.values.backend, written.live, written.outputs_run
    label = f"{source}@{os.path.splitext(os.path.basename(os.path.normpath(outputs_run)))[0]}"
    compared = candidate_request(written.request, candidate, maker.index)
    check = replace(compared, backends=live, load_outputs=(outputs_run,), reference=label if len(live) > 1 else None)
    compares = request_words(check, (COMPARISON,)) + list(options.shown)
    command = "cmpx run " + command_line(
        request_words(check, ("model", "backends", *REPRODUCED, "load_inputs", "load_outputs", "reference"))
        + compares)
    seen = observer(check)
    if seen.shows(fail_on, expected):
        echo(f"reproduce: {command}  -> {seen.verdict()}")
        polygraphy = polygraphy_command(candidate.model, candidate.inputs_run, outputs_run, live, compares)
        if polygraphy:
            echo(f"with Polygraphy: {polygraphy}")
        return True
    together = "cmpx run " + command_line([*request_words(compared, ("model",)), *written.every,
                                           *request_words(compared, (*REPRODUCED, "load_inputs", COMPARISON))])
    shown = "passes" if seen.passed else f"could not run ({seen.error})" if seen.error is not None else \
        f"shows no failure that counts (failing means {FAILING[fail_on]}): {seen.showed()}"
    echo(f"not reproduced: against {source}'s saved outputs, {candidate.model} {shown}, though "
         + ("it failed with every backend live" if failed_live else "the full model failed") +
         (f"; {written.why}" if written.why else "") + f". Compare the backends live on it: {together}; or check "
         f"against the saved outputs: {command}")
    for message in seen.uncounted_messages(fail_on, expected):
        echo(f"  {message}")
    return False
