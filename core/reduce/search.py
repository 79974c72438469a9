"""Which subgraphs ``cmpx reduce`` tries, as node positions in graph order. Pure logic: ``fails(nodes)`` runs a
candidate and says whether it still fails the way the whole model did.

1. Bisect the end: the shortest prefix of the graph that fails (a fault shows at the prefix's outputs once the
   prefix holds the node that makes it). The whole model is known to fail.
2. Bisect the start: the shortest window ending there that fails (its inputs are the reference's values, so the
   nodes before the fault can go).
3. Linear pass: drop each node of that window whose removal still fails (nodes of parallel branches, or a chain
   whose error needs only part of it).

About log2(N) candidates for each bisection and one per node left for the linear pass: a single faulty node is
found in at most 2*ceil(log2(N)) candidates. Each step keeps a failing subgraph, so what is returned fails even
where the failure is not monotonic in the window (an error that needs two nodes, or that vanishes downstream).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

Fails = Callable[[Sequence[int], str], bool]  # (node positions, the step: "end", "start" or "linear") -> fails


def reduce_nodes(count: int, run: Fails) -> list[int]:
    """The positions of the nodes kept, in graph order, out of ``count`` nodes that fail together. A candidate
    already tried is not run again (the linear pass's first trial is often the start bisection's last)."""
    seen: dict[frozenset[int], bool] = {}

    def fails(nodes: Sequence[int], step: str) -> bool:
        key = frozenset(nodes)
        if key not in seen:
            seen[key] = run(nodes, step)
        return seen[key]

    if count <= 1:
        return list(range(count))
    low, high = 0, count - 1  # invariant: nodes[0..high] fails
    while low < high:
        middle = (low + high) // 2
        if fails(range(0, middle + 1), "end"):
            high = middle
        else:
            low = middle + 1
    end = high
    low, high = 0, end  # invariant: nodes[low..end] fails
    while low < high:
        middle = (low + high + 1) // 2
        if fails(range(middle, end + 1), "start"):
            low = middle
        else:
            high = middle - 1
    kept = list(range(low, end + 1))
    for node in list(kept):
        if len(kept) == 1:
            break
        trial = [n for n in kept if n != node]
        if fails(trial, "linear"):
            kept = trial
    return kept
