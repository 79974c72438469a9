"""The TensorRT backend: its pure logic here, without TensorRT; the real thing on a GPU (tests marked gpu,
skipped elsewhere with the reason; scripts/gpu-check.sh runs them)."""

import pytest

from cmpx.errors import UsageError
from cmpx_trt import plugin
from cmpx_trt.layers import LayerOutput, select_outputs
from cmpx_trt.probe import cuda_problem
from cmpx_trt.profiles import build_profiles, profile_for
from cmpx_trt.settings import parse_optimization_level, parse_pool_limits, precision_plan

EXAMPLE = "examples/models/conv.onnx"


def test_profiles_take_the_kth_shape_of_each_input_and_default_the_rest():
    profiles = build_profiles(["X:[1,3]", "X:[8,3]"], ["X:[4,3]", "X:[16,3]"], ["X:[8,3]", "X:[32,3]"],
                              {"X": (1, 3), "Y": (2,)})
    assert [p.shapes["X"] for p in profiles] == [((1, 3), (4, 3), (8, 3)), ((8, 3), (16, 3), (32, 3))]
    assert all(p.shapes["Y"] == ((2,), (2,), (2,)) for p in profiles)
    assert profile_for(profiles, {"X": (20, 3), "Y": (2,)}) == 1
    with pytest.raises(UsageError, match=r"fit no optimization profile .*X \[1, 3\]\.\.\[8, 3\]"):
        profile_for(profiles, {"X": (64, 3), "Y": (2,)})


