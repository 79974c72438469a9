"""A test backend that declares the capabilities TensorRT has, under another name: it takes Polygraphy's precision
flags (--fp16...), and marking tensors changes what it computes (its "layer fusion"). Backed by ONNX Runtime."""

import cmpx


class CapableBackend(cmpx.Backend):
    def load(self, model_path):
        import onnxruntime

        self.session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def infer(self, feeds):
        return dict(zip(self.names, self.session.run(self.names, feeds)))


@cmpx.hookimpl
def register_backends(registry):
    registry.add("capable", "cmpx_test_capable:CapableBackend", precision_flags=("fp16", "int8"),
                 marking_changes_fusion=True,
                 options=[cmpx.BackendOption("outputs", multiple=True, marks=True, help="tensors to mark")])
