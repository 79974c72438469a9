"""The second checks of a run, against the model and the saved files, and the RunPlan they produce: what the
coordinator executes. Raises UsageError (or ModelError) for anything wrong, naming the problem and the fix."""

from __future__ import annotations

import fnmatch
import itertools
import os
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cmpx.options.argtypes import ValueRange, check_names
from cmpx.comparison.oracle import oracle_of
from cmpx.comparison.output_map import resolve_output_map
from cmpx.comparison.pairing import check_reference, comparison_pairs, instance_names
from cmpx.errors import BackendFailed, CmpxError, ModelError, RemoteTraceback, UsageError, bounded
from cmpx.loaders.options import DataOptions
from cmpx.loaders.preparing import Feeds, check_input_sizes, fed_shapes, fitted, input_map_of, peeked, \
    warn_widened
from cmpx.model.info import ModelInfo, TensorSpec, read_model
from cmpx.model.shapes import resolve_input_shapes
from cmpx.plan import BackendPlan, RunPlan, SavedBackend
from cmpx.lifecycle.preflight import Preflight
from cmpx.options.request import RunRequest

if TYPE_CHECKING:
    from cmpx.model.value_ranges import InputRange


def build_plan(checked: Preflight, warn: Callable[[str], None], scratch: str | None = None,
               described: ModelInfo | None = None) -> tuple[RunPlan, Feeds | None]:
    """Return the plan and its feeds (the first one already made, so that a failing data source fails before any
    inference). ``described``: the model's inputs and outputs as a backend described them, for a model in its
    own format (``checked.model_format``); ``scratch``: where transformed models go without --save-transformed.
    """
    request, plugins, backends = checked.request, checked.plugins, checked.backends
    if checked.model_format is not None:
        if described is None:
            raise ValueError(f"a {checked.model_format} model must be described by its backend before planning")
        model: ModelInfo | None = described
    else:
        model = _read_model(request, backends)
    saved = _saved_backends(request, model, warn)
    names = [b.name for b in backends] + [b.name for b in saved]
    if not backends and len(names) < 2:
        raise UsageError(f"cmpx run needs a --backend to run, or at least two saved runs to compare (got "
                         f"{len(names)}); available backends: {', '.join(plugins.backends.names())}")
    check_reference(request.reference, names)
    oracle = oracle_of(backends, saved)
    graph, mark, excluded = _marking(request, model, bool(saved) and checked.model_format is None)
    _check_marking(request, backends, names, mark, warn, oracle)
    output_names = ([s.name for s in model.outputs] + list(mark)) if model else _saved_output_names(saved)
    what = ("model outputs" + (" and marked tensors" if mark else "")) if model else "saved outputs"
    for option, values in checked.per_output_options.items():
        check_names(option, values.overrides, output_names, what)
    output_map = resolve_output_map(checked.output_map, output_names)
    if model is not None:
        warn_widened(request, model, warn)
        check_names("--output-map", output_map, output_names, what)
        check_names("--postprocess", checked.postprocess.by_output, output_names, what)
        for spec in model.outputs:
            if not spec.is_tensor and spec.name in checked.postprocess.by_output:
                raise UsageError(f"--postprocess {spec.name}:...: top-k applies to tensors, and {spec.name} is of "
                                 f"type {spec.value_type}")
            if not spec.is_tensor and spec.name not in excluded and (request.save_outputs or "").endswith(".json"):
                raise UsageError(f"--save-outputs {request.save_outputs}: Polygraphy's JSON holds tensors only, and "
                                 f"{spec.name} is of type {spec.value_type}; save to a directory (cmpx's format keeps "
                                 f"its structure), or leave it out with --onnx-exclude-outputs {spec.name}")

    feeds: Feeds | None = None
    inputs: Sequence[TensorSpec] = ()
    iterations: int | None = None
    dropped: list[tuple[BackendPlan, BackendFailed]] = []
    ranges: list[InputRange] = []
    first: Mapping[str, Any] = {}
    model_file = model.path if model is not None else None  # the file the backends and transforms load
    if model is not None and request.external_data_dir:
        from cmpx.model.external import external_data_view

        if scratch is None:
            raise UsageError("--external-data-dir needs the run's scratch space (run it through cmpx run or "
                             "cmpx.run())")
        model_file = external_data_view(model.path, request.external_data_dir, scratch, warn)
    elif model is not None and backends:
        _check_external_files(model)
    if model is not None and backends:
        check_names("--val-range", checked.ranges, [spec.name for spec in model.inputs], "model inputs")
        generates = checked.loader.generates
        inputs = resolve_input_shapes(model.inputs, checked.shapes, warn, fill_dynamic=generates, dims=checked.dims)
        if generates:
            check_input_sizes(inputs)
        if generates:
            from cmpx.loaders.synthetic import DEFAULT_INT_RANGE
            from cmpx.model.value_ranges import data_ranges

            ranges = data_ranges(model.path, model.inputs, checked.default_range, checked.ranges,
                                 DEFAULT_INT_RANGE)
        options = DataOptions(request.seed, request.iterations, checked.default_range, checked.ranges,
                              tuple(request.load_inputs), request.data_loader_script,
                              {r.input: ValueRange(r.low, r.high) for r in ranges})
        loader = checked.loader
        input_map = input_map_of(request.input_map, inputs)
        first, feeds = peeked(fitted(loader.factory(options).feeds(inputs), inputs, loader.name, warn, input_map),
                              loader.name)
        iterations = (request.iterations or 1) if generates else request.iterations

        def calibration(count: int) -> Feeds:
            fresh = loader.factory(replace(options, iterations=count)).feeds(inputs)
            return fitted(itertools.islice(fresh, count), inputs, loader.name, warn, input_map)

        backends, dropped = _transformed(checked, model_file or model.path, backends, calibration, scratch, warn, mark)
    elif saved:
        iterations = min(len(b.source) for b in saved)
        if request.iterations:
            iterations = min(iterations, request.iterations)
    if iterations is not None:
        for backend in saved:
            if len(backend.source) > iterations:
                warn(f"{backend.name} ({backend.path}) holds {len(backend.source)} iteration(s) and this run compares "
                     f"{iterations}; give --iterations {len(backend.source)} (with --load-inputs of the run that "
                     "saved it, or the same --seed) to compare them all")
            if len(backend.source) < iterations:
                raise UsageError(f"--load-outputs {backend.path}: {backend.name} holds {len(backend.source)} "
                                 f"iteration(s) but this run makes {iterations}; use --iterations "
                                 f"{len(backend.source)}")
    local_error_dir = _local_error_dir(request, mark, names, backends, scratch, oracle)
    slicing = None
    if model is not None and backends and mark:
        from cmpx.slicing.planning import plan_slicing

        slicing = plan_slicing(model, fed_shapes(inputs, first), backends, mark, checked.memory_budget, scratch, warn,
                               model_file)
    plan = RunPlan(model, inputs, backends, request.reference, checked.comparison, checked.timeouts,
                   validate=request.validate, saved_backends=saved,
                   save_inputs=request.save_inputs, save_outputs=request.save_outputs, iterations=iterations,
                   mark=mark, graph=graph, show_unmatched=request.show_unmatched, dropped=dropped,
                   output_map=output_map, postprocess=checked.postprocess, warm_up=request.warm_up,
                   model_file=model_file, local_error_dir=local_error_dir, data_ranges=ranges, excluded=excluded,
                   slicing=slicing, oracle=oracle,
                   mark_all=bool(mark) and _marks_all(request))
    return plan, feeds


