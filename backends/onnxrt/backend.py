"""The ONNX Runtime backend. Runs only inside a cmpx worker process."""

from __future__ import annotations

import os

import numpy as np
import onnxruntime

from cmpx import Backend
from cmpx_onnxrt.providers import resolve_providers

OPTIMIZATION_LEVELS = {"disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
                       "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                       "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                       "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL}
OPTIMIZATION_LEVELS.update({level.name: level for level in OPTIMIZATION_LEVELS.values()})  # Polygraphy's spelling
EXTERNAL_DATA_FOLDER = "session.model_external_initializers_file_folder_path"
ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int8)": np.int8, "tensor(int16)": np.int16, "tensor(int32)": np.int32, "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16, "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}


class OnnxrtBackend(Backend):
    def load(self, model_path: str) -> None:
        providers = resolve_providers(self.options.get("providers") or ("cpu",),
                                      onnxruntime.get_available_providers())
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only; warnings go to the worker log
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:  # explicit: ONNX Runtime's own default ignores it above the cores
            options.intra_op_num_threads = int(threads)  # (a sweep's cell sets it, cmpx.sweep.threads)
        if self.options.get("optimization"):
            options.graph_optimization_level = OPTIMIZATION_LEVELS[self.options["optimization"]]
        model: str | bytes = model_path
        if self.marked:  # expose intermediates: the graph in memory, its external weights read from their folder
            from cmpx.model.graph import exposed_model, model_directory

            model = exposed_model(model_path, self.marked).SerializeToString()
            options.add_session_config_entry(EXTERNAL_DATA_FOLDER, model_directory(model_path))
        self.session = onnxruntime.InferenceSession(model, sess_options=options, providers=providers)
        self.output_names = [output.name for output in self.session.get_outputs()]
        self.output_dtypes = {o.name: ORT_TYPES.get(o.type) for o in self.session.get_outputs()}
        # Only a full shape ORT states is bound ahead: it reports [] both for a scalar and for an output whose rank
        # it does not know, so [] is treated as unknown (a scalar costs nothing to copy). An output that is also a
        # graph input is never bound: ONNX Runtime does not write a pre-bound buffer for it.
        input_names = {i.name for i in self.session.get_inputs()}
        self._unbindable = {name for name in self.output_names if name in input_names}
        self._static_shapes = {o.name: tuple(o.shape) for o in self.session.get_outputs()
                               if o.shape and all(isinstance(d, int) and d >= 0 for d in o.shape)
                               and o.name not in self._unbindable}
        self._shapes_by_inputs: dict[tuple, dict[str, tuple[int, ...]]] = {}
        self._learn_shapes = True  # off once an output's shape turned out to depend on the data (NonZero, ...)
        # IOBinding binds tensors only: a model with a sequence or map output (a ZipMap) runs the plain way
        self._bindable = providers == ["CPUExecutionProvider"] and all(o.type.startswith("tensor(")
                                                                       for o in self.session.get_outputs())

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.session.run(self.output_names, feeds)
        return dict(zip(self.output_names, outputs))

    def infer_into(self, feeds: dict[str, np.ndarray], allocate) -> dict[str, np.ndarray]:
        """Bind outputs whose shapes are known (static, or seen before for these input shapes) to shared memory
        with IOBinding, so ONNX Runtime writes them where the coordinator reads them; others are copied once."""
        if not self._bindable:
            return self.infer(feeds)
        signature = tuple((name, array.shape, array.dtype.str) for name, array in sorted(feeds.items()))
        learned = self._shapes_by_inputs.get(signature, {}) if self._learn_shapes else {}
        try:
            results = self._run_bound(feeds, allocate, dict(self._static_shapes, **learned))
        except Exception:
            if not learned:
                raise
            # a shape learned from an earlier run did not hold (it depends on the values): never guess again
            self._learn_shapes = False
            self._shapes_by_inputs.clear()
            results = self._run_bound(feeds, allocate, self._static_shapes)
        if self._learn_shapes:
            self._shapes_by_inputs[signature] = {name: tuple(array.shape) for name, array in results.items()
                                                 if name not in self._unbindable}
        return results

    def _run_bound(self, feeds: dict[str, np.ndarray], allocate, known: dict[str, tuple[int, ...]]):
        binding = self.session.io_binding()
        for name, array in feeds.items():
            binding.bind_cpu_input(name, np.require(array, requirements="C"))  # (ascontiguousarray makes 0-d 1-d)
        bound = {}
        for name in self.output_names:
            dtype = self.output_dtypes[name]
            if name in known and dtype is not None:
                bound[name] = allocate(name, dtype, known[name])
                binding.bind_output(name, "cpu", 0, dtype, known[name], bound[name].ctypes.data)
            else:
                binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        results = {}
        for name, value in zip(self.output_names, binding.get_outputs()):
            results[name] = bound[name] if name in bound else value.numpy()
        return results

    def framework_version(self) -> str:
        return onnxruntime.__version__

    def close(self) -> None:
        self.session = None
