"""Find where the error enters: the first failing tensor, in graph order, whose compared inputs all pass."""

from __future__ import annotations

from collections.abc import Mapping

from cmpx.outcome.results import Divergence, OutputResult
from cmpx.model.graph import TensorGraph, TensorInfo


def first_divergence(graph: TensorGraph, results: Mapping[str, OutputResult]) -> Divergence | None:
    """Walk ``graph`` in topological order; tensors not compared are looked through to the compared tensors
    (or graph inputs and weights) they are computed from. Where only the model's outputs were compared (a run
    against saved outputs, no tensor marked), a failing output is where the error enters only if its node reads
    nothing but graph inputs, weights and compared tensors: else the error may enter anywhere before it, and None
    says so, as for a live run that marks nothing."""
    producers = graph.by_name()
    results = {name: result for name, result in results.items() if not result.missing_in}  # one side lacks it: no
    outputs_only = all(name in graph.graph_outputs for name in results)                    # value says where
    upstream_memo: dict[str, frozenset[str]] = {}

    def compared_upstream(tensor: str) -> frozenset[str]:
        found: set[str] = set()
        stack = list(producers[tensor].inputs) if tensor in producers else []
        seen: set[str] = set()
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in results:
                found.add(name)
            elif name in upstream_memo:
                found |= upstream_memo[name]
            elif name in producers:
                stack.extend(producers[name].inputs)
        upstream_memo[tensor] = frozenset(found)
        return upstream_memo[tensor]

    for info in graph.tensors:
        result = results.get(info.name)
        if result is None or result.passed:
            continue
        if outputs_only and not all(_known(name, producers, results) for name in info.inputs):
            continue
        if all(results[name].passed for name in compared_upstream(info.name)):
            return Divergence(info.name, info.node, info.op_type, result)
    return None


def _known(tensor: str, producers: Mapping[str, TensorInfo], results: Mapping[str, OutputResult]) -> bool:
    """A node's input whose value is not in question: a graph input or weight, a constant, or a compared tensor."""
    producer = producers.get(tensor)
    return producer is None or producer.op_type == "Constant" or tensor in results
