"""Dead code stays out (issue #27, item 7): vulture over cmpx, its built-in plugins and the example plugin, with the
tests and benchmarks as users of the code, finds nothing but what is listed here, each with why it is used."""

import os

import pytest

from conftest import REPO

vulture = pytest.importorskip("vulture", reason="vulture is a test dependency: pip install -e '.[test]'")

SCANNED = ["core", "backends", "comparators", "examples", "tests", "bench"]
REPORTED = ("core", "backends", "comparators", "examples/plugins/cmpx-openvino/cmpx_openvino")

# (file, name): why it is there though nothing in the tree calls it
ALLOWED = {
    **{(f"backends/{name}/plugin.py", "register_backends"): "a hook implementation pluggy calls"
       for name in ("onnxref", "onnxrt", "trt")},
    ("examples/plugins/cmpx-openvino/cmpx_openvino/plugin.py", "register_backends"): "a hook implementation",
    ("comparators/plugin.py", "register_metrics"): "a hook implementation",
    ("core/loaders/plugin.py", "register_data_loaders"): "a hook implementation",
    ("core/transforms/plugin.py", "register_model_transforms"): "a hook implementation",
    **{("core/hookspecs.py", hook): "a hook specification" for hook in (
        "register_backends", "register_data_loaders", "register_metrics", "register_model_transforms")},
    ("backends/onnxref/backend.py", "OnnxrefBackend"): "registered by its descriptor's dotted name",
    ("backends/trt/backend.py", "TrtBackend"): "registered by its descriptor's dotted name",
    ("backends/onnxrt/backend.py", "log_severity_level"): "an onnxruntime.SessionOptions setting",
    ("backends/onnxrt/backend.py", "graph_optimization_level"): "an onnxruntime.SessionOptions setting",
    ("core/testing/framework_api.py", "log_severity_level"): "an onnxruntime.SessionOptions setting",
    ("backends/trt/backend.py", "builder_optimization_level"): "a TensorRT IBuilderConfig setting",
    ("backends/trt/backend.py", "progress_monitor"): "a TensorRT IBuilderConfig setting",
    **{("backends/trt/backend.py", name): "a TensorRT IProgressMonitor callback"
       for name in ("phase_start", "step_complete", "phase_finish")},
    **{("comparators/similarity.py", name): "a metric registered by its decorator"
       for name in ("cosine", "l2", "snr", "psnr")},
    ("core/__init__.py", "__getattr__"): "the package's lazy public names (PEP 562)",
    **{("core/cli/env_cmd.py", name): "a click command" for name in ("create_command", "list_command",
                                                                      "remove_command")},
    ("core/cli/main.py", "plugins_command"): "a click command",
    ("core/cli/main.py", "tensors_command"): "a click command",
    ("core/options/grouped_help.py", "format_options"): "click calls it to print --help",
    ("core/cli/main.py", "format_commands"): "click calls it to print cmpx --help",
    ("core/testing/pytest_plugin.py", "cmpx_no_leaks"): "a pytest fixture for plugin authors",
    ("core/transforms/static_qdq.py", "get_next"): "ONNX Runtime's CalibrationDataReader calls it",
    ("core/transport/messages.py", "out_prefix"): "a field of the infer message, read by the worker as a key",
    ("core/transport/messages.py", "FromWorker"): "the protocol's frames from a worker, spelled out for readers",
}


def _findings():
    scan = vulture.Vulture()
    scan.scavenge([str(REPO / path) for path in SCANNED])
    for item in scan.get_unused_code(min_confidence=60):
        path = os.path.relpath(str(item.filename), REPO)
        if path.startswith(REPORTED) and "/tests/" not in path:
            yield path, item.name, item.first_lineno


def test_vulture_finds_only_what_is_listed_with_its_reason():
    found = sorted(_findings())
    unexplained = [f"{path}:{line}: {name}" for path, name, line in found if (path, name) not in ALLOWED]
    assert unexplained == [], "unused code: remove it, or list it in ALLOWED with why it is used: " + "; ".join(
        unexplained)
    stale = sorted(set(ALLOWED) - {(path, name) for path, name, _ in found})
    assert stale == [], f"listed but no longer found (take them off the list): {stale}"
