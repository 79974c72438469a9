"""Bench-only backend: returns one large array it made at load, so that only the transport is measured."""

import numpy as np

import cmpx


class BlobBackend(cmpx.Backend):
    def load(self, model_path):
        self.blob = np.ones(int(self.options.get("mib") or 256) * 2**20 // 4, np.float32)

    def infer(self, feeds):
        return {"blob": self.blob}


@cmpx.hookimpl
def register_backends(registry):
    registry.add("blob", "cmpx_bench_blob:BlobBackend", options=[cmpx.BackendOption("mib", help="size", default="256")])
