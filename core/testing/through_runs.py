"""Differential checks through whole ``cmpx.run`` calls, for cmpx.testing.differential: the inputs read from a
saved file, the outputs saved and read back, in every format cmpx writes and reads.

``check_saved_formats`` runs one model with its inputs three times: ``--backend X --backend X`` fed from an ONNX
test-data directory, saving inputs and outputs as a cmpx run (``check_twice``); ``--backend X`` fed from that cmpx
run, saving Polygraphy JSON and comparing against the saved cmpx run and the test-data directory's ``output_K.pb``; and
``--backend X`` fed from a Polygraphy per-iteration directory, comparing against the Polygraphy JSON outputs.
Every pair must pass at ``--atol 0 --rtol 0`` with a largest absolute error of 0, and every tensor saved or
read back must be the framework's bytes (widened to float32 in Polygraphy JSON, where types numpy lacks are
written so, see cmpx.saved.polygraphy_writer).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from cmpx.testing.framework_api import difference, rebuilt

if TYPE_CHECKING:
    from cmpx.transport.forking import ForkServers

EXACT: dict[str, Any] = {"atol": 0.0, "rtol": 0.0, "nan_equal": True, "infinities_compare_equal": True}


def saved_iteration(path: str, kind: str = "outputs") -> dict[str, dict[str, Any]]:
    """Iteration 0 of every source of a saved file (``open_saved``), structures rebuilt as Python values."""
    from cmpx.saved.opening import open_saved
    from cmpx.structured import Structured

    saved = open_saved(path, kind)
    return {source.name: {name: rebuilt(value) if isinstance(value, Structured) else np.array(value)
                          for name, value in source.load(0).items()} for source in saved.sources}


def widened(value: Any) -> Any:
    """A value as Polygraphy JSON holds it: arrays of types numpy lacks (bfloat16, float8, int4...) as float32."""
    from cmpx.dtypes import is_extension

    if isinstance(value, list):
        return [widened(item) for item in value]
    if isinstance(value, dict):
        return {key: widened(item) for key, item in value.items()}
    if isinstance(value, np.ndarray) and is_extension(value.dtype):
        return value.astype(np.float32)
    return value


def differences(expected: Mapping[str, Any], actual: Mapping[str, Any], what: str) -> list[str]:
    """Every output of ``expected`` that ``actual`` lacks or holds other bytes of, in words."""
    found = []
    for name, value in expected.items():
        if name not in actual:
            found.append(f"{what}: {name} missing (it has {sorted(actual)[:8]})")
        elif (problem := difference(value, actual[name])) is not None:
            found.append(f"{what}: {name}: {problem}")
    return found


def exact_pairs(report: Any, what: str) -> list[str]:
    """Why ``report`` is not a pass of every pair with a largest absolute error of 0 (empty if it is)."""
    problems = [f"{what}: {error}" for error in report.failures.values()]
    if not report.tallies:
        problems.append(f"{what}: nothing compared")
    for tally in report.tallies:
        if not tally.passed or tally.worst_abs != 0:
            problems.append(f"{what}: {tally.backend} vs {tally.reference}: passed={tally.passed}, max abs "
                            f"{tally.worst_abs}")
    return problems


def write_test_data_outputs(outputs: Mapping[str, Any], directory: str) -> bool:
    """The framework's outputs as ``output_K.pb`` beside the inputs of an ONNX test-data set (written by ONNX's
    numpy_helper); False, writing nothing, if one of them is not a tensor."""
    from onnx import numpy_helper, save_tensor

    if not all(isinstance(value, np.ndarray) and not value.dtype.hasobject for value in outputs.values()):
        return False
    for position, (name, array) in enumerate(outputs.items()):
        save_tensor(numpy_helper.from_array(array, name), os.path.join(directory, f"output_{position}.pb"))
    return True


def check_twice(backend: str, model: str, test_data: str, inputs: Mapping[str, np.ndarray],
                expected: Mapping[str, Any], directory: str, **options: Any) -> list[str]:
    """``--backend X --backend X`` on ``model`` fed from ``test_data`` (its ONNX test-data directory, holding
    ``inputs``), saving its inputs and outputs as cmpx runs in ``directory``: it must pass at ``--atol 0 --rtol 0``
    with a largest absolute error of 0, and both outputs saved must be ``expected`` (what the framework returns);
    the problems found, in words."""
    import cmpx

    path = lambda name: os.path.join(directory, name)  # noqa: E731
    # cmpx refuses a test-data set without input_K.pb files (a model without inputs): then nothing is fed
    fed: dict[str, Any] = {"load_inputs": test_data} if inputs else {}
    first = cmpx.run(model, [backend, backend], **fed, save_inputs=path("inputs"), save_outputs=path("outputs"),
                     **{**EXACT, **options})
    problems = exact_pairs(first, f"{backend} twice")
    if problems:
        return problems
    problems += differences(inputs, saved_iteration(path("inputs"), "inputs")["inputs"], "saved cmpx inputs")
    saved = saved_iteration(path("outputs"))
    for name in (backend, f"{backend}#2"):
        problems += differences(expected, saved.get(name, {}), f"{name} saved as a cmpx run")
    return problems


def check_saved_formats(backend: str, model: str, test_data: str, inputs: Mapping[str, np.ndarray],
                        expected: Mapping[str, Any], directory: str, **options: Any) -> list[str]:
    """The three runs of the module docstring on ``model`` (the first is ``check_twice``); the problems found,
    in words."""
    import cmpx

    path = lambda name: os.path.join(directory, name)  # noqa: E731
    options = {**EXACT, **options}
    has_outputs = write_test_data_outputs(expected, os.path.join(test_data, "test_data_set_0"))
    problems = check_twice(backend, model, test_data, inputs, expected, directory, **options)
    if problems:
        return problems
    loaded = [path("outputs")] + ([test_data] if has_outputs else [])
    # Polygraphy's JSON holds tensors only: a sequence output is saved to a cmpx run alone (cmpx refuses the JSON)
    second = cmpx.run(model, [backend], load_inputs=path("inputs"), save_inputs=path("inputs.json"),
                      save_outputs=path("outputs.json") if has_outputs else None, load_outputs=loaded, **options)
    problems += exact_pairs(second, f"{backend} against the saved cmpx run and test-data outputs")
    problems += differences(widened(dict(inputs)), saved_iteration(path("inputs.json"), "inputs")["inputs"],
                            "Polygraphy JSON inputs")
    if has_outputs:
        problems += differences(widened(dict(expected)), saved_iteration(path("outputs.json")).get(backend, {}),
                                "Polygraphy JSON outputs")
    kept = all(widened(array).dtype == array.dtype for array in inputs.values())
    if has_outputs and kept:  # (inputs of types numpy lacks come back as float32: not the model's inputs)
        os.makedirs(path("per-iteration"))
        shutil.copy(path("inputs.json"), path("per-iteration/0.json"))
        third = cmpx.run(model, [backend], load_inputs=path("per-iteration"), load_outputs=[path("outputs.json")],
                         **options)
        problems += exact_pairs(third, f"{backend} fed from a Polygraphy directory")
    return problems


def marked_model(model_path: str, names: list[str], path: str) -> list[str]:
    """Write the model at ``model_path`` (its external weights read in) to ``path`` with ``names`` added to its
    outputs, as ONNX itself does it: typed from ONNX's shape inference where it knows the type, untyped
    otherwise. Independent of cmpx's own marking (cmpx.model.graph.expose); returns every output's name."""
    import onnx

    model = onnx.load(model_path)
    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {value.name: value for value in inferred.graph.value_info}
    existing = [output.name for output in model.graph.output]
    for name in names:
        if name not in existing:
            model.graph.output.append(typed.get(name) or onnx.helper.make_empty_tensor_value_info(name))
            existing.append(name)
    onnx.save(model, path)
    return existing


def check_model(backend: str, model: str, directory: str, sliced: bool = True,
                slice_options: Mapping[str, Any] | None = None,
                fork_servers: ForkServers | None = None) -> tuple[list[str], dict[str, int]]:
    """A model's differential check on ``backend`` through whole runs: ``--backend X --backend X`` (its inputs
    saved, fed to the framework's API as they are), then ``--mark-all`` against the framework running the marked
    model itself (cmpx.testing.through_runs.marked_model), then, if ``sliced``, ``--mark-all`` cut into slices by a
    ``--memory-budget`` of a quarter of what the marked tensors take, against the unsliced run (both with
    ``slice_options`` when given: ONNX Runtime's layout optimizations of level ``all`` compute a node otherwise
    in a slice than amid its neighbours, see tests/test_differential.py). Returns the problems found, in words,
    and counts: ``outputs`` and ``marked`` tensors found identical, ``slices`` run. Raises what the framework's
    API raises on the model (then nothing of cmpx's was checked against it). ``fork_servers``: as ``cmpx.run``'s."""
    import cmpx
    from cmpx.testing.framework_api import run_plain

    path = lambda name: os.path.join(directory, name)  # noqa: E731
    counts = {"outputs": 0, "marked": 0, "slices": 0}
    twice = cmpx.run(model, [backend, backend], save_inputs=path("inputs"), save_outputs=path("outputs"), **EXACT,
                     fork_servers=fork_servers)
    feeds = saved_iteration(path("inputs"), "inputs")["inputs"]
    expected = run_plain(backend, model, feeds)
    problems = exact_pairs(twice, f"{backend} twice")
    saved = saved_iteration(path("outputs")) if os.path.exists(path("outputs")) else {}
    for name in (backend, f"{backend}#2"):
        problems += differences(expected, saved.get(name, {}), name)
    counts["outputs"] = len(expected) if not problems else 0
    marked = cmpx.run(model, [backend], mark_all=True, load_inputs=path("inputs"), save_outputs=path("marked"),
                      **EXACT, fork_servers=fork_servers)
    problems += [f"--mark-all: {error}" for error in marked.failures.values()]
    if marked.failures:
        return problems, counts
    names = marked_model(model, list(marked.plan.mark), path("marked.onnx"))
    expected = run_plain(backend, path("marked.onnx"), feeds, outputs=names)
    values = saved_iteration(path("marked"))[backend]
    problems += differences(expected, values, "--mark-all")
    counts["marked"] = sum(1 for name in marked.plan.mark if name in expected and name in values
                           and difference(expected[name], values[name]) is None)
    if sliced:
        # the shapes given too: with --load-inputs alone, a model's dynamic dimensions leave the marked tensors'
        # sizes unknown, counted as 0, and the run is not sliced (tests/test_differential.py has it as an xfail)
        shapes = {name: list(array.shape) for name, array in feeds.items()}
        budget = sum(value.nbytes for value in values.values() if isinstance(value, np.ndarray)) // 4
        if slice_options:
            whole = cmpx.run(model, [backend], mark_all=True, load_inputs=path("inputs"), input_shapes=shapes,
                             save_outputs=path("whole"), **slice_options, **EXACT, fork_servers=fork_servers)
            problems += [f"unsliced with {slice_options}: {error}" for error in whole.failures.values()]
            values = saved_iteration(path("whole"))[backend] if not whole.failures else values
        cut = cmpx.run(model, [backend], mark_all=True, memory_budget=budget, load_inputs=path("inputs"),
                       input_shapes=shapes, save_outputs=path("sliced"), **dict(slice_options or {}), **EXACT,
                       fork_servers=fork_servers)
        problems += [f"sliced: {error}" for error in cut.failures.values()]
        counts["slices"] = cut.plan.slicing.count if cut.plan.slicing is not None else 0
        if counts["slices"] < 2:
            problems.append(f"--memory-budget {budget} did not slice the run")
        if not cut.failures:
            problems += differences(values, saved_iteration(path("sliced"))[backend], "sliced against unsliced")
    return problems, counts
