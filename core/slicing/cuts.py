"""Where a graph is cut, and what crosses each cut. Pure functions over a ``cmpx.model.subgraph.GraphIndex``.

The cost of a slice, for one backend, is what that backend holds while it runs: the tensors it returns (the
compared ones, and those a later slice reads) plus the tensors from earlier slices still waiting for a later
reader. Slices are grown greedily in the graph's (topological) order while that cost fits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from cmpx.model.subgraph import GraphIndex, boundary, closure


@dataclass(frozen=True)
class Slice:
    """One slice of one model: its nodes (positions in the model's graph, in order), the graph inputs it reads
    (``feeds``), the tensors of earlier slices it reads (``inputs``), what it returns (``outputs``: the compared
    tensors it computes and those a later slice reads) and the tensors of this or earlier slices that no later
    slice reads, to be freed once it has run and been compared (``freed``, the ones that crossed a cut)."""

    nodes: tuple[int, ...]
    feeds: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    freed: tuple[str, ...]


def last_readers(index: GraphIndex) -> dict[str, int]:
    """Each tensor's last reader (a node position); graph outputs count as read after the last node."""
    last = {name: max(readers) for name, readers in index.consumers.items()}
    for name in index.graph_outputs:
        last[name] = len(index.nodes)
    return last


def group_nodes(index: GraphIndex, sizes: Mapping[str, int], returned: Collection[str],
                capacity: int) -> list[list[int]]:
    """The nodes of ``index`` in consecutive groups whose cost (module docstring; ``sizes``: bytes per tensor,
    ``returned``: the tensors compared) stays within ``capacity`` bytes where possible; a node that alone exceeds
    it gets a group of its own."""
    count = len(index.nodes)
    last = last_readers(index)
    live_in = [0] * (count + 2)  # live_in[s]: bytes produced before node s and read at s or later
    for name, producer in index.producer.items():
        reader = last.get(name, producer)
        if reader > producer:
            live_in[producer + 1] += sizes.get(name, 0)
            live_in[min(reader, count) + 1] -= sizes.get(name, 0)
    for position in range(1, count + 1):
        live_in[position] += live_in[position - 1]
    groups: list[list[int]] = []
    current: list[int] = []
    held = 0
    for position in range(count):
        added = _held_by(index, position, sizes, returned, last)
        if current:
            start = current[0]
            freed = sum(sizes.get(name, 0) for name in dict.fromkeys(index.reads[position]) if name not in returned
                        and start <= index.producer.get(name, -1) < position and last.get(name) == position)
            if live_in[start] + held + added - freed > capacity:
                groups.append(current)
                current, held = [], 0
            else:
                held -= freed
        current.append(position)
        held += added
    if current:
        groups.append(current)
    return groups


def _held_by(index: GraphIndex, position: int, sizes: Mapping[str, int], returned: Collection[str],
             last: Mapping[str, int]) -> int:
    """Bytes of ``position``'s outputs that a slice ending with it holds: compared, or read by a later node."""
    return sum(sizes.get(name, 0) for name in index.nodes[position].output
               if name and (name in returned or last.get(name, position) > position))


def cut(index: GraphIndex, targets: Sequence[Sequence[str]], returned: Collection[str]) -> list[Slice] | str:
    """The slices of the model ``index`` that compute ``targets`` (per slice, the tensors compared after it, named
    as in the run's model) in that order: each slice holds the nodes that compute its targets from what earlier
    slices computed; the model's outputs are computed by the last slice at the latest. Returns why the model
    cannot be cut so instead (a tensor crossing a cut whose type is unknown)."""
    produced: set[str] = set()
    available = set(index.graph_inputs)
    groups: list[list[int]] = []
    for number, wanted in enumerate(targets):
        names = list(wanted) + (list(index.graph_outputs) if number == len(targets) - 1 else [])
        positions = [index.producer[name] for name in names if name in index.producer and name not in produced]
        nodes = closure(index, positions, available | produced)
        groups.append(nodes)
        produced.update(name for position in nodes for name in index.nodes[position].output if name)
    slice_of = {name: number for number, nodes in enumerate(groups) for position in nodes
                for name in index.nodes[position].output if name}
    reads: list[list[str]] = []
    last_slice: dict[str, int] = {}
    for number, nodes in enumerate(groups):
        read, _ = boundary(index, nodes)
        reads.append(read)
        for name in read:
            if name in slice_of:
                last_slice[name] = max(last_slice.get(name, -1), number)
    slices = []
    for number, nodes in enumerate(groups):
        feeds = tuple(name for name in reads[number] if name in available)
        inputs = tuple(name for name in reads[number] if name not in available)
        stray = [name for name in inputs if name not in slice_of]
        if stray:
            return f"slice {number + 1} reads {stray[0]}, which no node computes"
        untyped = [name for name in inputs if index.elem_type(name) is None]
        if untyped:
            return f"the type of {untyped[0]}, which crosses a cut, is unknown"
        outputs = tuple(name for position in nodes for name in index.nodes[position].output
                        if name and (name in returned or name in index.graph_outputs
                                     or last_slice.get(name, -1) > number))
        untyped = [name for name in outputs if index.elem_type(name) is None]
        if untyped:
            return f"the type of {untyped[0]} is unknown"
        freed = tuple(name for name, reader in last_slice.items() if reader == number)
        slices.append(Slice(tuple(nodes), feeds, inputs, outputs, freed))
    return slices