def _check_external_files(model: ModelInfo) -> None:
    """The files a model keeps its weights in are inside its directory (where every backend looks), before any
    backend starts, for every backend alike: a location outside it (absolute, ``..``, a symbolic link leading out)
    is refused, and a missing one is an error naming --external-data-dir."""
    from cmpx.userfiles import inside

    directory = os.path.dirname(os.path.abspath(model.path))
    what = f"{model.path}: its external weights"
    for location in model.external_data:
        path = os.path.normpath(os.path.join(directory, location))
        if not os.path.isabs(location) and path.startswith(directory + os.sep) and not os.path.lexists(path):
            raise ModelError(f"{model.path} keeps weights in {location}, which is not beside it ({path} is missing); "
                             "put it there, or give --external-data-dir DIR, the directory that holds it")
        try:
            inside(directory, location, what)
        except UsageError as exc:
            raise ModelError(str(exc)) from None


def _marks_all(request: RunRequest) -> bool:
    """--mark-all, or --onnx-outputs naming every tensor (``mark all``, ``*``)."""
    words = list(request.onnx_outputs)
    return request.mark_all or words[:2] == ["mark", "all"] or "*" in words


def _local_error_dir(request: RunRequest, mark: Sequence[str], names: Sequence[str],
                     backends: Sequence[BackendPlan], scratch: str | None, oracle: str | None) -> str | None:
    """--local-error needs marked tensors and a live backend compared against a reference; the reference's values
    of iteration 0 are kept in the run's scratch space."""
    if not request.local_error:
        return None
    if not mark:
        raise UsageError("--local-error measures each compared node: give --mark-all (or --onnx-outputs NAMES)")
    live = {b.name for b in backends}
    if not any(backend in live for backend, _ in comparison_pairs(names, request.reference, oracle)):
        raise UsageError("--local-error runs nodes on a live backend compared against a reference, and this run has "
                         "none (" + (", ".join(names) or "no backend") + "); add a --backend to run")
    if scratch is None:
        raise UsageError("--local-error needs the run's scratch space (run it through cmpx run or cmpx.run())")
    return os.path.join(scratch, "local-error")


