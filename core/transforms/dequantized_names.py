"""In a Q/DQ graph, a quantized tensor's name stands for its dequantized value: the value its consumers read.

ONNX Runtime's quantizer (QDQ format) leaves a quantized activation ``X`` as its producer's raw float output and
inserts ``X -> QuantizeLinear -> DequantizeLinear -> X_DequantizeLinear_Output``, which every quantized consumer
reads. So ``X`` in the quantized graph is not what the quantized model computes for X: rounding to the 8-bit grid
and, where the quantizer folded a Relu or Clip into the pair, the clamp are both after it. When it folds Conv+Relu
it even gives the Conv's output the Relu's name, so the raw ``r`` holds negative values that no Relu output has.
Comparing ``r`` there with the float graph's ``r`` blames the wrong tensor (values like -8.7 against 0).

Every quantized tensor is therefore renamed the way the quantizer itself names quantized model outputs: the
producer's raw output (and the QuantizeLinear, with any consumer the quantizer left unquantized, which goes on
reading the raw value) becomes ``X_QuantizeLinear_Input``, and the DequantizeLinear's output takes the name ``X``
(its consumers follow). Per-layer comparison then compares, under X's name, the value the quantized model gives
X, for every quantized tensor, not only fused ones: that is the value the next layer computes with, so a
divergence is blamed on the layer where it arises (the rounding of X counts against X's node, once, not against
each consumer). The graph computes exactly what it did; only names change.

Left alone (ambiguous, or names that cannot change): graph inputs and outputs, tensors read by more than one
QuantizeLinear or with no DequantizeLinear of the same scale and zero point after it, the outputs of
DequantizeLinear nodes (dequantized values already), and names a subgraph reads.
"""

from __future__ import annotations

from typing import Any

from cmpx.transforms.graph_names import rename_uses, unused_name

QUANTIZE, DEQUANTIZE = "QuantizeLinear", "DequantizeLinear"
DOMAINS = ("", "ai.onnx", "com.microsoft")


def name_dequantized_values(graph: Any) -> list[str]:
    """Rename ``graph`` (an onnx GraphProto, changed in place) so that each quantized tensor's name is its
    DequantizeLinear output; returns the tensors renamed."""
    producers = {name: node for node in graph.node for name in node.output if name}
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in dict.fromkeys(node.input):
            if name:
                readers.setdefault(name, []).append(node)
    fixed = {t.name for t in graph.input} | {t.name for t in graph.output} | _read_in_subgraphs(graph)
    taken = set(producers) | set(readers) | fixed | {t.name for t in [*graph.initializer, *graph.value_info]}
    pairs = []
    for name, producer in producers.items():
        quantizers = [node for node in readers.get(name, []) if _is(node, QUANTIZE) and node.input[0] == name]
        if name in fixed or len(quantizers) != 1 or _is(producer, DEQUANTIZE):  # (a dequantized value already)
            continue
        (quantize,) = quantizers
        dequantize = next((node for node in readers.get(quantize.output[0], []) if _is(node, DEQUANTIZE)
                           and node.input[0] == quantize.output[0]
                           and list(node.input[1:]) == list(quantize.input[1:])), None)
        if dequantize is not None and dequantize.output[0] not in fixed:
            pairs.append((name, producer, dequantize))
    for name, producer, dequantize in pairs:
        raw = unused_name(f"{name}_QuantizeLinear_Input", taken)
        dequantized = dequantize.output[0]
        rename_uses(producer.output, name, raw)
        for node in readers.get(name, []):
            rename_uses(node.input, name, raw)
        for node in readers.get(dequantized, []):
            rename_uses(node.input, dequantized, name)
        dequantize.output[0] = name
        for info in graph.value_info:  # the raw tensor keeps X's type and shape; X gets the dequantized one's
            if info.name == name:
                info.name = raw
            elif info.name == dequantized:
                info.name = name
    return [name for name, _, _ in pairs]


def _is(node: Any, op_type: str) -> bool:
    return node.op_type == op_type and node.domain in DOMAINS


def _read_in_subgraphs(graph: Any) -> set[str]:
    """Every name a node of a subgraph (If, Loop, Scan bodies, nested too) reads: outer-scope names among them."""
    names: set[str] = set()
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                names.update(name for inner in subgraph.node for name in inner.input)
                names.update(_read_in_subgraphs(subgraph))
    return names
