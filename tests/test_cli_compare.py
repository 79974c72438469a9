"""Comparison options end to end: real CLI, real workers, real backends."""

import re

EXAMPLE = "examples/models/conv.onnx"
BACKENDS = ("--backend", "onnxrt", "--backend", "onnxref")


def test_check_error_stat_per_output_with_quantile(run_cli):
    result = run_cli("run", EXAMPLE, *BACKENDS, "--atol", "0", "--rtol", "0", "Y:1",
                     "--check-error-stat", "max", "Z:quantile", "--error-quantile", "Z:0.9")
    assert "[max: atol 0, rtol 1]" in result.output  # Y: max rel error < 1 passes
    assert "[quantile 0.9: atol 0, rtol 0]" in result.output  # Z: p90 of its errors is above 0
    assert result.exit_code == 1, result.output


def test_several_metrics_must_all_pass(run_cli):
    result = run_cli("run", EXAMPLE, *BACKENDS, "--compare", "simple", "cosine", "psnr", "--psnr-threshold", "200")
    assert result.exit_code == 1, result.output
    assert re.search(r"PASSED  Y: cosine 1 \[>= 0.997\]", result.output)
    assert re.search(r"FAILED  Y: psnr [0-9.]+ dB \[>= 200 dB\]", result.output)
    ok = run_cli("run", EXAMPLE, *BACKENDS, "--compare", "cosine", "l2", "--cosine-similarity-threshold", "0.9999")
    assert ok.exit_code == 0, ok.output
    assert "[>= 0.9999]" in ok.output


def test_a_third_party_metric_from_a_plugin(run_cli, models):
    result = run_cli("run", models.matmul_chain, *BACKENDS, "-p", "cmpx_test_metric", "--compare", "simple",
                     "signflips")
    assert result.exit_code == 0, result.output
    assert "PASSED  Y: 0 sign flips [<= 0]" in result.output
    negative = run_cli("run", models.matmul_chain, *BACKENDS, "-p", "cmpx_test_metric", "--compare", "signflips",
                       "--signflips-threshold", "-1")
    assert negative.exit_code == 1 and "FAILED  Y: 0 sign flips [<= -1]" in negative.output


def test_failures_show_a_histogram_and_the_worst_elements(run_cli):
    result = run_cli("run", EXAMPLE, *BACKENDS, "--atol", "0", "--rtol", "0")
    assert "abs error histogram:" in result.output
    assert re.search(r"\(0, \d, \d, \d\): [0-9.-]+ vs [0-9.-]+, abs [0-9.e-]+, rel", result.output)
    assert "at rtol 0, atol" in result.output


def test_nan_outputs_fail_unless_nan_equal_and_validate_names_them(run_cli, models):
    args = ("run", models.log_model, *BACKENDS, "--val-range", "[-2,-1]")
    assert run_cli(*args).exit_code == 1
    assert run_cli(*args, "--nan-equal").exit_code == 0
    validated = run_cli(*args, "--nan-equal", "--validate")
    assert validated.exit_code == 1
    assert "INVALID onnxrt output Y has 6 NaN and 0 Inf; the first at index (0, 0) (--validate)" in validated.output


def test_equal_infinities_agree_unless_polygraphys_strict_rule_is_asked_for(run_cli, models):
    """Issue #29, item 12: the same infinity at the same element agrees by default (attention masks hold -inf on
    both sides); --strict-infinities is Polygraphy's rule; --validate still fails on any infinity."""
    args = ("run", models.reciprocal_model, *BACKENDS, "--val-range", "[0,0]")
    assert run_cli(*args).exit_code == 0
    assert run_cli(*args, "--infinities-compare-equal").exit_code == 0  # Polygraphy's flag, accepted
    assert run_cli(*args, "--strict-infinities").exit_code == 1
    assert run_cli(*args, "--validate").exit_code == 1
    both = run_cli(*args, "--strict-infinities", "--infinities-compare-equal")
    assert both.exit_code == 2 and "contradict each other" in both.output


def test_fail_fast_stops_at_the_first_mismatch(run_cli, models):
    result = run_cli("run", models.matmul_chain, *BACKENDS, "--atol", "0", "--rtol", "0", "--iterations", "3",
                     "--fail-fast")
    assert result.exit_code == 1
    assert "[iteration 1]" not in result.output
    assert "stopped at the first mismatch (--fail-fast)" in result.output


def test_comparison_options_are_validated_before_any_worker_starts(run_cli):
    cases = {
        ("--check-error-stat", "maximum"): "--check-error-stat: 'maximum': 'maximum' is not a check",
        ("--error-quantile", "1.5"): "is not a quantile; give a number from 0 to 1",
        ("--compare", "simple", "--compare", "nope"): "--compare: unknown metric 'nope'",
        ("--atol", "W:1e-3"): "--atol: 'W' is not one of the model outputs: Y, Z",
        ("--check-error-stat", "W:max"): "--check-error-stat: 'W' is not one of the model outputs",
        ("--cosine-threshold", "abc"): "--cosine-threshold: 'abc': 'abc' is not a number",
        ("--rtol", "-1"): "--rtol: '-1': '-1' is not a tolerance",
    }
    for extra, message in cases.items():
        result = run_cli("run", EXAMPLE, *BACKENDS, *extra)
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output, (extra, result.output)
        assert "loaded" not in result.output
