"""The ONNX Runtime backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import numpy as np
import onnxruntime

from cmpx import Backend
from cmpx_onnxrt.providers import resolve_providers

EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"


class OnnxrtBackend(Backend):
    def load(self, model_path: str) -> None:
        providers = resolve_providers(self.options.get("providers") or ("cpu",),
                                      onnxruntime.get_available_providers())
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only; warnings go to the worker log
        model: str | bytes = model_path
        if self.marked:  # expose intermediates: the graph in memory, its external weights read from their folder
            from cmpx.graph import exposed_model, model_directory

            model = exposed_model(model_path, self.marked).SerializeToString()
            options.add_session_config_entry(EXTERNAL_DATA_FOLDER, model_directory(model_path))
        self.session = onnxruntime.InferenceSession(model, sess_options=options, providers=providers)
        self.output_names = [output.name for output in self.session.get_outputs()]

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.session.run(self.output_names, feeds)
        return dict(zip(self.output_names, outputs))

    def close(self) -> None:
        self.session = None
