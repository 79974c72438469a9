"""Issue #27, item 10: the TensorRT backend cannot run here, so it is checked against TensorRT's published API
instead. Every TensorRT name it uses (modules, classes, enum members, methods, properties, keyword arguments) must
be in TensorRT 10.13's type stubs (tensorrt-stubs, installed with --no-deps, read as text) and, where the runtime
half of the API has it, in TensorRT 11.4's lean runtime (tensorrt-lean-cu12, which imports without a GPU), for the
versions the backend claims it for (cmpx_trt.api_claims). A misspelt or removed name fails here."""

from pathlib import Path

import pytest

import cmpx_trt
from cmpx.testing.trt_api import (LeanRuntimeAPI, StubsAPI, declared_members, deprecated, lookup, problems,
                                  uncovered_roots)
from cmpx.testing.trt_names import source_uses
from cmpx_trt import api_claims

STUBS_INSTALL = "pip install --no-deps 'tensorrt-stubs==10.13.*'"
LEAN_INSTALL = "pip install 'tensorrt-lean-cu12==11.4.*'"
PACKAGE = Path(cmpx_trt.__file__).parent


@pytest.fixture(scope="module")
def stubs():
    api = StubsAPI.installed()
    if api is None:
        pytest.skip(f"TensorRT's type stubs are not installed ({STUBS_INSTALL})")
    return api


@pytest.fixture(scope="module")
def lean():
    api = LeanRuntimeAPI.installed()
    if api is None:
        pytest.skip(f"TensorRT's lean runtime is not installed ({LEAN_INSTALL})")
    return api


@pytest.fixture(scope="module")
def read_backend(stubs):
    """What each module of cmpx_trt uses of TensorRT, read from its source."""
    return {path.name: source_uses(path.read_text(encoding="utf-8"), path.name, api_claims.MODULE_ALIASES, stubs,
                                   api_claims.RETURN_TYPES)
            for path in sorted(PACKAGE.glob("*.py"))}


@pytest.fixture(scope="module")
def uses(read_backend):
    return [use for found in read_backend.values() for use in found.uses] + \
        declared_members(api_claims.MEMBER_NAMES, "api_claims.MEMBER_NAMES")


@pytest.mark.parametrize("major, install", [(10, STUBS_INSTALL), (11, LEAN_INSTALL)], ids=["10", "11"])
def test_every_tensorrt_name_the_backend_uses_is_in_the_published_api(major, install, stubs, uses):
    apis = [api for api in (stubs, LeanRuntimeAPI.installed()) if api is not None]
    assert major in api_claims.MAJOR_VERSIONS and {api.major for api in apis} <= set(api_claims.MAJOR_VERSIONS)
    if major not in {api.major for api in apis}:
        pytest.skip(f"no published TensorRT {major} API is installed ({install})")
    assert len({use.name for use in uses}) > 80  # the reading found the backend's names, not next to none
    assert problems(uses, apis, (major,)) == []


def test_the_backend_declares_what_its_source_cannot_say(read_backend):
    """What is done with a TensorRT value whose class neither the stubs nor api_claims.RETURN_TYPES say, or that
    is passed to an unannotated parameter, would go unchecked; so would names getattr computes unless
    api_claims.MEMBER_NAMES lists them."""
    assert [line for found in read_backend.values() for line in found.untyped] == []
    dynamic = {owner for found in read_backend.values() for owner in found.dynamic}
    assert dynamic <= set(api_claims.MEMBER_NAMES)


def test_no_name_the_backend_claims_for_every_version_is_deprecated_in_tensorrt_10(stubs, uses):
    """TensorRT 11 removed what 10 deprecated (the weak-typing flags); the lean runtime cannot confirm the builder
    side, so a deprecation in 10.13 is the warning."""
    assert deprecated(uses, stubs) == []


def test_the_names_the_lean_runtime_cannot_confirm_are_the_declared_builder_side(lean, uses):
    assert uncovered_roots(uses, lean) == api_claims.NOT_IN_LEAN_RUNTIME


def test_the_declared_return_types_fill_gaps_the_stubs_leave(stubs):
    for name, returns in api_claims.RETURN_TYPES.items():
        assert lookup(stubs, name).returns in ("...", "typing.Any"), f"the stubs now say what {name} returns"
        assert stubs.is_class(returns), returns


PROBE = '''
import tensorrt as trt

def build(logger, cache):
    builder = trt.Builder(logger)
    network = builder.create_netwrok(0)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.FP16)
    config.set_timing_cache(cache, ignore_mismach=False)
    if hasattr(trt.BuilderFlag, "BF16"):
        config.set_flag(trt.BuilderFlag.BF16)
    if hasattr(trt, "IProgresMonitor"):
        pass
    engine = trt.Runtime(logger).deserialize_cuda_engine(b"")
    engine.get_binding_shape(0)
    inputs = [builder.create_network(0).get_input(i) for i in range(2)]
    shapes = [tensor.shap for tensor in inputs]
    trt.get_plugin_registry().load_library("x.so")
    getattr(trt.MemoryPoolType, "workspace".upper())
    return describe(config)


def describe(config):
    return config.num_optimization_profiles
'''


def test_the_checker_names_each_misspelt_removed_or_unknown_name(stubs, lean):
    found = source_uses(PROBE, "probe.py", ("trt",), stubs)
    said = problems(found.uses, [stubs, lean], (10, 11))
    lean_label = lean.label
    assert said == sorted([
        f"Builder.create_netwrok (probe.py:6) is not in {stubs.label}",
        f"BuilderFlag.FP16 (probe.py:8) is not in {lean_label}",  # removed in 11; guarded BF16 is not reported
        f"ICudaEngine.get_binding_shape (probe.py:15) is not in {stubs.label}",
        f"ICudaEngine.get_binding_shape (probe.py:15) is not in {lean_label}",
        f"IBuilderConfig.set_timing_cache (probe.py:9) takes no keyword 'ignore_mismach' in {stubs.label}",
        f"IProgresMonitor (probe.py:12) is asked for with hasattr/getattr but is in none of: {stubs.label}, "
        f"{lean_label}",
        f"ITensor.shap (probe.py:17) is not in {stubs.label}",
    ])
    assert deprecated(found.uses, stubs) == ["BuilderFlag.FP16 (probe.py:8)"]
    assert found.untyped == [
        "probe.py:18: .load_library on what get_plugin_registry() returns, whose TensorRT class the stubs do not "
        "say (annotate it, or declare the return type)",
        "probe.py:20: IBuilderConfig passed to describe(config), a parameter not annotated with its TensorRT class",
    ]
    assert found.dynamic == ["MemoryPoolType"]
