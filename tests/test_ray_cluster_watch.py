"""cmpx.sweep.ray_cluster without Ray: what a node can hold, which runs are refused or wait, cells waiting past
--pending-timeout, and a head that stops answering. The same paths against a real cluster: test_sweep_cluster."""

import socket

import pytest

from cmpx.errors import ClusterLost, UsageError
from cmpx.sweep.ray_cluster import HeadWatch, WaitingCells, check_runs_fit, demand, unheld

NODES = [{"CPU": 2.0, "memory": 2.0 * 2**30}, {"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0, "trt10": 1.0}]


def test_a_demand_is_held_by_one_node_never_by_the_clusters_totals():
    assert unheld(demand({"CPU": 2}), NODES) is None
    assert unheld(demand({"GPU": 1}), NODES) is None
    assert unheld(demand({"CPU": 3}), NODES) == (
        "CPU 3 on one node, and no node of the cluster holds that (its 3 node(s): CPU 1 (x2); CPU 2)")
    # GPU and trt10 each exist, on two different nodes
    assert unheld(demand({"GPU": 1, "trt10": 1}), NODES) == (
        "CPU 1 and GPU 1 and trt10 1 on one node, and no node of the cluster holds that (its 3 node(s): CPU 1, GPU 0, "
        "trt10 1; CPU 1, GPU 1, trt10 0; CPU 2, GPU 0, trt10 0)")
    assert "memory 3.0 GiB on one node" in unheld(demand({"memory": 3 * 2**30}), NODES)


def test_what_no_node_holds_is_refused_unless_a_node_that_has_it_may_still_join():
    with pytest.raises(UsageError, match=r"^run 'big' needs CPU 3 on one node, .*\(the Ray cluster; change"):
        check_runs_fit({"big": demand({"CPU": 3}), "ok": demand({})}, NODES, local=False, waiting=WaitingCells(600))
    with pytest.raises(UsageError, match=r"^run 'both' needs CPU 1 and GPU 1 and trt10 1 on one node"):
        check_runs_fit({"both": demand({"GPU": 1, "trt10": 1})}, NODES, local=False, waiting=WaitingCells(600))
    warnings = check_runs_fit({"trt11": demand({"trt11": 1})}, NODES, local=False, waiting=WaitingCells(5))
    assert warnings == ["run 'trt11' needs CPU 1 and trt11 1 on one node, and no node of the cluster holds that (its 3 "
                        "node(s): CPU 1, trt11 0 (x2); CPU 2, trt11 0): its cells wait for a node that has it, up to "
                        "5 s (--pending-timeout)"]
    assert check_runs_fit({"trt11": demand({"trt11": 1})}, NODES, local=False, waiting=WaitingCells(None))[0].endswith(
        "with no limit")
    told = WaitingCells(5)  # its cells do not say it again when they wait
    check_runs_fit({"trt11": demand({"trt11": 1})}, NODES, local=False, waiting=told)
    told.expired({"cell": demand({"trt11": 1})}, NODES, now=0)
    assert told.news == []
    with pytest.raises(UsageError, match=r"\(the local Ray started for this sweep; "):  # where no node joins
        check_runs_fit({"trt11": demand({"trt11": 1})}, NODES, local=True, waiting=WaitingCells(5))


def test_a_cell_times_out_only_after_waiting_that_long_for_a_node_able_to_hold_it():
    waiting = WaitingCells(timeout=10)
    gpu, cpu = demand({"GPU": 2}), demand({})
    assert waiting.expired({"a": gpu, "b": cpu}, NODES, now=100) == {}
    assert waiting.expired({"a": gpu, "b": cpu}, NODES, now=109) == {}
    grown = NODES + [{"CPU": 4.0, "GPU": 2.0}]  # a node that holds it joined: the wait starts again
    assert waiting.expired({"a": gpu}, grown, now=112) == {}
    assert waiting.expired({"a": gpu}, NODES, now=113) == {}  # and it left
    assert waiting.expired({"a": gpu}, NODES, now=122) == {}
    expired = waiting.expired({"a": gpu}, NODES, now=123)
    assert list(expired) == ["a"]
    assert expired["a"].startswith("waited 10 s (--pending-timeout) for a node: it needs CPU 1 and GPU 2 on one node")
    assert WaitingCells(timeout=None).expired({"a": gpu}, NODES, now=10**6) == {}


def test_why_cells_began_to_wait_is_said_once_unless_it_was_said_before():
    waiting = WaitingCells(timeout=5)
    waiting.tell(demand({"trt10": 1}))  # the warning before any cell ran said it
    three = NODES + [{"CPU": 8.0}]
    assert waiting.expired({"a": demand({"CPU": 8}), "b": demand({"trt10": 1})}, three, now=0) == {}
    assert waiting.news == []
    # the node holding 8 CPUs died under two cells
    waiting.expired({"a": demand({"CPU": 8}), "c": demand({"CPU": 8}), "b": demand({"trt10": 1})}, NODES, now=1)
    assert waiting.news == ["cells wait for a node: they need CPU 8 on one node, and no node of the cluster holds "
                            "that (its 3 node(s): CPU 1 (x2); CPU 2); they wait up to 5 s (--pending-timeout)"]
    waiting.expired({"a": demand({"CPU": 8})}, NODES, now=2)
    assert len(waiting.news) == 1


def test_a_head_that_stops_answering_is_a_lost_cluster_after_the_limit():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        watch = HeadWatch(address, lost_after=8)
        watch.check(now=0)  # answers
    watch.check(now=1)  # closed now: refused since 1
    watch.check(now=8.5)
    with pytest.raises(ClusterLost, match=rf"^lost the Ray cluster: its head \(GCS at {address}\) has not answered "
                                          r"for 8 s \(Connection refused\)$"):
        watch.check(now=9)
