"""Test-only backend plugin that runs ONNX Runtime but injects one fault on request.

    cmpx run MODEL --backend onnxrt --backend faulty --faulty-fault infer:segfault -p cmpx_test_faulty
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

import cmpx

PHASES = ("load", "infer")
KINDS = ("raise", "huge-error", "segfault", "abort", "exit", "sigkill", "memory", "hang", "sleep",
         "hang-ignoring-sigterm", "drop-output", "string-output", "garbage", "truncated-frame", "truncated-frame-exit",
         "oversized-frame", "fork-helper", "kill-runner")
STAMP_ENV = "CMPX_TEST_FAULT_STAMP"  # a file that gets the time just before the fault
CALLS_ENV = "CMPX_TEST_FAULT_CALLS"  # a file that gets one line per infer call


class FaultyBackend(cmpx.Backend):
    def load(self, model_path):
        self._fault("load")
        import onnxruntime

        self.session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def infer(self, feeds):
        self.calls = getattr(self, "calls", 0) + 1
        if os.environ.get(CALLS_ENV):
            with open(os.environ[CALLS_ENV], "a") as calls:
                calls.write("call\n")
        if self.calls > int(self.options.get("after") or 0):
            self._fault("infer")
        outputs = dict(zip(self.names, self.session.run(self.names, feeds)))
        if self.options.get("fault") == "infer:drop-output":
            outputs.pop(self.names[-1])
        if self.options.get("fault") == "infer:string-output":  # a framework returning text where numbers belong
            outputs[self.names[-1]] = outputs[self.names[-1]].astype(str)
        return outputs

    def _fault(self, phase):
        spec = self.options.get("fault") or "none"
        fault_phase, _, kind = spec.partition(":")
        if fault_phase != phase:
            return
        record = self.options.get("record")
        if record:  # one line per injected fault; --faulty-times N: only while it has fewer than N lines
            if os.path.exists(record) and sum(1 for _ in open(record)) >= int(self.options.get("times") or 1e9):
                return
            with open(record, "a") as lines:
                lines.write(f"{kind} {os.getpid()}\n")
        print(f"faulty backend: injecting {kind} during {phase}", file=sys.stderr, flush=True)
        if os.environ.get(STAMP_ENV):
            with open(os.environ[STAMP_ENV], "w") as stamp:
                stamp.write(repr(time.time()))
        out = int(sys.argv[2])  # the worker's frame pipe (python -m cmpx.transport.worker FD_IN FD_OUT PID)
        if kind == "raise":
            raise RuntimeError(f"injected failure during {phase}")
        if kind == "huge-error":  # like the reference evaluator's messages, which print whole tensors (42 MB)
            raise RuntimeError(f"injected failure during {phase}: the real cause\n" + "[0.5, 0.25] " * 4_000_000
                               + "\nthe end of the message")
        if kind == "segfault":
            ctypes.string_at(0)
        if kind == "abort":
            os.abort()
        if kind == "exit":
            os._exit(7)
        if kind == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "kill-runner":  # the process running the cell (a sweep's runner, a Ray worker) killed, as by OOM
            os.kill(os.getppid(), signal.SIGKILL)
            time.sleep(3600)
        if kind == "memory":
            raise MemoryError("injected out-of-memory")
        if kind == "hang":
            time.sleep(3600)
        if kind == "sleep":  # slow, not stuck: each such call takes a second
            time.sleep(1)
        if kind == "hang-ignoring-sigterm":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(3600)
        if kind == "garbage":
            os.write(out, b"\x00\x00\x00\x05garbage-not-msgpack")
        if kind.startswith("truncated-frame"):
            os.write(out, b"\x00\x00\x01\x00" + b"\x81" * 10)  # announces 256 bytes, sends 10
            if kind == "truncated-frame-exit":
                os._exit(0)
            time.sleep(3600)
        if kind == "fork-helper":  # like a framework forking a helper process that would outlive the worker
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            return
        if kind == "oversized-frame":
            os.write(out, b"\x7f\xff\xff\xff")
            time.sleep(3600)


@cmpx.hookimpl
def register_backends(registry):
    choices = tuple(f"{phase}:{kind}" for phase in PHASES for kind in KINDS) + ("none",)
    registry.add("faulty", "cmpx_test_faulty:FaultyBackend", description="ONNX Runtime with injected faults",
                 options=[cmpx.BackendOption("fault", help="PHASE:KIND fault to inject", default="none",
                                             choices=choices),
                          cmpx.BackendOption("after", help="inferences to run before an infer fault", default="0"),
                          cmpx.BackendOption("record", help="a file that gets a line per injected fault"),
                          cmpx.BackendOption("times", help="inject only while --faulty-record has fewer lines")])
