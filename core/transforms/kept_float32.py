"""What a node kept in float32 reads stays float32: the fp16 converter's Cast round trips are taken out.

ONNX Runtime's float16 converter brackets every node it leaves in float32 with casts: its float32 inputs come
through Cast(to float32) from a float16 tensor, and its output goes out through Cast(to float16). Between two kept
nodes (``--keep-fp32 Add Sub``), and between a float32 graph input and a kept node, that makes a round trip
float32 -> float16 -> float32 which rounds the very tensor the user asked to keep: Polygraphy's precision
constraints example (x + 1e4 - 1e4) then gives 0 everywhere. Here each such round trip is removed, so a kept node
reads the float32 value its float32 producer made, and a tensor produced by a kept node keeps its own name for its
float32 value (per-layer comparison lines up what the kept node computed); a float16 copy is made, under a new
name, only where a node running in float16 still reads it.
"""

from __future__ import annotations

from typing import Any

FLOAT = 1
FLOAT16 = 10
CONVERTER_SUFFIX = "_cast_to_fp16"  # the converter's name for a kept node's float32 output, before its Cast


def join_kept_float32(model: Any, original_nodes: set[str]) -> Any:
    """``model`` (converted; its top-level graph) with every float32 -> float16 -> float32 round trip of the
    converter's Casts removed. ``original_nodes``: the node names of the model before conversion, so that Casts of
    the model's own are never touched."""
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    graph_outputs = {output.name for output in graph.output}

    def inserted(node: Any, to: int) -> bool:
        return _is_cast(node, to) and bool(node.name) and node.name not in original_nodes

    rewired: dict[str, str] = {}  # a round trip's float32 result -> the float32 tensor it came from
    for node in graph.node:
        source = producer.get(node.input[0]) if inserted(node, FLOAT) else None
        if source is not None and inserted(source, FLOAT16) and _is_float32(source.input[0], graph, producer):
            if node.output[0] in graph_outputs:  # the output keeps its name: the Cast reads the float32 value
                node.input[0] = source.input[0]
            else:
                rewired[node.output[0]] = source.input[0]
    kept = [node for node in graph.node if node.output[0] not in rewired or not inserted(node, FLOAT)]
    for node in kept:
        for index, name in enumerate(node.input):
            node.input[index] = rewired.get(name, name)
    readers = {name for node in kept for name in node.input} | graph_outputs
    kept = [node for node in kept if not (inserted(node, FLOAT16) and node.output[0] not in readers)]
    del graph.node[:]
    graph.node.extend(kept)
    kept_outputs = {node.input[0] for node in kept if inserted(node, FLOAT16) and node.input[0] in producer
                    and producer[node.input[0]].op_type != "Cast"}
    _restore_names(graph, kept_outputs | set(rewired.values()))
    return model


def _is_cast(node: Any, to: int) -> bool:
    return node.op_type == "Cast" and node.domain in ("", "ai.onnx") and any(
        attribute.name == "to" and attribute.i == to for attribute in node.attribute)


def _is_float32(name: str, graph: Any, producer: dict[str, Any]) -> bool:
    """Whether ``name`` holds float32: a float32 graph input, or the output of a node other than a Cast to
    another type (the converter leaves such a node's output float32 only when it kept the node)."""
    node = producer.get(name)
    if node is None:
        return any(i.name == name and i.type.tensor_type.elem_type == FLOAT for i in graph.input)
    return node.op_type != "Cast" or _is_cast(node, FLOAT)


def _restore_names(graph: Any, sources: set[str]) -> None:
    """A kept node's float32 output, named ``T_cast_to_fp16`` by the converter, takes back its name ``T``; the
    float16 copy, where one is still read, is the one named ``T_cast_to_fp16`` now (its readers follow)."""
    outputs = {output.name for output in graph.output}
    existing = {name for node in graph.node for name in node.output}
    renames: dict[str, str] = {}
    for source in sources:
        original = source[: -len(CONVERTER_SUFFIX)]
        if source.endswith(CONVERTER_SUFFIX) and original and not {source, original} & outputs:
            renames[source] = original
            if original in existing:
                renames[original] = source
    for node in graph.node:
        for index, name in enumerate(node.input):
            node.input[index] = renames.get(name, name)
        for index, name in enumerate(node.output):
            node.output[index] = renames.get(name, name)
    restored = {renames[source] for source in sources if source in renames}
    # types follow the values: a restored name holds float32, its copy float16; what no node makes any more goes
    made = {name for node in graph.node for name in node.output}
    infos, seen = [], set()
    for info in graph.value_info:
        info.name = renames.get(info.name, info.name)
        if info.name in made and info.name not in seen:
            seen.add(info.name)
            if info.type.HasField("tensor_type") and info.name in restored:
                info.type.tensor_type.elem_type = FLOAT
            elif info.type.HasField("tensor_type") and info.name in renames:
                info.type.tensor_type.elem_type = FLOAT16
            infos.append(info)
    kept_infos = [type(info)() for info in infos]
    for copy, info in zip(kept_infos, infos):
        copy.CopyFrom(info)
    del graph.value_info[:]
    graph.value_info.extend(kept_infos)
