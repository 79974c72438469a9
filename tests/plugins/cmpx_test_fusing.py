"""Test-only backend: ONNX Runtime (marking included) whose "layer fusion" computes in float16 unless tensors are
marked, as TensorRT's fusion changes what it computes when tensors are marked (it registers
``marking_changes_fusion`` as TensorRT does). Unmarked, its outputs are rounded to float16; with tensors marked
they are exact.

    cmpx reduce MODEL --backend onnxrt --backend fusing -p cmpx_test_fusing ...
"""

from __future__ import annotations

import numpy as np

import cmpx
from cmpx_onnxrt.backend import OnnxrtBackend


class FusingBackend(OnnxrtBackend):
    def infer_into(self, feeds, allocate):
        outputs = self.infer(feeds)
        if self.marked:
            return outputs
        return {name: value.astype(np.float16).astype(value.dtype) if value.dtype == np.float32 else value
                for name, value in outputs.items()}


@cmpx.hookimpl
def register_backends(registry):
    registry.add("fusing", "cmpx_test_fusing:FusingBackend", supports_marking=True, marking_changes_fusion=True,
                 description="ONNX Runtime computing in float16 unless tensors are marked")
