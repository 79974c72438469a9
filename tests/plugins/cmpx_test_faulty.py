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
KINDS = ("raise", "segfault", "abort", "exit", "sigkill", "memory", "hang", "drop-output", "garbage")


class FaultyBackend(cmpx.Backend):
    def load(self, model_path):
        self._fault("load")
        import onnxruntime

        self.session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def infer(self, feeds):
        self._fault("infer")
        outputs = dict(zip(self.names, self.session.run(self.names, feeds)))
        if self.options.get("fault") == "infer:drop-output":
            outputs.pop(self.names[-1])
        return outputs

    def _fault(self, phase):
        spec = self.options.get("fault") or "none"
        fault_phase, _, kind = spec.partition(":")
        if fault_phase != phase:
            return
        print(f"faulty backend: injecting {kind} during {phase}", file=sys.stderr, flush=True)
        if kind == "raise":
            raise RuntimeError(f"injected failure during {phase}")
        if kind == "segfault":
            ctypes.string_at(0)
        if kind == "abort":
            os.abort()
        if kind == "exit":
            os._exit(7)
        if kind == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if kind == "memory":
            raise MemoryError("injected out-of-memory")
        if kind == "hang":
            time.sleep(3600)
        if kind == "garbage":
            os.write(int(sys.argv[2]), b"\x00\x00\x00\x05garbage-not-msgpack")


@cmpx.hookimpl
def register_backends(registry):
    choices = tuple(f"{phase}:{kind}" for phase in PHASES for kind in KINDS) + ("none",)
    registry.add("faulty", "cmpx_test_faulty:FaultyBackend", description="ONNX Runtime with injected faults",
                 options=[cmpx.BackendOption("fault", help="PHASE:KIND fault to inject", default="none",
                                             choices=choices)])
