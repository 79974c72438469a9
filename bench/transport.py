"""Moving a 256 MiB output from a worker to the coordinator: cmpx's shared memory against a plain memcpy and
against pickling through a multiprocessing pipe, measured in one run.

    python bench/transport.py [--mib 256] [--repeat 5]

cmpx's figure is the real path (cmpx.transport.live, as a run talks to its workers): the worker copies the
backend's array into a shared-memory segment (reused and still mapped from the previous iteration, as in a run)
and the coordinator maps it (through the same mapping cache a run uses) and reads every byte (a sum over it). The pipe's figure also includes that read; the ratios
take it out again.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "plugins"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(HERE, "plugins"), os.environ.get("PYTHONPATH")]))

from cmpx.errors import BackendFailed  # noqa: E402
from cmpx.plan import BackendPlan  # noqa: E402
from cmpx.plugin.manager import PluginSettings, make_plugin_manager  # noqa: E402
from cmpx.transport import supervisor  # noqa: E402
from cmpx.transport.live import LiveBackends  # noqa: E402
from cmpx.transport.pool import worker_environment  # noqa: E402
from cmpx.transport.runspace import RunSpace  # noqa: E402


def answered(replies):
    """The one worker's answer; its failure raised."""
    [reply] = replies.values()
    if isinstance(reply, BackendFailed):
        raise reply
    return reply


def best(function, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def pickled_sender(connection, mib):
    blob = np.ones(mib * 2**20 // 4, np.float32)
    while connection.recv():
        connection.send(blob)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    blob = np.ones(args.mib * 2**20 // 4, np.float32)
    target = np.empty_like(blob)
    memcpy = best(lambda: np.copyto(target, blob), args.repeat)

    settings = PluginSettings(extra=("cmpx_bench_blob",))
    spec = make_plugin_manager(autoload=False, extra=settings.extra).backends.get("blob")
    backend = BackendPlan("blob", spec, {"mib": str(args.mib)})
    space = RunSpace()
    worker = supervisor.assign(supervisor.spawn_worker(worker_environment()), backend, settings)
    live = LiveBackends([backend], {"blob": worker}, space.prefix, {"blob": 60.0})
    try:
        answered(live.start())
        answered(live.load({"blob": ("-", ())}))

        def through_shared_memory():
            reply = answered(live.results(live.infer({"blob": []}, "p0")))
            source = live.iteration_outputs({"blob": reply})["blob"]
            float(source.load("blob").sum(dtype=np.float64))  # the coordinator reads every byte
            source.release_all()

        through_shared_memory()  # the first iteration creates the segment; later ones reuse it
        shared = best(through_shared_memory, args.repeat)
    finally:
        try:
            live.free_segments()
            supervisor.release(worker)
        finally:
            space.close()

    parent, child = multiprocessing.Pipe()
    sender = multiprocessing.get_context("spawn").Process(target=pickled_sender, args=(child, args.mib))
    sender.start()
    try:
        def through_pickle():
            parent.send(True)
            float(parent.recv().sum(dtype=np.float64))

        through_pickle()
        pickled = best(through_pickle, args.repeat)
    finally:
        parent.send(False)
        sender.join()
    reading = best(lambda: float(blob.sum(dtype=np.float64)), args.repeat)
    ours, theirs = max(shared - reading, 0.0), max(pickled - reading, 0.0)
    print(f"{args.mib} MiB worker -> coordinator, best of {args.repeat} (reading it once: {reading * 1000:.1f} ms, "
          "taken out below)")
    print(f"  memcpy in one process     {memcpy * 1000:8.1f} ms")
    print(f"  cmpx shared memory        {ours * 1000:8.1f} ms   {ours / memcpy:5.2f}x memcpy (target <= 1.5x)")
    print(f"  pickle through a pipe     {theirs * 1000:8.1f} ms   {theirs / memcpy:5.1f}x memcpy, "
          f"{theirs / max(ours, 1e-9):.1f}x cmpx")


if __name__ == "__main__":
    main()
