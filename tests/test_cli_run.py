"""End to end: the real CLI, real worker processes, real ONNX Runtime and onnx.reference."""

import re
import time

import pytest

EXAMPLES = "examples/models"


def test_example_conv_passes_with_largest_errors(run_cli):
    result = run_cli("run", f"{EXAMPLES}/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref")
    assert result.exit_code == 0, result.output
    for output in ("Y", "Z"):
        line = next(l for l in result.output.splitlines() if l.strip().startswith(f"PASSED  {output}:"))
        assert re.search(r"max abs [0-9.e+-]+ at \(0, \d, \d, \d\), max rel [0-9.e+-]+ at", line)
        assert "min tolerance: atol" in line and line.endswith("[elemwise: atol 1e-05, rtol 1e-05]")
    assert "onnxrt vs onnxref: 1/1 iterations passed (100%)" in result.output
    assert result.output.rstrip().endswith("exit 0")


def test_example_dynamic_identity_with_input_shapes(run_cli):
    result = run_cli("run", f"{EXAMPLES}/dynamic_identity.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--input-shapes", "X:[1,2,4,4]")
    assert result.exit_code == 0, result.output
    assert "PASSED  Y: max abs 0 at (0, 0, 0, 0), max rel 0 at (0, 0, 0, 0)" in result.output
    assert "warning" not in result.output


def test_dynamic_dims_become_one_with_a_warning_naming_the_input(run_cli, models):
    result = run_cli("run", models.dynamic_add, "--backend", "onnxrt", "--backend", "onnxref")
    assert result.exit_code == 0, result.output
    assert "input A has dynamic shape [N,3]; using [1, 3]. Set it with --input-shapes A:[1,3]" in result.output


def test_zero_tolerances_expose_a_real_mismatch_with_exit_1(run_cli):
    result = run_cli("run", f"{EXAMPLES}/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--atol", "0", "--rtol", "0")
    assert result.exit_code == 1, result.output
    assert re.search(r"FAILED  Y: max abs [1-9][0-9.e+-]* at .* elements beyond both tolerances", result.output)
    assert "FAILED (mismatch)" in result.output


def test_per_output_tolerances_in_the_space_separated_form(run_cli):
    result = run_cli("run", f"{EXAMPLES}/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--atol", "0", "Y:1e-3", "--rtol", "0", "Y:1e-3")
    assert re.search(r"PASSED  Y: .*\[elemwise: atol 0.001, rtol 0.001\]", result.output)
    assert re.search(r"FAILED  Z: .*\[elemwise: atol 0, rtol 0\]", result.output)
    assert result.exit_code == 1


def test_iterations_each_get_a_comparison(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxref",
                     "--iterations", "3", "--seed", "5")
    assert result.exit_code == 0, result.output
    assert [f"[iteration {i}]" in result.output for i in range(3)] == [True] * 3
    assert "3/3 iterations passed (100%)" in result.output


def test_default_pairing_is_consecutive_and_duplicate_names_are_numbered(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxref",
                     "--backend", "onnxrt")
    assert result.exit_code == 0, result.output
    assert "onnxrt vs onnxref (reference)" in result.output
    assert "onnxref vs onnxrt#2 (reference)" in result.output


def test_reference_compares_every_other_backend_against_it(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxrt",
                     "--backend", "onnxref", "--reference", "onnxref")
    assert result.exit_code == 0, result.output
    assert "onnxrt vs onnxref (reference)" in result.output
    assert "onnxrt#2 vs onnxref (reference)" in result.output
    assert "onnxrt vs onnxrt#2" not in result.output


def test_integer_inputs_use_the_documented_range(run_cli, models):
    # Indices drawn from [0, 9] are all valid rows of a 10-row table; a range past it makes Gather fail.
    ok = run_cli("run", models.gather_model, "--backend", "onnxrt", "--backend", "onnxref")
    assert ok.exit_code == 0, ok.output
    too_wide = run_cli("run", models.gather_model, "--backend", "onnxrt", "--backend", "onnxref",
                       "--val-range", "[0,1000]")
    assert too_wide.exit_code == 3 and "onnxrt failed during infer" in too_wide.output


def test_an_output_missing_on_one_side_fails_and_is_named(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "faulty", "--backend", "onnxref",
                     "-p", "cmpx_test_faulty", "--faulty-fault", "infer:drop-output")
    assert result.exit_code == 1, result.output
    assert "FAILED  S: missing in faulty" in result.output
    assert "PASSED  Y:" in result.output


