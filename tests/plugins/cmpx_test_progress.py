"""A backend that reports progress while it loads (as TensorRT does while it builds): four steps, 0.15 s each;
inference by onnx.reference. It also prints a warning to stderr, as frameworks do."""

import sys
import time

import cmpx


class Chatty(cmpx.Backend):
    def load(self, model_path):
        from onnx.reference import ReferenceEvaluator

        print("chatty: a warning from the framework", file=sys.stderr)
        for step in range(1, 5):
            self.progress(f"step {step}/4")
            time.sleep(0.15)
        self.evaluator = ReferenceEvaluator(model_path)

    def infer(self, feeds):
        return dict(zip(self.evaluator.output_names, self.evaluator.run(None, feeds)))


@cmpx.hookimpl
def register_backends(registry):
    registry.add("chatty", "cmpx_test_progress:Chatty")
