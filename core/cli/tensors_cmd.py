"""``cmpx tensors MODEL``: what --onnx-outputs can mark."""

from __future__ import annotations

import click

from cmpx.errors import UsageError
from cmpx.plugin.manager import PluginSet
from cmpx.printable import printable

TENSOR_COLUMNS = ("TENSOR", "NODE", "OP", "DTYPE", "SHAPE", "NOTE")


def show_tensors(model: str, plugins: PluginSet) -> None:
    from cmpx.model.graph import load_structure, tensor_graph
    from cmpx.model.info import format_shape, read_model
    from cmpx.model.native import native_format
    from cmpx.reports.terminal import PipeSafeEcho

    suffix = native_format(model, list(plugins.backends))
    if suffix is not None:
        raise UsageError(f"cmpx tensors lists the tensors of an ONNX model, and {model} is a {suffix} model; give "
                         "the ONNX model it was made from")
    info = read_model(model)
    graph = tensor_graph(load_structure(info.path))
    markable = set(graph.markable())
    outputs = set(graph.graph_outputs)
    structured = {spec.name: spec.value_type for spec in info.outputs if not spec.is_tensor}  # seq(map(...))...
    unsupported = dict(info.unsupported)
    rows = [(printable(t.name), printable(t.node or "-"), printable(t.op_type), structured.get(t.name) or t.dtype or "?",
             "-" if t.name in structured else format_shape(t.shape),
             ("output" + (", compared structurally" if t.name in structured else "")
              + (f", not comparable: it {unsupported[t.name]}" if t.name in unsupported else ""))
             if t.name in outputs else ("" if t.name in markable else "not markable"))
            for t in graph.tensors]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(TENSOR_COLUMNS)]
    echo = PipeSafeEcho()  # | head: a reader gone is not a failure (click would exit 1)
    for row in [TENSOR_COLUMNS, *rows]:
        echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    echo(f"{len(markable)} markable tensor(s) of {len(graph.tensors)}; mark them with "
         f"--onnx-outputs NAME|PATTERN|@FILE or --mark-all")
