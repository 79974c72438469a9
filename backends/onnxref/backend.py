"""The ONNX reference evaluator backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import numpy as np
from onnx.reference import ReferenceEvaluator

from cmpx import Backend


class OnnxrefBackend(Backend):
    def load(self, model_path: str) -> None:
        self.evaluator = ReferenceEvaluator(model_path)
        self.output_names = list(self.evaluator.output_names)

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.evaluator.run(None, feeds)
        return dict(zip(self.output_names, outputs))
