"""Which TensorRT layer outputs to mark for per-layer comparison, decided without TensorRT.

Shape layers, constants and everything inside loop bodies are skipped (their outputs are not comparable
tensors, or cannot be network outputs); the rest is matched by name against the requested names and patterns.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

SKIPPED_TYPES = frozenset({"SHAPE", "CONSTANT", "ASSERTION"})
LOOP_TYPES = frozenset({"TRIP_LIMIT", "RECURRENCE", "ITERATOR", "LOOP_OUTPUT"})


@dataclass(frozen=True)
class LayerOutput:
    name: str  # the output tensor's name (the ONNX tensor name where the parser kept it)
    layer_type: str  # trt.LayerType name, e.g. "CONVOLUTION"
    is_shape_tensor: bool = False
    in_loop: bool = False


def select_outputs(outputs: Sequence[LayerOutput], names: Sequence[str], patterns: Sequence[str],
                   exclude: Sequence[str]) -> list[str]:
    """Outputs to mark: named in ``names`` (ONNX tensors cmpx marks) or matching ``patterns`` (--trt-outputs),
    not matching ``exclude`` (--trt-exclude-outputs), and comparable (see the module docstring)."""
    wanted = set(names)
    chosen = []
    for output in outputs:
        if output.layer_type in SKIPPED_TYPES or output.layer_type in LOOP_TYPES or output.in_loop:
            continue
        if output.is_shape_tensor:
            continue
        if output.name in wanted or any(fnmatch.fnmatchcase(output.name, p) for p in patterns):
            if not any(fnmatch.fnmatchcase(output.name, p) for p in exclude):
                chosen.append(output.name)
    return list(dict.fromkeys(chosen))
