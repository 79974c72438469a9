"""A backend with a model format of its own, as TensorRT has engines and OpenVINO has IR: a ``.toy`` file is
JSON, {"inputs": [{"name", "dtype", "shape"}], "outputs": [{"name", "of", "scale"}]}, each output being an input
times a number. cmpx cannot read it, so the backend describes it."""

import json

import cmpx


class ToyBackend(cmpx.Backend):
    def load(self, model_path):
        with open(model_path) as f:
            self.model = json.load(f)  # a broken file fails here, as a corrupt engine would
        if self.options.get("load_log"):
            with open(self.options["load_log"], "a") as log:
                log.write(f"load {model_path} verbose={self.options.get('verbose')!r}\n")

    def describe(self):
        if self.options.get("describe") == "wrong-dtype":
            return [cmpx.TensorSpec("X", "float99", (1,))], [cmpx.TensorSpec("Y", "float32", (1,))]
        if self.options.get("describe") == "bad-shape":
            return [cmpx.TensorSpec("X", "float32", (1.5,))], [cmpx.TensorSpec("Y", "float32", (1,))]
        if self.options.get("describe") == "numpy-dims":  # numpy integers are integers too
            import numpy as np

            shape = tuple(np.int64(d) for d in self.model["inputs"][0]["shape"])
            return [cmpx.TensorSpec("X", "float32", shape)], [cmpx.TensorSpec("Y", "float32", None)]
        if self.options.get("describe") == "not-specs":
            return [("X", "float32", (1,))], []
        inputs = [cmpx.TensorSpec(i["name"], i["dtype"], None if i["shape"] is None else tuple(i["shape"]))
                  for i in self.model["inputs"]]
        outputs = [cmpx.TensorSpec(o["name"], self._dtype(o["of"]), None) for o in self.model["outputs"]]
        return inputs, outputs

    def _dtype(self, name):
        return next(i["dtype"] for i in self.model["inputs"] if i["name"] == name)

    def infer(self, feeds):
        return {o["name"]: (feeds[o["of"]] * o["scale"]).astype(feeds[o["of"]].dtype) for o in self.model["outputs"]}


class Described(cmpx.Backend):
    """Registers the format but cannot describe it: the error names the missing method."""

    def load(self, model_path):
        pass


@cmpx.hookimpl
def register_backends(registry):
    registry.add("toy", "cmpx_test_toyformat:ToyBackend", model_formats=(".toy",), options=[
        cmpx.BackendOption("load_log", help="append a line to this file on every load"),
        cmpx.BackendOption("describe", help="describe() variants: wrong-dtype, bad-shape, not-specs, numpy-dims"),
        cmpx.BackendOption("verbose", is_flag=True, help="a flag option (recorded in the load log)")])
    registry.add("toy-nodescribe", "cmpx_test_toyformat:Described", model_formats=(".toy",))
