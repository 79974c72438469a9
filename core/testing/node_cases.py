"""The ONNX operator test cases that ship with the ``onnx`` package (``onnx.backend.test.case.node``), as models
with their inputs, for differential tests (cmpx.testing.differential).

The wheel ships no data files for them: ``collect()`` builds every case in memory, as ONNX's own backend tests do
(about 1,900 cases; it takes 20 s or so, most of it in the pooling operators' Python reference). ``stratified``
picks the cheapest case of every operator; ``write_case`` writes a case as a model file beside an ONNX test-data
directory (``test_data_set_0/input_K.pb``), the layout ``--load-inputs`` reads.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

FULL_SET_VARIABLE = "CMPX_TEST_ALL_NODE_CASES"  # =1: differential tests take every case, not the sample


@dataclass(frozen=True)
class NodeCase:
    """One operator test case: its model, its inputs by graph input name (arrays; a list for a sequence, None for
    an empty optional), the operators its graph uses (subgraphs and local functions included), its cost (the
    bytes of its model, inputs and expected outputs), by which the cheapest case of an operator is chosen, and
    its traits: what the coordinator's side of cmpx handles differently (the dtypes of its inputs and outputs,
    0-d and empty tensors, sequences and optionals), e.g. ``in:bfloat16``, ``out:0-d``, ``out:sequence``."""

    name: str
    model: onnx.ModelProto
    inputs: dict[str, Any]
    operators: frozenset[str]
    cost: int
    traits: frozenset[str] = frozenset()

    @property
    def tensor_inputs(self) -> bool:
        """Whether every input is a numeric tensor (what cmpx can feed: it has no sequence, optional or string
        inputs)."""
        return all(isinstance(v, np.ndarray) and not v.dtype.hasobject and v.dtype.kind not in "USM"
                   for v in self.inputs.values())


def every_case_wanted(environ: dict[str, str] | None = None) -> bool:
    """Whether CMPX_TEST_ALL_NODE_CASES asks for the whole set."""
    return (os.environ if environ is None else environ).get(FULL_SET_VARIABLE, "").strip() not in ("", "0")


def collect() -> list[NodeCase]:
    """Every node test case of the installed onnx, in ONNX's order. Cheap after the first call (ONNX keeps them)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cases' own expected values overflow on purpose (casts, logs of 0)
        cases = collect_testcases()
    return [_case(case) for case in cases]


def _case(case: Any) -> NodeCase:
    inputs, outputs = case.data_sets[0]
    names = [value.name for value in case.model.graph.input]
    values = {name: _value(value) for name, value in zip(names, inputs)}
    expected = [_value(v) for v in outputs]
    cost = case.model.ByteSize() + sum(_nbytes(v) for v in values.values()) + sum(_nbytes(v) for v in expected)
    traits = {f"in:{t}" for v in values.values() for t in _traits(v)} | {f"out:{t}" for v in expected
                                                                            for t in _traits(v)}
    return NodeCase(case.name, case.model, values, frozenset(operators(case.model)), cost,
                    frozenset(traits | ({"no inputs"} if not values else set())))


def _traits(value: Any) -> list[str]:
    if value is None:
        return ["optional"]
    if isinstance(value, list):
        return ["sequence", *(t for item in value for t in _traits(item))]
    if isinstance(value, dict):
        return ["map"]
    array = np.asarray(value)
    traits = [str(array.dtype), *(["0-d"] if array.ndim == 0 else []), *(["empty"] if array.size == 0 else [])]
    if array.dtype.kind == "f" and array.size:
        traits += (["NaN"] if np.isnan(array).any() else []) + (["inf"] if np.isinf(array).any() else [])
    return traits


def _value(value: Any) -> Any:
    """A case's input or expected output as numpy: a TensorProto (the types numpy lacks) read by ONNX itself."""
    if isinstance(value, onnx.TensorProto):
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        return [_value(item) for item in value]
    if value is None or isinstance(value, dict):
        return value
    return np.asarray(value)


def _nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(item) for item in value)
    return 0


def operators(model: onnx.ModelProto) -> set[str]:
    """``domain::op_type`` of every node of the model: its graph, the graphs in attributes (If, Loop, Scan...) and
    its local functions; the default domain is written ``ai.onnx``."""
    found: set[str] = set()

    def walk(nodes: Iterable[onnx.NodeProto]) -> None:
        for node in nodes:
            found.add(f"{node.domain or 'ai.onnx'}::{node.op_type}")
            for attribute in node.attribute:
                for graph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                    walk(graph.node)

    walk(model.graph.node)
    for function in model.functions:
        walk(function.node)
    return found


def stratified(cases: Sequence[NodeCase], usable: Callable[[NodeCase], bool] | None = None, tries: int = 4,
               strata: Callable[[NodeCase], Iterable[str]] = lambda case: case.operators) -> list[NodeCase]:
    """For every operator (or other stratum: ``strata(case)`` names a case's), the cheapest case that has it
    (ties by name), in cost order. With ``usable``, the cheapest of the first ``tries`` cases of an operator that
    ``usable`` accepts (one a framework runs at all), so that an operator whose cheapest case a framework refuses
    is still covered where it can be; an operator none of whose tried cases is usable is covered by none."""
    ordered = sorted(cases, key=lambda case: (case.cost, case.name))
    chosen: dict[str, NodeCase] = {}
    covered: set[str] = set()
    for stratum in sorted({s for case in cases for s in strata(case)}):
        if stratum in covered:
            continue
        candidates = [case for case in ordered if stratum in strata(case)][:tries]
        for case in candidates:
            if case.name in chosen or usable is None or usable(case):
                chosen[case.name] = case
                covered |= set(strata(case))
                break
    return sorted(chosen.values(), key=lambda case: (case.cost, case.name))


def write_case(case: NodeCase, directory: str) -> tuple[str, str]:
    """Write ``case`` as ``directory/model.onnx`` and its inputs as ``directory/inputs/test_data_set_0/input_K.pb``
    (TensorProtos named after the graph's inputs); return the paths of the model and of the test-data directory.
    Only for cases with tensor inputs (``case.tensor_inputs``)."""
    from onnx import numpy_helper

    os.makedirs(os.path.join(directory, "inputs", "test_data_set_0"), exist_ok=True)
    model = os.path.join(directory, "model.onnx")
    onnx.save(case.model, model)
    data = os.path.join(directory, "inputs")
    for position, (name, array) in enumerate(case.inputs.items()):
        onnx.save_tensor(numpy_helper.from_array(array, name),
                         os.path.join(data, "test_data_set_0", f"input_{position}.pb"))
    return model, data
