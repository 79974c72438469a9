"""The slicing of a run, decided in the coordinator once the model, the marked tensors and the input shapes are
known: the graph typed with the run's input shapes (so every tensor's size is known), the bytes the marked tensors
of every live backend would take at once, and, when that exceeds the budget, the slices of each backend's model,
written as models of their own in the run's scratch space."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cmpx.memory import default_memory_budget, size_text
from cmpx.slicing.cuts import Slice, cut, group_nodes

PAGE = 4096  # a worker places each large output on a page boundary
HALF_TRANSFORMS = ("fp16", "bf16")

if TYPE_CHECKING:
    from cmpx.model.info import ModelInfo, TensorSpec
    from cmpx.model.subgraph import GraphIndex
    from cmpx.plugin.registry import BackendSpec


class SlicedBackend(Protocol):
    """What slicing needs of a live backend of the run (a cmpx.plan.BackendPlan, which holds the SlicingPlan)."""

    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> BackendSpec: ...
    @property
    def transform(self) -> str | None: ...
    @property
    def model_path(self) -> str | None: ...


@dataclass(frozen=True)
class SlicedModel:
    """One model cut into slices (the run's model, or a backend's transformed one): the slices and their files."""

    path: str
    slices: tuple[Slice, ...]
    files: tuple[str, ...]
    compared: frozenset[str] = frozenset()  # the tensors of this model that are compared: marked, or its outputs
    out_bytes: tuple[int, ...] = ()  # per slice, the shared memory its outputs take (page-aligned): one chunk


@dataclass(frozen=True)
class SlicingPlan:
    """How a marked run is sliced. ``targets``: per slice, the tensors compared once it has run (the run's model's
    names); ``models``: each backend that runs slice by slice, with its model's slices; ``whole``: the live
    backends that run the whole model (they cannot run subgraphs, or their model cannot be cut)."""

    budget: int
    given: bool  # --memory-budget was given (else it is the default)
    needed: int  # bytes the marked tensors of every live backend would take at once, unsliced
    targets: tuple[tuple[str, ...], ...]
    models: Mapping[str, SlicedModel] = field(default_factory=dict)
    whole: tuple[str, ...] = ()
    unknown: int = 0  # compared tensors whose size is unknown (counted as 0)

    @property
    def count(self) -> int:
        return len(self.targets)

    def describe(self) -> dict[str, Any]:
        """For the JSON report."""
        return {"slices": self.count, "memory_budget": self.budget, "memory_budget_given": self.given,
                "unsliced_bytes": self.needed, "tensors": [list(t) for t in self.targets],
                "sliced_backends": sorted(self.models), "whole_backends": list(self.whole),
                "unknown_sizes": self.unknown}


def plan_slicing(model: ModelInfo, inputs: Sequence[TensorSpec], backends: Sequence[SlicedBackend],
                 mark: Sequence[str], budget: int | None, scratch: str | None,
                 warn: Callable[[str], None], model_file: str | None = None) -> SlicingPlan | None:
    """The slicing of a run that marks ``mark`` on ``backends``, or None when everything fits ``budget`` (bytes;
    None: the default, half the memory available now)."""
    marking = [b for b in backends if b.spec.supports_marking]
    if not mark or not marking:
        return None
    given = budget is not None
    budget = budget if budget is not None else default_memory_budget()
    if budget <= 0:
        return None
    source = model_file or model.path  # the file the backends load (--external-data-dir: a view beside the data)
    index = typed_index(source, inputs)
    returned = set(mark) | set(index.graph_outputs)
    sizes = tensor_sizes(index)
    per_backend = sum(sizes.get(name, 0) for name in returned)
    needed = per_backend * len(marking)
    if needed <= budget:
        return None
    groups = group_nodes(index, sizes, returned, budget // len(marking))
    targets = tuple(tuple(name for position in group for name in index.nodes[position].output if name in returned)
                    for group in groups)
    # a group that computes nothing compared (a lone Constant, an unmarked Shape) is no slice of its own: the slice
    # that reads its tensors computes it (a model with no outputs cannot be loaded)
    targets = tuple(target for target in targets if target)
    if len(targets) < 2:
        return None
    if scratch is None:
        warn(f"the marked tensors need {size_text(needed)}, over the memory budget of {size_text(budget)}, and "
             "slicing needs the run's scratch space (run through cmpx run or cmpx.run()); running whole")
        return None
    models: dict[str, SlicedModel] = {}
    made: dict[str, SlicedModel | str] = {}
    whole = []
    for backend in backends:
        path = backend.model_path or source
        if not (backend.spec.supports_marking and backend.spec.runs_subgraphs):
            whole.append(backend.name)
            if backend.spec.supports_marking:
                warn(f"{backend.name} cannot run subgraphs: it runs the whole model and holds its "
                     f"{size_text(per_backend)} of marked tensors at once, over this run's memory budget of "
                     f"{size_text(budget)} ({len(marking)} backend(s))")
            continue
        if path not in made:
            made[path] = _sliced(index if path == source else typed_index(path, inputs), path, targets, mark,
                                 os.path.join(scratch, "slices", str(len(made))))
        sliced = made[path]
        if isinstance(sliced, str):
            whole.append(backend.name)
            warn(f"{backend.name} runs the whole model: its model cannot be cut ({sliced})")
        else:
            models[backend.name] = sliced
    if not models:
        return None
    half = [name for name, plan in zip([b.name for b in backends], backends) if name in models
            and plan.transform in HALF_TRANSFORMS]
    if half:
        warn(f"{', '.join(half)} run(s) a 16-bit float graph in slices: each tensor crossing a cut is rounded to "
             "its 16-bit type, as the graph says, where a framework computing several 16-bit ops in float32 within "
             "one session (ONNX Runtime's CPU provider does) skips that rounding, so the statistics can differ "
             "slightly from an unsliced run's (see docs/per-layer.md)")
    unknown = sum(1 for name in returned if name not in sizes)
    return SlicingPlan(budget, given, needed, targets, models, tuple(whole), unknown)


def _sliced(index: GraphIndex, path: str, targets: Sequence[Sequence[str]], mark: Sequence[str],
            directory: str) -> SlicedModel | str:
    """``path`` cut to compute ``targets`` slice by slice, each slice written to ``directory``; or why not."""
    from cmpx.model.subgraph import write_subgraph

    compared = frozenset(name for name in mark if name in index.producer) | frozenset(index.graph_outputs)
    slices = cut(index, targets, compared)
    if isinstance(slices, str):
        return slices
    os.makedirs(directory, exist_ok=True)
    files = []
    for number, piece in enumerate(slices):
        file = os.path.join(directory, f"slice-{number}.onnx")
        write_subgraph(index, path, piece.nodes, {name: _typed(index, name) for name in (*piece.feeds, *piece.inputs)},
                       piece.outputs, file)
        files.append(file)
    sizes = tensor_sizes(index)
    out_bytes = tuple(sum(sizes.get(name, 0) + PAGE for name in piece.outputs) for piece in slices)
    return SlicedModel(path, tuple(slices), tuple(files), compared, out_bytes)


def _typed(index: GraphIndex, name: str) -> tuple[Any, list[Any] | None]:
    """(numpy dtype, shape) of a tensor as shape inference typed it."""
    from cmpx.dtypes import ONNX_TO_NUMPY, numpy_dtype
    from cmpx.model.graph import dim_value

    tensor = index.types[name].tensor_type
    shape = [dim_value(d) for d in tensor.shape.dim] if tensor.HasField("shape") else None
    return numpy_dtype(ONNX_TO_NUMPY[tensor.elem_type]), shape


def typed_index(path: str, inputs: Sequence[TensorSpec]) -> GraphIndex:
    """The model's graph indexed, its tensors typed by shape inference from the run's input shapes (external
    weights are not loaded)."""
    import onnx

    from cmpx.model.subgraph import index_graph

    model = onnx.load(path, load_external_data=False)
    shapes = {spec.name: spec.shape for spec in inputs if spec.shape is not None}
    for value in model.graph.input:
        shape = shapes.get(value.name)
        if shape is None or not value.type.HasField("tensor_type"):
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims) == len(shape):
            for dim, size in zip(dims, shape):
                if isinstance(size, int) and size >= 0:
                    dim.Clear()
                    dim.dim_value = size
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # inference is best effort: an untyped tensor has no size, and cannot cross a cut
        pass
    return index_graph(model)


def tensor_sizes(index: GraphIndex) -> dict[str, int]:
    """Bytes of every tensor whose type and shape are known."""
    from cmpx.dtypes import ONNX_TO_NUMPY, numpy_dtype

    sizes = {}
    for name, value in index.types.items():
        tensor = value.tensor_type if value.HasField("tensor_type") else None
        if tensor is None or tensor.elem_type not in ONNX_TO_NUMPY or not tensor.HasField("shape"):
            continue
        count = 1
        for dim in tensor.shape.dim:
            if not dim.HasField("dim_value") or dim.dim_value < 0:
                break
            count *= dim.dim_value
        else:
            sizes[name] = count * numpy_dtype(ONNX_TO_NUMPY[tensor.elem_type]).itemsize
    return sizes


def memory_note(plan: SlicingPlan) -> str:
    """``3 slices (memory budget 1.5 GiB, 6 GiB unsliced)`` for the run's header."""
    budget = f"memory budget {size_text(plan.budget)}" + ("" if plan.given else " (default)")
    return f"{plan.count} slices ({budget}; {size_text(plan.needed)} unsliced)"
