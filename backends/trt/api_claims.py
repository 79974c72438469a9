"""What the backend claims about the TensorRT API it uses, beyond what its source says: read by
tests/test_trt_api_names.py, which checks every TensorRT name the backend uses against TensorRT's published API
(TensorRT 10's type stubs and TensorRT 11's lean runtime) on machines without TensorRT or a GPU.

The names themselves are read from the source (cmpx.testing.trt_names): attribute chains on the module
(``trt.BuilderFlag.TF32``), members of the objects those give (``builder.create_network(...)`` is an
INetworkDefinition, as the stubs annotate it), parameters annotated with a TensorRT class (a TensorRT object
passed to an unannotated one fails the test), and the methods the build-progress monitor overrides. Every name is
claimed for every major version below, except where the source asks first (``hasattr(trt, "IProgressMonitor")``):
then only where the name exists.
"""

from cmpx_trt.engines import TRT_TO_NUMPY
from cmpx_trt.layers import LOOP_TYPES, SKIPPED_TYPES
from cmpx_trt.settings import POOLS

MAJOR_VERSIONS = (10, 11)  # the TensorRT versions the backend is written for

MODULE_ALIASES = ("trt", "tensorrt", "self.trt")  # the expressions in this package's modules that are tensorrt

# Enum members the backend names by string (matched against ``.name``, or upper-cased into getattr).
MEMBER_NAMES = {
    "DataType": tuple(TRT_TO_NUMPY),
    "LayerType": tuple(sorted(SKIPPED_TYPES | LOOP_TYPES)),
    "MemoryPoolType": tuple(pool.upper() for pool in POOLS),
}

# What these return, from TensorRT's Python API documentation, where the stubs (and the lean runtime's
# signatures) leave the return type out.
RETURN_TYPES = {
    "get_plugin_registry": "IPluginRegistry",
    "OnnxParser.get_error": "ParserError",
}

# The names TensorRT 11's lean runtime cannot confirm because it has no builder side: checked against TensorRT
# 10's stubs only. A name that is new here is either builder-side (add it) or was removed in TensorRT 11.
NOT_IN_LEAN_RUNTIME = frozenset({
    "Builder", "IBuilderConfig", "ILayer", "INetworkDefinition", "ITensor", "LayerType",
    "NetworkDefinitionCreationFlag", "OnnxParser", "ParserError", "init_libnvinfer_plugins",
})