QUANTIZED_TRANSFORMS = ("int8", "fp8")


def _check_marking(request: RunRequest, backends: Sequence[BackendPlan], names: Sequence[str], mark: Sequence[str],
                   warn: Callable[[str], None], oracle: str | None) -> None:
    """Marking changes some backends' fusion (a warning). A backend that cannot mark leaves its pairs with the
    model's outputs only: a warning naming them, and an error if every pair is affected or --strict-marking."""
    for backend in backends:
        marks_own = any(option.marks and backend.options.get(option.name) for option in backend.spec.options)
        if backend.spec.marking_changes_fusion and (mark or marks_own):
            warn(f"marking outputs changes {backend.name}'s layer fusion: the marked model can compute differently "
                 "from the unmarked one")
        elif backend.spec.marking_changes_qdq_fusion and mark and backend.transform in QUANTIZED_TRANSFORMS:
            warn(f"marking tensors of {backend.name}'s quantized graph stops it fusing Q/DQ pairs into quantized "
                 "kernels: the marked model can compute other numbers than the unmarked one (compare the model "
                 "outputs without marking for the numbers it gives in deployment)")
    unable = [b.name for b in backends if not b.spec.supports_marking]
    if not mark or not unable:
        return
    pairs = comparison_pairs(list(names), request.reference, oracle)
    affected = [f"{b} vs {r}" for b, r in pairs if b in unable or r in unable]
    if not affected:
        return
    who = f"{', '.join(unable)} cannot mark tensors"
    if len(affected) == len(pairs):
        raise UsageError(f"{who}, so {', '.join(affected)} would compare only the model's outputs and no pair of "
                         "this run would compare a marked tensor; add a backend that can mark (e.g. --backend "
                         "onnxref) to compare with, or leave out --mark-all / --onnx-outputs")
    if request.strict_marking:
        raise UsageError(f"{who}, so {', '.join(affected)} would compare only the model's outputs "
                         "(--strict-marking); leave it out, or leave out --strict-marking to compare the other "
                         "pairs' marked tensors")
    verb = "compares" if len(affected) == 1 else "compare"
    warn(f"{who}: {', '.join(affected)} {verb} only the model's outputs, not the marked tensors "
         "(--strict-marking makes this an error)")


def _marking(request: RunRequest, model: ModelInfo | None, has_saved: bool
             ) -> tuple[Any, list[str], frozenset[str]]:
    """The model's tensor graph (for the first divergence), the intermediate tensors to mark, and the model
    outputs left out (--onnx-exclude-outputs naming an output: a sequence no backend compares, say)."""
    wants_marks = bool(request.onnx_outputs or request.mark_all)
    if model is None:
        if wants_marks or request.onnx_exclude_outputs:
            raise UsageError("marking tensors needs a MODEL: cmpx run MODEL --backend ... --mark-all")
        return None, [], frozenset()
    from cmpx.model.marking import excluded_outputs, expand_words, is_pattern, select_tensors

    exclude = expand_words("--onnx-exclude-outputs", request.onnx_exclude_outputs)
    outputs = [spec.name for spec in model.outputs] + [name for name, _ in model.unsupported]
    excluded, exclude = excluded_outputs(exclude, outputs, marking=wants_marks)
    for name, why in model.unsupported:
        if name not in excluded:
            raise ModelError(f"output {name!r} of {model.path} {why}; leave it out with --onnx-exclude-outputs "
                             f"{name}")
    if not set(outputs) - excluded:
        raise UsageError("--onnx-exclude-outputs leaves out every output of the model; nothing would be compared")
    if not (wants_marks or has_saved):
        return None, [], excluded
    from cmpx.model.graph import load_structure, tensor_graph

    graph = tensor_graph(load_structure(model.path))
    if not wants_marks:
        return graph, [], excluded
    words = expand_words("--onnx-outputs", request.onnx_outputs) + (["*"] if request.mark_all else [])
    words = [word for word in words if word not in outputs]  # a model output is compared anyway, of any type
    markable = graph.markable()
    exclude = [word for word in exclude if not is_pattern(word) or fnmatch.filter(markable, word)
               or not fnmatch.filter(outputs, word)]  # a pattern that only matched outputs has done its job
    selected = select_tensors("--onnx-outputs", words, exclude, markable,
                              hint=f"list them with: cmpx tensors {model.path}", unmarkable=graph.unmarkable())
    return graph, [name for name in selected if name not in outputs], excluded


