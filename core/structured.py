"""Outputs that are not tensors (sequences, maps, optionals), as one flat tensor plus a small JSON structure.

A backend returns such an output as Python lists, dicts and None holding arrays or numbers (ONNX Runtime gives a
ZipMap output as a list of ``{label: probability}`` dicts). The worker flattens it: every tensor it holds, in
order, goes into one 1-D array of values (which travels through shared memory like any output), and its
*skeleton*, a JSON-able description of its structure, travels in the result message:

    ["t", shape]                  a tensor: the next prod(shape) values
    ["seq", [item, ...]]          a sequence
    ["seq*", count, item]         a sequence of ``count`` items of the same structure (a ZipMap's rows)
    ["map", [key, ...], [v, ...]] a map, keys sorted (integers or strings)
    ["map*", [key, ...], v]       a map whose values all have the same structure
    ["none"]                      an empty optional

Two such outputs are compared structurally: the same skeleton (lengths, keys exactly, shapes), then their values
element by element with the output's tolerances, as one tensor. Nothing is pickled. Light: numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Skeleton = list  # JSON: see the module docstring
MAX_SKELETON_ITEMS = 1 << 20  # items in a structure's description (a frame carries it; tensors carry the values)


class StructureError(ValueError):
    """A value that cannot be flattened (strings, objects, mixed types): why, in words."""


@dataclass(frozen=True)
class Structured:
    """A sequence, map or optional: its skeleton and the values of every tensor it holds, flattened in order."""

    skeleton: Skeleton
    values: np.ndarray

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)

    @property
    def size(self) -> int:
        return int(self.values.size)

    def describe(self) -> str:
        return describe(self.skeleton)


@dataclass(frozen=True)
class NotComparable:
    """An output a backend returned in a form cmpx cannot compare (strings, objects): why."""

    reason: str


def flatten(value: Any) -> Structured:
    """The Structured form of ``value`` (lists, tuples, dicts and None holding arrays or numbers)."""
    leaves: list[np.ndarray] = []
    counter = [0]
    skeleton = _flatten(value, leaves, counter)
    if not leaves:
        return Structured(skeleton, np.empty(0, np.float32))
    kinds = {leaf.dtype for leaf in leaves}
    dtype = kinds.pop() if len(kinds) == 1 else np.result_type(*kinds)
    if dtype.hasobject or dtype.kind in "USMO":
        raise StructureError(f"it holds {dtype} values; cmpx compares numbers")
    values = np.concatenate([leaf.reshape(-1).astype(dtype, copy=False) for leaf in leaves])
    return Structured(skeleton, values)


def _flatten(value: Any, leaves: list[np.ndarray], counter: list[int]) -> Skeleton:
    counter[0] += 1
    if counter[0] > MAX_SKELETON_ITEMS:
        raise StructureError(f"it has over {MAX_SKELETON_ITEMS} items")
    if value is None:
        return ["none"]
    if isinstance(value, (list, tuple)):
        items = [_flatten(item, leaves, counter) for item in value]
        return _sequence(items)
    if isinstance(value, Mapping):
        keys = list(value)
        if not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in keys) and \
                not all(isinstance(k, str) for k in keys):
            raise StructureError("its map keys are neither all integers nor all strings")
        ordered = sorted(keys)
        items = [_flatten(value[k], leaves, counter) for k in ordered]
        keys_json = [int(k) if not isinstance(k, str) else k for k in ordered]
        if items and all(item == items[0] for item in items):
            return ["map*", keys_json, items[0]]
        return ["map", keys_json, items]
    array = np.asarray(value)
    if array.dtype.hasobject or array.dtype.kind in "USM":
        raise StructureError(f"it holds {array.dtype} values; cmpx compares numbers")
    leaves.append(array)
    return ["t", list(array.shape)]


def _sequence(items: list[Skeleton]) -> Skeleton:
    if items and all(item == items[0] for item in items):
        return ["seq*", len(items), items[0]]
    return ["seq", items]


def _count(skeleton: Skeleton) -> int:
    """How many values a skeleton holds."""
    kind = skeleton[0]
    if kind == "t":
        return int(np.prod(skeleton[1], dtype=np.int64))
    if kind == "seq":
        return sum(_count(item) for item in skeleton[1])
    if kind == "seq*":
        return skeleton[1] * _count(skeleton[2])
    if kind == "map":
        return sum(_count(item) for item in skeleton[2])
    if kind == "map*":
        return len(skeleton[1]) * _count(skeleton[2])
    return 0


def check_skeleton(skeleton: Any, values: int) -> None:
    """Raise StructureError unless ``skeleton`` is well formed and describes exactly ``values`` values (a saved
    run's description is checked before anything is compared)."""
    def walk(node: Any, depth: int) -> None:
        if depth > 64 or not isinstance(node, list) or not node or node[0] not in ("t", "seq", "seq*", "map",
                                                                                   "map*", "none"):
            raise StructureError(f"malformed structure {str(node)[:80]}")
        kind = node[0]
        ok = {"t": lambda: len(node) == 2 and isinstance(node[1], list) and all(
                  isinstance(d, int) and d >= 0 for d in node[1]),
              "seq": lambda: len(node) == 2 and isinstance(node[1], list),
              "seq*": lambda: len(node) == 3 and isinstance(node[1], int) and node[1] >= 0,
              "map": lambda: len(node) == 3 and isinstance(node[1], list) and isinstance(node[2], list)
              and len(node[1]) == len(node[2]),
              "map*": lambda: len(node) == 3 and isinstance(node[1], list),
              "none": lambda: len(node) == 1}[kind]
        if not ok():
            raise StructureError(f"malformed {kind} in the structure")
        children = node[1] if kind == "seq" else node[2] if kind == "map" else [node[2]] if kind in (
            "seq*", "map*") else []
        for child in children:
            walk(child, depth + 1)

    walk(skeleton, 0)
    if _count(skeleton) != values:
        raise StructureError(f"the structure describes {_count(skeleton)} values, and {values} are stored")


def describe(skeleton: Skeleton) -> str:
    """A few words for a skeleton: ``3 maps of 3 keys``, ``a sequence of 2 tensors``, ``an empty optional``."""
    kind = skeleton[0]
    if kind == "t":
        return f"a tensor {skeleton[1]}"
    if kind == "none":
        return "an empty optional"
    if kind in ("map", "map*"):
        return f"a map of {len(skeleton[1])} keys"
    count = len(skeleton[1]) if kind == "seq" else skeleton[1]
    if kind == "seq*" and skeleton[2][0] in ("map", "map*"):
        return f"a sequence of {count} maps of {len(skeleton[2][1])} keys"
    if kind == "seq*" and skeleton[2][0] == "t":
        return f"a sequence of {count} tensors {skeleton[2][1]}"
    return f"a sequence of {count} items"


def difference(actual: Skeleton, reference: Skeleton, where: str = "") -> str | None:
    """Where and how two skeletons differ (``[2]: keys [0, 1] vs reference [0, 1, 2]``), or None if they match."""
    if actual == reference:
        return None
    at = where or "the top"
    if actual[0].rstrip("*") != reference[0].rstrip("*"):
        return f"{at}: {_word(actual)} vs reference {_word(reference)}"
    kind = actual[0].rstrip("*")
    if kind == "t":
        return f"{at}: shape {actual[1]} vs reference {reference[1]}"
    if kind == "map":
        if actual[1] != reference[1]:
            return f"{at}: keys {_short(actual[1])} vs reference {_short(reference[1])}"
        return _first([(f"{where}[{key!r}]", a, r) for key, a, r in
                       zip(actual[1], _map_items(actual), _map_items(reference))])
    mine, theirs = _seq_items(actual), _seq_items(reference)
    if len(mine) != len(theirs):
        return f"{at}: {len(mine)} items vs reference {len(theirs)}"
    return _first([(f"{where}[{index}]", a, r) for index, (a, r) in enumerate(zip(mine, theirs))])


def _first(items: list[tuple[str, Skeleton, Skeleton]]) -> str | None:
    for where, a, r in items:
        found = difference(a, r, where)
        if found is not None:
            return found
    return None


def _seq_items(skeleton: Skeleton) -> list[Skeleton]:
    return skeleton[1] if skeleton[0] == "seq" else [skeleton[2]] * skeleton[1]


def _map_items(skeleton: Skeleton) -> list[Skeleton]:
    return skeleton[2] if skeleton[0] == "map" else [skeleton[2]] * len(skeleton[1])


def _word(skeleton: Skeleton) -> str:
    return {"t": "a tensor", "seq": "a sequence", "map": "a map", "none": "nothing (an empty optional)"}[
        skeleton[0].rstrip("*")]


def _short(keys: list[Any]) -> str:
    return str(keys) if len(keys) <= 8 else f"{keys[:8]}... ({len(keys)} keys)"


def locate(skeleton: Skeleton, index: int) -> str:
    """The path of the ``index``-th value in a skeleton: ``[3][2]`` (row 3, key 2), ``[0](1, 4)`` (an element of a
    sequence's first tensor)."""
    path = ""
    node = skeleton
    while True:
        kind = node[0]
        if kind == "t":
            shape = node[1]
            return path + (str(tuple(int(i) for i in np.unravel_index(index, shape))) if shape else "")
        if kind in ("seq*", "map*"):
            size = _count(node[2])
            position, index = divmod(index, max(size, 1))
            label = position if kind == "seq*" else node[1][position]
            path += f"[{label!r}]"
            node = node[2]
            continue
        if kind == "none":
            return path
        children = node[1] if kind == "seq" else node[2]
        for position, child in enumerate(children):
            size = _count(child)
            if index < size:
                path += f"[{position if kind == 'seq' else node[1][position]!r}]"
                node = child
                break
            index -= size
        else:
            return path
