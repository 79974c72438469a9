"""Graph outputs that no node computes: a graph input or a weight that the model returns as it is.

ONNX Runtime's float16 converter casts every graph output back to its type by defining the output's name a second
time (ONNX Runtime: "Duplicate definition of name"; the reference evaluator and OpenVINO: an input never defined),
and its quantizer takes such an output for a cycle ("Graph is not a DAG"). So the fp16, bf16 and int8 transforms
set these outputs aside before they run and put them back, in their places, after. A graph input stays as it was
(the transforms keep the model's input types); a weight the transform retyped (float16) takes a new name, and a
Cast to the output's type gives the output its own name back.
"""

from __future__ import annotations

from typing import Any

from cmpx.transforms.graph_names import rename_uses, unused_name


def set_aside(graph: Any) -> list[tuple[int, Any]]:
    """Remove from ``graph``'s outputs those that no node of it computes; return them with their positions."""
    produced = {name for node in graph.node for name in node.output}
    aside = []
    for index, output in enumerate(graph.output):
        if output.name not in produced:
            kept = type(output)()
            kept.CopyFrom(output)
            aside.append((index, kept))
    for index, _ in reversed(aside):
        del graph.output[index]
    return aside


def put_back(graph: Any, aside: list[tuple[int, Any]], renamed: dict[str, Any] | None = None) -> None:
    """Put the outputs ``set_aside`` took back at their positions. A weight now of another type than its output is
    renamed (its uses, its value info, and its entry in ``renamed``, a dict by name, too) and cast back under its
    own name. A name that is neither computed, nor a weight, nor an input any more is a ValueError."""
    from onnx import helper

    if not aside:
        return
    names = {name for node in graph.node for name in (*node.input, *node.output)} | {
        t.name for t in graph.initializer} | {i.name for i in graph.input} | {v.name for v in graph.value_info} | {
        node.name for node in graph.node}
    produced = {name for node in graph.node for name in node.output}
    inputs = {i.name for i in graph.input}
    for _, output in aside:
        name, wanted = output.name, output.type.tensor_type.elem_type
        weight = next((t for t in graph.initializer if t.name == name), None)
        if weight is None:
            if name not in produced and name not in inputs:
                raise ValueError(f"the model's output {name!r}, a weight returned as it is, is gone from the "
                                 "transformed model")
            continue
        if not wanted or weight.data_type == wanted:
            continue
        new = unused_name(f"{name}_as_transformed", names)
        weight.name = new
        for node in graph.node:
            rename_uses(node.input, name, new)
        for info in graph.value_info:
            if info.name == name:
                info.name = new
        if renamed is not None and name in renamed:
            renamed[new] = renamed.pop(name)
        graph.node.append(helper.make_node("Cast", [new], [name], name=unused_name(f"{name}_cast_back", names),
                                           to=wanted))
    outputs = [type(o)() for o in graph.output]
    for copy, output in zip(outputs, graph.output):
        copy.CopyFrom(output)
    for index, output in aside:
        outputs.insert(index, output)
    del graph.output[:]
    graph.output.extend(outputs)
