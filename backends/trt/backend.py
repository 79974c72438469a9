"""The TensorRT backend. Runs only inside a cmpx worker process.

Written against the documented TensorRT Python API (11.x, and 10.x where it differs) and pycuda; see README.md
for what has and has not been run on real hardware. The TensorRT-specific steps are kept to the few methods
below; profiles, option values, precision and layer selection are plain functions with tests of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

import cmpx
from cmpx.dtypes import numpy_dtype
from cmpx_trt.build_progress import BuildPhases
from cmpx_trt.engines import check_engine_options, engine_profiles, is_engine, numpy_name
from cmpx_trt.layers import LOOP_TYPES, LayerOutput, select_outputs
from cmpx_trt.probe import cuda_problem
from cmpx_trt.profiles import build_profiles, profile_for
from cmpx_trt.settings import parse_optimization_level, parse_pool_limits, precision_plan

if TYPE_CHECKING:  # the parameters' TensorRT classes (tests/test_trt_api_names.py checks them)
    import tensorrt


class TrtUnavailable(RuntimeError):
    pass


def _import_stack():
    problem = cuda_problem()
    if problem:
        raise TrtUnavailable(problem)
    try:
        import tensorrt
    except ImportError:
        raise TrtUnavailable("TensorRT is not installed: pip install 'cmpx[trt]'") from None
    if getattr(tensorrt, "__file__", None) is None:  # a namespace package: only tensorrt-stubs' .pyi files
        raise TrtUnavailable("TensorRT is not installed (only its type stubs, tensorrt-stubs): pip install 'cmpx[trt]'")
    try:
        import pycuda.autoinit  # noqa: F401  (creates the CUDA context of this worker)
        import pycuda.driver
    except ImportError:
        raise TrtUnavailable("pycuda is not installed: pip install 'cmpx[trt]'") from None
    return tensorrt, pycuda.driver


class TrtBackend(cmpx.Backend):
    def load(self, model_path: str) -> None:
        trt, cuda = _import_stack()
        self.trt, self.cuda = trt, cuda
        self.logger = trt.Logger(trt.Logger.WARNING)
        trt.init_libnvinfer_plugins(self.logger, "")
        for library in self.options.get("plugins") or ():
            trt.get_plugin_registry().load_library(library)
        if is_engine(model_path):
            check_engine_options(self.options)
            with open(model_path, "rb") as f:
                serialized = f.read()
        else:
            serialized = self._build(model_path)
        self.progress("deserializing the engine")
        self.engine = trt.Runtime(self.logger).deserialize_cuda_engine(serialized)
        if self.engine is None:
            raise RuntimeError(f"TensorRT could not deserialize the engine of {model_path}")
        self.context = self.engine.create_execution_context()
        self.stream = cuda.Stream()
        self.names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        self.inputs = [n for n in self.names if self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in self.names if n not in self.inputs]
        if is_engine(model_path) and any(d < 0 for n in self.inputs for d in self.engine.get_tensor_shape(n)):
            self.profiles = engine_profiles(self.inputs, self.engine.num_optimization_profiles,
                                            lambda name, k: self.engine.get_tensor_profile_shape(name, k))
        self.device_buffers: dict[str, Any] = {}
        self.pinned: dict[tuple[int, int], Any] = {}

    def describe(self) -> tuple[list[cmpx.TensorSpec], list[cmpx.TensorSpec]]:
        """A prebuilt engine's inputs and outputs; dynamic dimensions (-1) are None."""
        def spec(name: str) -> cmpx.TensorSpec:
            shape = tuple(int(d) if d >= 0 else None for d in self.engine.get_tensor_shape(name))
            return cmpx.TensorSpec(name, numpy_name(self.engine.get_tensor_dtype(name)), shape)

        return [spec(name) for name in self.inputs], [spec(name) for name in self.outputs]

    def _build(self, model_path: str) -> bytes:
        trt = self.trt
        plan = precision_plan(int(trt.__version__.split(".")[0]), bool(self.options.get("tf32")),
                              bool(self.options.get("strongly_typed")))
        builder = trt.Builder(self.logger)
        flags = 0
        if plan.strongly_typed and hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):
            flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        network = builder.create_network(flags)
        parser = trt.OnnxParser(network, self.logger)
        self.progress("parsing the ONNX model")
        if not parser.parse_from_file(model_path):
            errors = [parser.get_error(i) for i in range(parser.num_errors)]
            raise RuntimeError("TensorRT's ONNX parser failed: " + "; ".join(
                f"{getattr(e, 'node_name', lambda: '')() or 'node ' + str(e.node())}: {e.desc()}" for e in errors))
        self._mark(network)
        config = builder.create_builder_config()
        if hasattr(trt.BuilderFlag, "TF32") and not plan.tf32:
            config.clear_flag(trt.BuilderFlag.TF32)
        for pool, size in parse_pool_limits(self.options.get("pool_limit") or ()).items():
            config.set_memory_pool_limit(getattr(trt.MemoryPoolType, pool.upper()), size)
        level = parse_optimization_level(self.options.get("builder_optimization_level"))
        if level is not None:
            config.builder_optimization_level = level
        self._add_profiles(builder, network, config)
        self._timing_cache(config)
        monitor = _progress_monitor(trt, self.progress)
        if monitor is not None:
            config.progress_monitor = monitor  # must outlive the build: kept in this frame until it returns
        serialized = builder.build_serialized_network(network, config)
        if serialized is None:
            raise RuntimeError("TensorRT could not build an engine (see the worker's log above)")
        if self.options.get("save_timing_cache"):
            with open(self.options["save_timing_cache"], "wb") as f:
                f.write(memoryview(config.get_timing_cache().serialize()))
        if self.options.get("save_engine"):
            with open(self.options["save_engine"], "wb") as f:
                f.write(memoryview(serialized))
        return bytes(memoryview(serialized))

    def _mark(self, network: tensorrt.INetworkDefinition) -> None:
        """Mark the ONNX tensors cmpx asks for (--mark-all, --onnx-outputs) and --trt-outputs names and patterns
        (same forms as --onnx-outputs: 'mark all', '*', fnmatch patterns, @file)."""
        from cmpx.model.marking import expand_words

        patterns = expand_words("--trt-outputs", self.options.get("outputs") or ())
        if not (self.marked or patterns):
            return
        outputs, in_loop = [], False
        for index in range(network.num_layers):
            layer = network.get_layer(index)
            kind = layer.type.name
            in_loop = in_loop or kind in LOOP_TYPES
            for k in range(layer.num_outputs):
                tensor = layer.get_output(k)
                outputs.append(LayerOutput(tensor.name, kind, tensor.is_shape_tensor, in_loop))
            if kind == "LOOP_OUTPUT":
                in_loop = False
        existing = {network.get_output(i).name for i in range(network.num_outputs)}
        tensors = {network.get_layer(i).get_output(k).name: network.get_layer(i).get_output(k)
                   for i in range(network.num_layers) for k in range(network.get_layer(i).num_outputs)}
        exclude = expand_words("--trt-exclude-outputs", self.options.get("exclude_outputs") or ())
        for name in select_outputs(outputs, self.marked, patterns, exclude):
            if name not in existing:
                network.mark_output(tensors[name])

    def _add_profiles(self, builder: tensorrt.Builder, network: tensorrt.INetworkDefinition,
                      config: tensorrt.IBuilderConfig) -> None:
        inputs = [network.get_input(i) for i in range(network.num_inputs)]
        if all(all(d >= 0 for d in tensor.shape) for tensor in inputs) and not self.options.get("min_shapes"):
            return
        defaults = {t.name: tuple(max(d, 1) for d in t.shape) for t in inputs}
        self.profiles = build_profiles(self.options.get("min_shapes") or (), self.options.get("opt_shapes") or (),
                                       self.options.get("max_shapes") or (), defaults)
        for profile in self.profiles:
            trt_profile = builder.create_optimization_profile()
            for name, (low, opt, high) in profile.shapes.items():
                trt_profile.set_shape(name, low, opt, high)
            config.add_optimization_profile(trt_profile)

    def _timing_cache(self, config: tensorrt.IBuilderConfig) -> None:
        data = b""
        if self.options.get("load_timing_cache"):
            with open(self.options["load_timing_cache"], "rb") as f:
                data = f.read()
        config.set_timing_cache(config.create_timing_cache(data), ignore_mismatch=False)

    def infer_into(self, feeds: dict[str, np.ndarray], allocate) -> dict[str, np.ndarray]:
        cuda = self.cuda
        if getattr(self, "profiles", None):
            index = profile_for(self.profiles, {n: tuple(a.shape) for n, a in feeds.items()})
            self.context.set_optimization_profile_async(index, self.stream.handle)
        for name in self.inputs:
            array = np.require(feeds[name], requirements="C")  # a 0-d input stays 0-d
            self.context.set_input_shape(name, array.shape)
            device = self._device_buffer(name, array.nbytes)
            cuda.memcpy_htod_async(device, array, self.stream)
            self.context.set_tensor_address(name, int(device))
        results = {}
        for name in self.outputs:
            shape = tuple(self.context.get_tensor_shape(name))
            dtype = numpy_dtype(numpy_name(self.engine.get_tensor_dtype(name)))
            host = allocate(name, dtype, shape)  # shared memory the coordinator reads: no extra host copy
            device = self._device_buffer(name, host.nbytes)
            self.context.set_tensor_address(name, int(device))
            results[name] = host
        if not self.context.execute_async_v3(self.stream.handle):
            raise RuntimeError("TensorRT's execute_async_v3 failed")
        for name, host in results.items():
            cuda.memcpy_dtoh_async(self._pinned(host), self.device_buffers[name][0], self.stream)
        self.stream.synchronize()
        return results

    def _pinned(self, host: np.ndarray) -> np.ndarray:
        """The shared-memory buffer registered as page-locked (once per buffer: cmpx reuses them across
        iterations), so the copy from the GPU is a real asynchronous DMA; unregistered if that fails."""
        key = (host.ctypes.data, host.nbytes)
        pinned = self.pinned.get(key)
        if pinned is None:
            try:
                pinned = self.cuda.register_host_memory(host)
            except Exception:  # not every mapping can be pinned; a pageable copy is still correct
                pinned = host
            self.pinned[key] = pinned
        return pinned

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.infer_into(feeds, lambda name, dtype, shape: np.empty(shape, dtype))

    def _device_buffer(self, name: str, nbytes: int):
        buffer = self.device_buffers.get(name)
        if buffer is None or buffer[1] < nbytes:
            buffer = (self.cuda.mem_alloc(max(nbytes, 1)), max(nbytes, 1))
            self.device_buffers[name] = buffer
        return buffer[0]

    def framework_version(self) -> str:
        return self.trt.__version__

    def close(self) -> None:
        self.pinned.clear()
        self.device_buffers.clear()
        self.context = self.engine = None


def _progress_monitor(trt, report):
    """A trt.IProgressMonitor sending the build's phases to ``report`` (Backend.progress); None where this
    TensorRT has no progress monitor."""
    if not hasattr(trt, "IProgressMonitor"):
        return None

    base: Any = trt.IProgressMonitor  # TensorRT's class, from the module the worker imported

    class Monitor(base):
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self.phases = BuildPhases()

        def phase_start(self, phase_name, parent_phase, num_steps):
            report("building: " + self.phases.start(phase_name, parent_phase, num_steps))

        def step_complete(self, phase_name, step):
            report("building: " + self.phases.step(phase_name, step))
            return True  # False would cancel the build

        def phase_finish(self, phase_name):
            report("building: " + self.phases.finish(phase_name))

    return Monitor()