@pytest.mark.parametrize("low, opt, high, message", [
    (["X:[1,3]"], [], ["X:[4,3]"], "1 min, 0 opt and 1 max"),
    (["X:[4,3]"], ["X:[2,3]"], ["X:[8,3]"], "need min <= opt <= max"),
    (["Q:[1]"], ["Q:[1]"], ["Q:[1]"], "'Q' is not a model input"),
    (["X:3x1"], ["X:[1,3]"], ["X:[1,3]"], "the accepted form is NAME:[D0,D1,...]"),
])
def test_bad_profiles_are_usage_errors(low, opt, high, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_profiles(low, opt, high, {"X": (1, 3)})


def test_option_values():
    assert parse_pool_limits(["workspace:1G", "tactic_dram:512M"]) == {"workspace": 1 << 30, "tactic_dram": 512 << 20}
    with pytest.raises(UsageError, match="use POOL:SIZE"):
        parse_pool_limits(["workspace=1G"])
    assert parse_optimization_level("5") == 5 and parse_optimization_level(None) is None
    with pytest.raises(UsageError, match="from 0 to 5"):
        parse_optimization_level("9")


def test_precision_comes_from_the_graph_and_tf32_is_cleared_unless_asked():
    eleven, ten = precision_plan(11, False), precision_plan(10, True)
    assert eleven.strongly_typed and not eleven.legacy_flags and not eleven.tf32
    assert ten.legacy_flags and not ten.strongly_typed and ten.tf32
    assert precision_plan(10, False, strongly_typed_requested=True).strongly_typed
    assert precision_plan(11, False, strongly_typed_requested=False).strongly_typed


def test_marking_skips_shape_constant_and_loop_layers():
    layers = [LayerOutput("conv", "CONVOLUTION"), LayerOutput("shape", "SHAPE", is_shape_tensor=True),
              LayerOutput("const", "CONSTANT"), LayerOutput("body", "ELEMENTWISE", in_loop=True),
              LayerOutput("relu", "ACTIVATION"), LayerOutput("dims", "GATHER", is_shape_tensor=True)]
    assert select_outputs(layers, [], ["*"], []) == ["conv", "relu"]
    assert select_outputs(layers, ["relu", "const"], [], []) == ["relu"]
    assert select_outputs(layers, [], ["*"], ["re*"]) == ["conv"]


def test_the_description_says_which_path_is_active(monkeypatch):
    monkeypatch.setattr(plugin, "installed_version", lambda: None)
    assert "not installed: pip install 'cmpx[trt]'" in plugin.describe()
    monkeypatch.setattr(plugin, "installed_version", lambda: "11.1.0")
    assert "TensorRT 11.1.0" in plugin.describe() and "strongly typed" in plugin.describe()
    monkeypatch.setattr(plugin, "installed_version", lambda: "10.9.0")
    assert "legacy builder flags left unused" in plugin.describe()


@pytest.mark.skipif(cuda_problem() is None, reason="this machine has a CUDA device")
def test_without_a_gpu_the_worker_fails_with_a_one_line_reason_and_the_others_are_compared(run_cli):
    result = run_cli("run", EXAMPLE, "--backend", "trt", "--backend", "onnxrt", "--backend", "onnxref")
    assert result.exit_code == 3
    assert "trt failed during load: cmpx_trt.backend.TrtUnavailable: " in result.output
    assert "no CUDA driver" in result.output or "no CUDA device visible" in result.output
    assert "onnxrt vs onnxref: 1/1 iterations passed" in result.output


def test_tensorrt_options_are_offered_under_the_names_polygraphy_users_know(run_cli):
    help_text = run_cli("run", "--help").output
    for flag in ("--trt-min-shapes", "--trt-opt-shapes", "--trt-max-shapes", "--trt-outputs",
                 "--trt-exclude-outputs", "--save-engine", "--load-timing-cache", "--save-timing-cache",
                 "--builder-optimization-level", "--pool-limit", "--plugins", "--tf32", "--fp16", "--int8", "--fp8",
                 "--strongly-typed"):
        assert flag in help_text, flag


@pytest.mark.parametrize("flag", ["--fp16", "--fp8"])
def test_precision_flags_target_the_trt_backend(run_cli, flag):
    result = run_cli("run", EXAMPLE, "--backend", "trt", "--backend", "onnxrt", flag)
    assert f"trt:{flag[2:]}" in result.output  # the graph transform reaches TensorRT as Polygraphy users expect


@pytest.mark.gpu
@pytest.mark.parametrize("extra", [(), ("--fp16", "--atol", "1e-2", "--rtol", "1e-2"),
                                   ("--int8", "--atol", "0.2", "--rtol", "0.2")])
def test_trt_matches_onnx_runtime(run_cli, extra):
    result = run_cli("run", EXAMPLE, "--backend", "trt", "--backend", "onnxrt", "--atol", "1e-3", "--rtol", "1e-3",
                     *extra)
    assert result.exit_code == 0, result.output


@pytest.mark.gpu
def test_trt_dynamic_shapes_profiles_and_a_saved_engine(run_cli, tmp_path):
    engine = tmp_path / "identity.engine"
    result = run_cli("run", "examples/models/dynamic_identity.onnx", "--backend", "trt", "--backend", "onnxrt",
                     "--input-shapes", "X:[2,2,4,4]", "--trt-min-shapes", "X:[1,2,1,1]", "--trt-opt-shapes",
                     "X:[2,2,4,4]", "--trt-max-shapes", "X:[4,2,8,8]", "--save-engine", engine,
                     "--save-timing-cache", tmp_path / "timing.cache")
    assert result.exit_code == 0, result.output
    assert engine.stat().st_size > 0 and (tmp_path / "timing.cache").stat().st_size > 0


@pytest.mark.gpu
def test_trt_mark_all_finds_layers(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "trt", "--backend", "onnxrt", "--mark-all",
                     "--atol", "1e-3", "--rtol", "1e-3", "-v")  # -v: each passing marked tensor listed
    assert result.exit_code == 0, result.output
    assert "PASSED  mm1:" in result.output


def test_a_prebuilt_engine_refuses_build_options_by_name():
    from cmpx_trt.engines import EngineOptionError, check_engine_options

    check_engine_options({"min_shapes": (), "tf32": False, "save_engine": None, "plugins": ("lib.so",),
                          "strongly_typed": False})
    with pytest.raises(EngineOptionError, match=r"--trt-min-shapes, --save-engine, --tf32 apply when TensorRT builds"):
        check_engine_options({"min_shapes": ("X:[1]",), "save_engine": "out.engine", "tf32": True})


def test_engine_data_types_map_to_numpy_names():
    from types import SimpleNamespace

    from cmpx.dtypes import numpy_dtype
    from cmpx_trt.engines import TRT_TO_NUMPY, numpy_name

    assert numpy_name(SimpleNamespace(name="HALF")) == "float16"
    assert numpy_name("DataType.BF16") == "bfloat16"
    assert all(numpy_dtype(name).itemsize >= 1 for name in TRT_TO_NUMPY.values() if name != "int4")
    with pytest.raises(TypeError, match="FP4 has no numpy equivalent"):
        numpy_name(SimpleNamespace(name="FP4"))


def test_engine_profiles_are_read_per_input_and_index():
    from cmpx_trt.engines import engine_profiles

    bounds = {("X", 0): [(1, 3), (2, 3), (4, 3)], ("X", 1): [(5, 3), (8, 3), (16, 3)]}
    profiles = engine_profiles(["X"], 2, lambda name, k: bounds[(name, k)])
    assert profile_for(profiles, {"X": (3, 3)}) == 0 and profile_for(profiles, {"X": (9, 3)}) == 1
    assert profiles[1].shapes["X"] == ((5, 3), (8, 3), (16, 3))


def test_engine_files_are_a_trt_model_format_and_refuse_other_backends(run_cli, tmp_path):
    engine = tmp_path / "model.engine"
    engine.write_bytes(b"not really an engine")
    result = run_cli("run", engine, "--backend", "trt", "--backend", "onnxrt")
    assert result.exit_code == 2
    assert "is a .engine model, which only trt can load, not onnxrt" in result.output


@pytest.mark.skipif(cuda_problem() is None, reason="this machine has a CUDA device")
def test_without_a_gpu_an_engine_model_fails_to_load_with_the_reason(run_cli, tmp_path):
    engine = tmp_path / "model.engine"
    engine.write_bytes(b"\0" * 64)
    result = run_cli("run", engine, "--backend", "trt", "--backend", "trt")
    assert result.exit_code == 3
    assert "trt failed during load: cmpx_trt.backend.TrtUnavailable: " in result.output


@pytest.mark.gpu
def test_trt_runs_a_saved_engine_against_saved_onnx_runtime_outputs(run_cli, tmp_path):
    engine, saved = tmp_path / "identity.engine", tmp_path / "onnx-run"
    built = run_cli("run", "examples/models/dynamic_identity.onnx", "--backend", "trt", "--backend", "onnxrt",
                    "--input-shapes", "X:[2,2,4,4]", "--trt-min-shapes", "X:[1,2,1,1]", "--trt-opt-shapes",
                    "X:[2,2,4,4]", "--trt-max-shapes", "X:[4,2,8,8]", "--save-engine", engine,
                    "--save-outputs", saved)
    assert built.exit_code == 0, built.output
    result = run_cli("run", engine, "--backend", "trt", "--input-shapes", "X:[2,2,4,4]", "--load-outputs", saved)
    assert result.exit_code == 0, result.output
    assert "trt vs trt@onnx-run" in result.output