def test_a_plugin_backend_from_p_runs_in_its_worker(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "mine", "--backend", "onnxrt",
                     "-p", "cmpx_test_minimal")
    assert result.exit_code == 0, result.output
    assert "mine vs onnxrt (reference)" in result.output


def test_cmpx_plugins_env_loads_plugins_in_coordinator_and_workers(models, monkeypatch, no_leaks):
    from conftest import run_cmpx

    done = run_cmpx("run", models.matmul_chain, "--backend", "mine", "--backend", "onnxref",
                    env={"CMPX_PLUGINS": "cmpx_test_minimal"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mine vs onnxref" in done.stdout


@pytest.mark.parametrize("fault, phase, how", [
    ("infer:segfault", "infer", "killed by SIGSEGV"),
    ("load:raise", "load", "RuntimeError: injected failure during load"),
    ("infer:exit", "infer", "exited with code 7"),
])
def test_a_failing_backend_is_reported_and_the_others_still_compared(run_cli, models, fault, phase, how):
    started = time.monotonic()
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty",
                     "--backend", "onnxref", "-p", "cmpx_test_faulty", "--faulty-fault", fault)
    assert result.exit_code == 3, result.output
    assert f"faulty failed during {phase}: " in result.output and how in result.output
    assert "onnxrt vs onnxref (reference)" in result.output  # the survivors are still compared
    assert "PASSED  Y:" in result.output
    assert "FAILED (backend failure)" in result.output
    assert time.monotonic() - started < 30


def test_a_crash_shows_the_tail_of_the_workers_stderr(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty",
                     "-p", "cmpx_test_faulty", "--faulty-fault", "infer:segfault")
    assert result.exit_code == 3
    assert "faulty backend: injecting segfault during infer" in result.output


def test_a_hung_backend_is_stopped_at_the_timeout(run_cli, models):
    started = time.monotonic()
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty",
                     "--backend", "onnxref", "-p", "cmpx_test_faulty", "--faulty-fault", "infer:hang",
                     "--timeout", "faulty:5")  # the others' load and inference stay unbounded, however busy the machine
    assert result.exit_code == 3, result.output
    assert "faulty failed during infer: no answer within 5 s (--timeout); worker stopped" in result.output
    assert "onnxrt vs onnxref (reference)" in result.output
    assert time.monotonic() - started < 60


def test_a_worker_writing_garbage_is_a_protocol_error_of_that_backend(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty",
                     "-p", "cmpx_test_faulty", "--faulty-fault", "infer:garbage")
    assert result.exit_code == 3, result.output
    assert "faulty failed during infer: protocol error" in result.output


def test_unavailable_onnxrt_provider_is_named_with_the_available_ones(run_cli, models):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxref",
                     "--onnxrt-providers", "migraphx")
    assert result.exit_code == 3
    assert "execution provider 'migraphx' is not available" in result.output
    assert "CPUExecutionProvider" in result.output


def test_run_help_groups_options_by_concern(run_cli):
    result = run_cli("run", "--help")
    assert result.exit_code == 0
    headings = [line.rstrip(":") for line in result.output.splitlines() if line and not line.startswith(" ")]
    for heading in ("Backends", "Data", "Comparison", "Execution and plugins", "Backend onnxrt"):
        assert heading in headings
    assert "--onnxrt-providers" in result.output


def test_the_reference_evaluator_can_run_an_old_model_converted_to_a_newer_opset(run_cli, tmp_path):
    """onnx.reference applies an axis-less Softmax below opset 13 to the last axis (docs/backends.md); on the model
    converted to opset 13 it agrees with ONNX Runtime running the original."""
    from onnx import TensorProto, helper

    from cmpx.testing.models import save

    graph = helper.make_graph([helper.make_node("Softmax", ["X"], ["Y"])], "softmax9",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 5, 1, 1])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 5, 1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 7
    save(model, tmp_path / "softmax9.onnx")
    result = run_cli("run", tmp_path / "softmax9.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--onnxref-opset", "13")
    assert result.exit_code == 0, result.output
    too_new = run_cli("run", tmp_path / "softmax9.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                      "--onnxref-opset", "999")
    assert too_new.exit_code == 3 and "--onnxref-opset 999: this onnx knows opsets 1 to" in too_new.output
