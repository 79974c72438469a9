"""The ONNX reference evaluator backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from cmpx import Backend


class OnnxrefBackend(Backend):
    def load(self, model_path: str) -> None:
        model = model_path
        if self.marked:
            from cmpx.graph import exposed_model, model_directory

            model = exposed_model(model_path, self.marked)
            onnx.load_external_data_for_model(model, model_directory(model_path))
        self.evaluator = ReferenceEvaluator(model)
        self.output_names = list(self.evaluator.output_names)

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.evaluator.run(None, feeds)
        return dict(zip(self.output_names, outputs))
