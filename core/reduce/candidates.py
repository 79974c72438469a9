"""One candidate of ``cmpx reduce``: a subgraph of the model, written with its inputs — the reference's values of
the tensors at its boundary, every iteration — as a cmpx saved run, and the run request that compares it.

A window of nodes grows into a candidate with the nodes it needs where the reference has no value of a tensor it
reads (Constant nodes, tensors shape inference could not type). Its outputs are the tensors it computes that the
rest of the model reads, or that are model outputs: what it hands on, as in the whole model (so a fusion that
breaks the model is kept whole in the candidate), each of the type the model gives it: a sequence, map or optional
(a ZipMap's output) stays one, and is never an input (a candidate that reads one computes it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cmpx.model.subgraph import GraphIndex, boundary, closure, write_subgraph
from cmpx.tolerances.tolerance_file import PER_OUTPUT_FIELDS, merged_words

if TYPE_CHECKING:
    from cmpx.options.request import RunRequest
    from cmpx.saved.model import SavedSource


@dataclass(frozen=True)
class ReferenceValues:
    """What the values run saved: the model's inputs and every tensor the values backend computed (marked), per
    iteration, each loaded (memory-mapped) only when a candidate needs it."""

    backend: str  # the backend that computed them
    inputs: SavedSource
    tensors: SavedSource

    @property
    def iterations(self) -> int:
        return min(len(self.inputs), len(self.tensors))

    def names(self) -> set[str]:
        return set(self.inputs.load(0)) | set(self.tensors.load(0)) if self.iterations else set()

    def structured(self) -> set[str]:
        """The names whose values are sequences, maps or optionals (cmpx.structured), not tensors."""
        if not self.iterations:
            return set()
        return {name for name, value in {**self.inputs.load(0), **self.tensors.load(0)}.items() if _structured(value)}

    def load(self, iteration: int, names: Iterable[str]) -> dict[str, Any]:
        inputs, tensors = self.inputs.load(iteration), self.tensors.load(iteration)
        return {name: inputs[name] if name in inputs else tensors[name] for name in names}


@dataclass(frozen=True)
class Candidate:
    number: int
    nodes: Sequence[int]  # positions in graph order, the window and what it needs
    inputs: Sequence[str]
    outputs: Sequence[str]
    model: str
    inputs_run: str  # a cmpx saved run (kind inputs) with every iteration's inputs


class CandidateMaker:
    """Makes candidates of the model ``index`` (read from ``model_path``) under ``directory``."""

    def __init__(self, index: GraphIndex, model_path: str, values: ReferenceValues, directory: str):
        self.index = index
        self.model_path = model_path
        self.values = values
        self.directory = directory
        self.known = values.names()
        # a sequence, map or optional (a ZipMap's output) is compared, never fed: a candidate that reads one computes
        # it, as a graph input can only be a tensor of the reference's values
        self.feedable = self.known - values.structured() - {name for name in self.known if index.is_structured(name)}

    def nodes(self, window: Iterable[int]) -> list[int]:
        """The window and the nodes it needs (what the reference has no tensor value of)."""
        return closure(self.index, window, self.feedable)

    def make(self, window: Iterable[int], number: int, model: str | None = None, inputs_run: str | None = None,
             inline_limit: int | None = None) -> Candidate:
        """Write candidate ``number``: the subgraph to ``model`` and its inputs to ``inputs_run`` (by default in a
        directory of its own under this maker's directory)."""
        from cmpx.saved.polygraphy_writer import run_writer

        nodes = self.nodes(window)
        inputs, outputs = boundary(self.index, nodes)
        outputs = [name for name in outputs if name in self.known] or outputs
        if model is None or inputs_run is None:
            folder = os.path.join(self.directory, f"candidate-{number}")
            os.makedirs(folder, exist_ok=True)
            model, inputs_run = os.path.join(folder, "model.onnx"), os.path.join(folder, "inputs")
        shapes: dict[str, Any] = {}
        writer = run_writer(inputs_run, "inputs", model, "cmpx reduce")  # a .json path: Polygraphy's file
        try:
            for iteration in range(self.values.iterations):
                arrays = self.values.load(iteration, inputs)
                for name, array in arrays.items():
                    dtype, shape = shapes.get(name, (array.dtype, tuple(array.shape)))
                    shapes[name] = (dtype, _common(shape, array.shape))
                writer.add("inputs", iteration, arrays, None)
        finally:
            writer.close()
        # outputs shape inference did not type are tensors of the reference's dtype; the others keep the model's
        # types, sequences, maps and optionals included (cmpx.model.subgraph)
        reference = self.values.load(0, [name for name in outputs if name in self.known])
        types = {name: value.dtype for name, value in reference.items() if not _structured(value)}
        extra = {} if inline_limit is None else {"inline_limit": inline_limit}
        write_subgraph(self.index, self.model_path, nodes, shapes, outputs, model, output_types=types, **extra)
        return Candidate(number, nodes, inputs, outputs, model, inputs_run)

    def describe(self, nodes: Sequence[int]) -> str:
        """``3 nodes (Conv_0 .. Relu_2)``, or the node itself."""
        if len(nodes) == 1:
            return f"1 node: {self.index.node_label(nodes[0])}"
        first, last = self.index.nodes[nodes[0]], self.index.nodes[nodes[-1]]
        return f"{len(nodes)} nodes ({first.name or first.op_type} .. {last.name or last.op_type})"


def _structured(value: Any) -> bool:
    return getattr(value, "skeleton", None) is not None  # a cmpx.structured.Structured


def _common(shape: tuple[Any, ...], other: Sequence[int]) -> tuple[Any, ...]:
    """A shape that fits both: a dimension that differs between iterations is left open."""
    if len(shape) != len(other):
        return tuple(None for _ in other)
    return tuple(a if a == b else None for a, b in zip(shape, other))


def candidate_request(request: RunRequest, candidate: Candidate, index: GraphIndex) -> RunRequest:
    """The user's run, on the candidate: its inputs loaded from the candidate's saved run (no synthetic data or
    shapes), per-output options kept for the outputs it has, ``--keep-fp32`` kept for the nodes and op types it has
    (the others were cut away with their nodes: naming them would be an error), output maps dropped (every backend
    runs the same subgraph, so names agree), weights inside the candidate or beside it. --no-quantize is kept as
    --keep-fp32 is; an @FILE of either is read here."""
    outputs = set(candidate.outputs)
    only_model_outputs = outputs <= set(index.graph_outputs)
    present = {label for n in candidate.nodes for label in (index.nodes[n].name, index.nodes[n].op_type)}
    if request.tolerances is not None:  # its values as words, so that those of outputs the candidate lacks go
        words, _ = merged_words(request.tolerances, {field: getattr(request, field) for field in PER_OUTPUT_FIELDS})
        fields: dict[str, Any] = dict(words)  # RunRequest fields, each given words
        request = replace(request, tolerances=None, **fields)

    def kept(words: Sequence[str], bare: bool = True) -> tuple[str, ...]:
        return tuple(w for w in words if (":" in w and w.rsplit(":", 1)[0] in outputs) or (":" not in w and bare))

    return replace(request, model=candidate.model, load_inputs=(candidate.inputs_run,), data_loader=None,
                   data_loader_script=None, input_shapes=(), val_range=(), seed=1, output_map=(),
                   external_data_dir=None, keep_fp32=_present("--keep-fp32", request.keep_fp32, present),
                   no_quantize=_present("--no-quantize", request.no_quantize, present),
                   atol=kept(request.atol), rtol=kept(request.rtol), check_error_stat=kept(request.check_error_stat),
                   error_quantile=kept(request.error_quantile),
                   postprocess=kept(request.postprocess, bare=only_model_outputs),
                   thresholds={metric: kept(words) for metric, words in request.thresholds.items()})


def _present(option: str, words: Sequence[str], present: set[str]) -> tuple[str, ...]:
    from cmpx.transforms.options import NODE_LIST
    from cmpx.userfiles import expand_list_files

    return tuple(word for word in expand_list_files(option, words, NODE_LIST) if word in present)


def values_request(request: RunRequest, backend_word: str, outputs: str, inputs: str) -> RunRequest:
    """The run that gives the reference's values: that backend alone, every tensor marked, inputs and outputs
    saved."""
    return replace(request, backends=(backend_word,), reference=None, mark_all=True, onnx_outputs=(),
                   onnx_exclude_outputs=(), save_outputs=outputs, save_inputs=inputs, fail_fast=False,
                   validate=False, output_map=(), postprocess=())

