"""cmpx.precision.search's logic on made-up predicates (no runs): with k planted nodes among N, the search keeps
exactly them within its stated bound, whatever their ranks; the plain bisection keeps the shortest passing prefix."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmpx.precision.search import bisect_prefix, candidate_bound, search_kept, shrink_bound, shrink_from_all


def planted(needed):
    calls = []

    def passes(nodes, step):
        calls.append((tuple(nodes), step))
        return set(needed) <= set(nodes)

    return passes, calls


@settings(max_examples=40)  # each example is pure logic; 40 cover sizes 1-200 and k up to 6
@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1,
                                                                               max_size=min(n, 6)))))
def test_the_search_keeps_exactly_the_planted_nodes_within_its_bound(case):
    count, positions = case
    order = [f"n{i}" for i in range(count)]
    needed = {order[i] for i in positions}
    passes, calls = planted(needed)
    kept = search_kept(order, passes)
    assert set(kept) == needed
    assert len(calls) <= candidate_bound(count, len(needed)), (count, positions, len(calls))
    assert len(set(frozenset(nodes) for nodes, _ in calls)) == len(calls)  # no set is run twice


def test_a_good_ranking_costs_few_candidates_and_the_bound_is_k_log_n():
    order = [f"n{i}" for i in range(1000)]
    passes, calls = planted({"n0", "n1"})
    assert search_kept(order, passes) == ["n0", "n1"] and len(calls) <= 6
    assert candidate_bound(1000, 2) == 2 * 10 + 2 * 2 * 10 + 2 * 2 + 2 + 1
    assert candidate_bound(1000, 20) < 1000 // 2  # far below one candidate per node


def test_when_passing_is_not_monotonic_every_node_kept_was_seen_needed():
    # a passes alone, b passes alone, both together fail (a non-monotonic model): whatever is kept was run
    order = ["a", "b", "c"]
    seen = {}

    def passes(nodes, step):
        result = set(nodes) in ({"a"}, {"b"}, {"a", "b", "c"}, {"a", "c"}, {"b", "c"})
        seen[frozenset(nodes)] = result
        return result

    kept = search_kept(order, passes)
    assert seen[frozenset(kept)] is True
    assert all(seen.get(frozenset(set(kept) - {node}), False) is False for node in kept)


@pytest.mark.parametrize("needed", [{"n3"}, {"n0", "n9"}, {"n5", "n6", "n7"}])
def test_the_plain_bisection_keeps_the_shortest_passing_prefix(needed):
    order = [f"n{i}" for i in range(10)]
    passes, calls = planted(needed)
    kept = bisect_prefix(order, passes)
    last = max(int(name[1:]) for name in needed)
    assert kept == order[:last + 1] and len(calls) <= 4


def test_a_stop_raised_by_a_candidate_propagates():
    class Stop(Exception):
        pass

    counter = itertools.count()

    def passes(nodes, step):
        if next(counter) == 2:
            raise Stop
        return False

    with pytest.raises(Stop):
        search_kept([f"n{i}" for i in range(10)], passes)


@settings(max_examples=40)
@given(st.integers(1, 120).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1), min_size=1,
                                                                              max_size=n))))
def test_shrinking_from_all_keeps_exactly_the_planted_nodes_within_its_bound(case):
    count, positions = case
    order = [f"n{i}" for i in range(count)]
    needed = {order[i] for i in positions}
    passes, calls = planted(needed)
    assert set(shrink_from_all(order, passes)) == needed
    assert len(calls) <= shrink_bound(count, len(needed)), (count, positions, len(calls))


def test_shrinking_from_all_costs_about_n_when_all_are_needed_and_less_when_the_tail_is_not():
    order = [f"n{i}" for i in range(94)]
    costs = {}
    for needed in (order, order[:60], order[:10]):
        passes, calls = planted(set(needed))
        assert shrink_from_all(order, passes) == needed
        costs[len(needed)] = len(calls)
    # the grow-and-shrink search costs 198 candidates when all 94 are needed
    assert costs == {94: 124, 60: 86, 10: 17}
