"""The candidates cmpx reduce tries (cmpx.reduce.search), on model-free predicates: what fails is a set of nodes
that must all be in the candidate, as a fault that needs them all does."""

import math

from hypothesis import given
from hypothesis import strategies as st

from cmpx.reduce.search import reduce_nodes


def _needs(nodes):
    """A failure that shows when every node of ``nodes`` is in the candidate; records each candidate tried."""
    tried = []

    def fails(candidate, step):
        tried.append((list(candidate), step))
        return set(nodes) <= set(candidate)

    return fails, tried


@given(st.integers(2, 1000).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_one_faulty_node_is_found_in_two_bisections(case):
    count, fault = case
    fails, tried = _needs([fault])
    assert reduce_nodes(count, fails) == [fault]
    assert len(tried) <= 2 * math.ceil(math.log2(count))
    assert {step for _, step in tried} <= {"end", "start"}


def test_a_fault_that_needs_two_neighbours_keeps_both():
    fails, _ = _needs([41, 42])
    assert reduce_nodes(200, fails) == [41, 42]


def test_the_linear_pass_drops_what_lies_between_two_needed_nodes():
    fails, tried = _needs([10, 17])
    assert reduce_nodes(60, fails) == [10, 17]
    # each node of 10..17 tried once, but the first: the start bisection tried the window without it
    assert sum(step == "linear" for _, step in tried) == 7
    assert len({frozenset(nodes) for nodes, _ in tried}) == len(tried)  # nothing run twice


def test_what_is_kept_always_failed():
    """A failure that is not monotonic (it vanishes in some larger windows) still ends on a candidate that failed."""
    def fails(candidate, step):
        nodes = set(candidate)
        return 30 in nodes and not (31 in nodes and 32 in nodes)

    kept = reduce_nodes(100, fails)
    assert fails(kept, "check")


def test_a_single_node_model_is_kept_as_it_is():
    assert reduce_nodes(1, lambda nodes, step: True) == [0]
