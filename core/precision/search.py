"""Which sets of nodes ``cmpx precision`` tries to keep in float32 (or unquantized). Pure logic: ``passes(nodes,
step)`` runs the model with those nodes kept and says whether it passes.

``order`` is every node that may be kept, most suspect first (the first divergence, then the local-error ranking:
cmpx.precision.ranking). Known before the search: keeping nothing fails, keeping all of ``order`` passes.

1. Grow: the shortest prefix of ``order`` that passes, by doubling (1, 2, 4... nodes) and then bisecting between
   the last failing and the first passing length: at most 2*ceil(log2 N) candidates for N nodes.
2. Shrink: the prefix's last node is needed (the prefix without it failed); the other nodes needed with it are
   found by QuickXplain (Junker, 2004), a divide-and-conquer delta debugging that finds k needed nodes among P
   in at most 2k*ceil(log2 P) + 2k candidates, trying the better-ranked half first.
3. Check: the set found is run once more if it was not run yet, and each of its nodes is dropped in turn; a node
   whose removal still passes goes (where passing is not monotonic in the set), so that every node kept is one
   whose removal was seen to fail: k + 1 candidates.

Every answer comes from a set that was run and passed. ``candidate_bound(N, k)`` is the most candidates this takes.
``bisect_prefix`` is the plain bisection over the ranking (Polygraphy's way, kept for comparison: the shortest
passing prefix, unshrunk).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

SINGLES = 4  # a failing group this small is tried node by node in shrink_from_all
Passes = Callable[[Sequence[str], str], bool]  # (nodes kept, the step: grow, shrink or check) -> passes


def candidate_bound(count: int, kept: int) -> int:
    """The most candidates ``search_kept`` runs for ``count`` nodes of which it keeps ``kept``: O(k log N)."""
    log = math.ceil(math.log2(max(count, 2)))
    return 2 * log + 2 * max(kept, 1) * log + 2 * max(kept, 1) + kept + 1


class Memo:
    """``passes`` with each set run once (a shrink often asks again for a set the grow step ran)."""

    def __init__(self, passes: Passes):
        self.passes = passes
        self.seen: dict[frozenset[str], bool] = {}

    def __call__(self, nodes: Sequence[str], step: str) -> bool:
        key = frozenset(nodes)
        if key not in self.seen:
            self.seen[key] = self.passes(list(nodes), step)
        return self.seen[key]


def search_kept(order: Sequence[str], passes: Passes) -> list[str]:
    """The nodes to keep, in ``order``'s order: grow, shrink, check (module docstring)."""
    run = Memo(passes)
    if not order:
        return []
    prefix = list(order[:shortest_prefix(order, run)])
    kept = quick_explain([prefix[-1]], prefix[:-1], run)
    if not run(kept, "check"):  # passing is not monotonic here: shrink what was seen to pass instead
        kept = prefix
    return drop_unneeded(kept, run)


def shortest_prefix(order: Sequence[str], passes: Passes, doubling: bool = True) -> int:
    """The length of the shortest prefix of ``order`` that passes (the whole of it is known to)."""
    failing, passing = 0, len(order)
    size = 1
    while doubling and size < passing:
        if passes(order[:size], "grow"):
            passing = size
            break
        failing = size
        size *= 2
    while passing - failing > 1:
        middle = (failing + passing) // 2
        if passes(order[:middle], "grow"):
            passing = middle
        else:
            failing = middle
    return passing


def quick_explain(background: list[str], candidates: list[str], passes: Passes) -> list[str]:
    """A smallest-by-inclusion part of ``candidates`` that passes together with ``background`` (all of them does),
    and ``background``: QuickXplain, the better-ranked half of each split tried first."""

    def explain(base: list[str], added: bool, rest: list[str]) -> list[str]:
        if added and passes(base, "shrink"):
            return []
        if len(rest) <= 1:
            return list(rest)
        half = (len(rest) + 1) // 2
        first, second = rest[:half], rest[half:]
        needed_second = explain(base + first, bool(first), second)
        needed_first = explain(base + needed_second, bool(needed_second), first)
        return needed_first + needed_second

    needed = explain(list(background), True, list(candidates))
    chosen = set(needed) | set(background)
    return [node for node in [*candidates, *background] if node in chosen]


def drop_unneeded(kept: list[str], passes: Passes) -> list[str]:
    """``kept`` (which passes) without each node whose removal still passes, the worst-ranked tried first."""
    for node in reversed(list(kept)):
        trial = [n for n in kept if n != node]
        if trial and passes(trial, "check"):
            kept = trial
    return kept


def shrink_from_all(order: Sequence[str], passes: Passes) -> list[str]:
    """The nodes to keep when most are needed (the ranking finds most failing on their own): start from all of
    ``order`` kept and drop groups, the least suspect first: a group whose removal passes goes, one whose removal
    fails is split in halves, each tried in turn, a half of SINGLES nodes or fewer node by node (most of them are
    needed, so trying the half whole would only fail). Every node kept was seen failing when
    dropped (from a set that holds the one returned: where passing is monotonic, it is needed there too). At most
    ``shrink_bound(N, k)`` candidates."""
    run = Memo(passes)
    kept = list(order)

    def drop(group: list[str]) -> None:
        nonlocal kept
        gone = set(group)
        trial = [node for node in kept if node not in gone]
        if not group or (trial and run(trial, "shrink")):  # keeping nothing is known to fail
            kept = trial
            return
        if len(group) > 1:
            split(group)

    def split(group: list[str]) -> None:
        half = len(group) // 2
        for part in (group[:half], group[half:]):
            for piece in ([[node] for node in part] if len(part) <= SINGLES else [part]):
                drop(piece)

    split(list(reversed(order)))
    return [node for node in order if node in kept]


def shrink_bound(count: int, kept: int) -> int:
    """The most candidates ``shrink_from_all`` runs for ``count`` nodes of which it keeps ``kept``: two per failing
    group (each on a kept node's path of ceil(log2 N) halvings), 2 * SINGLES per failing group split into single
    nodes; never more than the groups of over SINGLES nodes there are (fewer than 2N / SINGLES) and N singles."""
    log = math.ceil(math.log2(max(count, 2)))
    return min(count + 2 * count // SINGLES, max(kept, 1) * (2 * log + 2 * SINGLES))


def bisect_prefix(order: Sequence[str], passes: Passes) -> list[str]:
    """The plain bisection over the ranking: the shortest prefix of ``order`` that passes, nothing dropped."""
    return list(order[:shortest_prefix(order, Memo(passes), doubling=False)])
