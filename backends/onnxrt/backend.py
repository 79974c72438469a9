"""The ONNX Runtime backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import numpy as np
import onnxruntime

from cmpx import Backend
from cmpx_onnxrt.providers import resolve_providers


class OnnxrtBackend(Backend):
    def load(self, model_path: str) -> None:
        providers = resolve_providers(self.options.get("providers") or ("cpu",),
                                      onnxruntime.get_available_providers())
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only; warnings go to the worker log
        self.session = onnxruntime.InferenceSession(model_path, sess_options=options, providers=providers)
        self.output_names = [output.name for output in self.session.get_outputs()]

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.session.run(self.output_names, feeds)
        return dict(zip(self.output_names, outputs))

    def close(self) -> None:
        self.session = None