def _transformed(checked: Preflight, model_file: str, backends: Sequence[BackendPlan], calibration: Any,
                 scratch: str | None, warn: Callable[[str], None], mark: Sequence[str]
                 ) -> tuple[list[BackendPlan], list[tuple[BackendPlan, BackendFailed]]]:
    """Make each transformed model once and point the backends that run it at it. A transform that fails on the
    model fails the backends that would run it (returned apart, with their errors), not the whole run. Marked
    tensors that a transformed graph no longer computes (fused away) are noted on its backends."""
    from cmpx.transforms.options import transform_options

    request = checked.request
    wanted = list(dict.fromkeys(b.transform for b in backends if b.transform))
    if not wanted:
        return list(backends), []
    directory = request.save_transformed or scratch
    if directory is None:
        raise UsageError("transformed models need a directory: give --save-transformed DIR")
    from cmpx.model.graph import check_external_data, produced

    if not request.external_data_dir:  # (the view made for --external-data-dir checked its data files already)
        check_external_data(model_file)
    os.makedirs(directory, exist_ok=True)
    options = transform_options(request.keep_fp32, request.no_quantize, request.calibration_iterations,
                                request.calibration_cache)
    made, failed = {}, {}
    stem = os.path.splitext(os.path.basename(model_file))[0]
    for name in wanted:
        path = os.path.join(directory, f"{stem}.{name}.onnx")
        try:
            transform = checked.plugins.transforms[name].factory(options)
            transform.apply(model_file, path, calibration)
        except CmpxError:
            raise  # a problem with what the user gave (a calibration cache, a disk): exit 2, before anything runs
        except Exception as exc:  # the transform itself failed on this model: those backends fail, others go on
            failed[name] = (f"the {name} transform failed: {type(exc).__name__}: {exc}", traceback.format_exc())
            continue
        if getattr(transform, "calibrated_from_cache", False):
            warn(f"{name}: calibrated ranges read from {request.calibration_cache} (delete it to recalibrate)")
        absent: frozenset[str] = frozenset()
        if mark:
            import onnx

            absent = frozenset(mark) - produced(onnx.load(path, load_external_data=False))
        made[name] = (path, absent)
    runnable, dropped = [], []
    for backend in backends:
        if backend.transform in failed:
            message, remote = failed[backend.transform]
            error = BackendFailed(backend.name, "transform", bounded(message, 2000))
            error.__cause__ = RemoteTraceback(remote)
            dropped.append((backend, error))
        elif backend.transform:
            runnable.append(replace(backend, model_path=made[backend.transform][0],
                                    absent_marks=made[backend.transform][1]))
        else:
            runnable.append(backend)
    return runnable, dropped


def _read_model(request: RunRequest, backends: Sequence[BackendPlan]) -> ModelInfo | None:
    if request.model is not None:
        return read_model(request.model)
    if backends:
        raise UsageError("live backends need a MODEL: cmpx run MODEL --backend ...")
    if not request.load_outputs:
        raise UsageError("give a MODEL to run, or --load-outputs to compare saved runs")
    return None


def _saved_backends(request: RunRequest, model: ModelInfo | None, warn: Callable[[str], None]) -> list[SavedBackend]:
    if not request.load_outputs:
        return []
    from cmpx.saved.opening import open_saved

    fallback = [spec.name for spec in model.outputs] if model else ()
    found = []
    for path in request.load_outputs:
        label = os.path.splitext(os.path.basename(os.path.normpath(path)))[0]
        saved = open_saved(path, "outputs", fallback)
        if not saved.complete:
            warn(f"--load-outputs {path} was not completed (the run that saved it was interrupted, or its disk "
                 f"filled); it holds {max((len(s) for s in saved.sources), default=0)} iteration(s)")
        if not saved.sources:  # Polygraphy writes a RunResults of no runner when its own inference failed
            raise UsageError(f"--load-outputs {path}: holds no backend's outputs (no iteration was saved; Polygraphy "
                             "writes a RunResults of no runner when its inference failed): nothing to compare "
                             "against; save the outputs again")
        for source in saved.sources:
            if not len(source):
                raise UsageError(f"--load-outputs {path}: {source.name} holds no iteration (the run that saved it "
                                 "made none, or failed first): nothing to compare against; save the outputs again")
            found.append((f"{source.name}@{label}", source, path))
    unique = instance_names([name for name, _, _ in found])
    return [SavedBackend(name, source, path) for name, (_, source, path) in zip(unique, found)]


def _saved_output_names(saved: Sequence[SavedBackend]) -> list[str]:
    names: dict[str, None] = {}
    for backend in saved:
        if len(backend.source):
            names.update(dict.fromkeys(backend.source.load(0)))
    return list(names)
