"""The smallest third-party backend, as docs/plugins.md ('In short') shows it (here backed by onnx.reference)."""

import cmpx


class MyBackend(cmpx.Backend):
    def load(self, model_path):
        from onnx.reference import ReferenceEvaluator

        self.evaluator = ReferenceEvaluator(model_path)

    def infer(self, feeds):  # dict name -> numpy array, returns the same
        return dict(zip(self.evaluator.output_names, self.evaluator.run(None, feeds)))


@cmpx.hookimpl
def register_backends(registry):
    registry.add("mine", "cmpx_test_minimal:MyBackend")
