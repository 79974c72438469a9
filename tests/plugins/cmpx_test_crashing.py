"""Test-only backend: ONNX Runtime (marking included) that crashes the worker with SIGSEGV in any inference of a
model holding a node of one op type, as a framework with a broken kernel does.

    cmpx reduce MODEL --backend crashing --backend onnxrt --crashing-op Softmax -p cmpx_test_crashing ...

``--crashing-after N`` lets the first N inferences of the worker process through (the run's own iterations), so
that only later ones crash (the subgraphs of --local-error).
"""

from __future__ import annotations

import ctypes
import sys

import cmpx
from cmpx_onnxrt.backend import OnnxrtBackend

INFERENCES = [0]  # in this worker process, whatever model it loaded


class CrashingBackend(OnnxrtBackend):
    def load(self, model_path):
        import onnx

        super().load(model_path)
        self.op_types = {node.op_type for node in onnx.load(model_path, load_external_data=False).graph.node}

    def infer_into(self, feeds, allocate):
        INFERENCES[0] += 1
        if self.options.get("op") in self.op_types and INFERENCES[0] > int(self.options.get("after") or 0):
            print(f"crashing backend: {self.options['op']} kernel crashes", file=sys.stderr, flush=True)
            ctypes.string_at(0)
        return super().infer_into(feeds, allocate)


@cmpx.hookimpl
def register_backends(registry):
    registry.add("crashing", "cmpx_test_crashing:CrashingBackend", supports_marking=True,
                 description="ONNX Runtime that crashes on models holding one op type",
                 options=[cmpx.BackendOption("op", help="the op type whose models crash", default="Softmax"),
                          cmpx.BackendOption("after", help="inferences that run before any crash", default="0")])
