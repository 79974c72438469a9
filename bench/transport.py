"""Moving a 256 MiB output from a worker to the coordinator: cmpx's shared memory against a plain memcpy and
against pickling through a multiprocessing pipe, measured in one run.

    python bench/transport.py [--mib 256] [--repeat 5]

cmpx's figure is the real path: the worker copies the backend's array into a shared-memory segment (reused and
still mapped from the previous iteration, as in a run) and the coordinator maps it (through the same mapping
cache a run uses) and reads every byte (a sum over it). The pipe's figure also includes that read; the ratios
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

from cmpx.transport import shm, supervisor  # noqa: E402
from cmpx.plugins import PluginSettings  # noqa: E402


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
    worker = supervisor.start_worker("blob", dict(os.environ), setup={
        "backend": "blob", "target": "cmpx_bench_blob:BlobBackend", "plugins": settings.to_message()})
    prefix = shm.new_run_prefix()
    mappings = shm.MappingCache(768 << 20)
    try:
        supervisor.wait_replies([worker], "hello", "start", 60)
        supervisor.send(worker, {"op": "load", "id": 1, "backend": "blob", "options": {"mib": str(args.mib)},
                                 "model": "-", "mark": [], "plugins": settings.to_message()}, "load")
        supervisor.wait_replies([worker], "ready", "load", 60)

        def through_shared_memory():
            request = worker.next_id()
            supervisor.send(worker, {"op": "infer", "id": request, "inputs": [], "out_prefix": prefix + "o"},
                            "infer")
            reply = supervisor.wait_replies([worker], "result", "infer", 60, {"blob": request})["blob"]
            [descriptor] = reply["outputs"]
            segment = mappings.get(descriptor["segment"])
            array = shm.read_tensors([descriptor], {segment.name: segment})["blob"]
            float(array.sum(dtype=np.float64))  # the coordinator reads every byte
            del array
            mappings.put(segment)

        through_shared_memory()  # the first iteration creates the segment; later ones reuse it
        shared = best(through_shared_memory, args.repeat)
    finally:
        mappings.close()
        supervisor.release(worker)
        shm.sweep(prefix)

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
