"""What a person reads of a run (issue #30, items 4-8): the header first, the verdict of one backend alone, names
misspelt, tensors of a --mark-all run, the progress line in a pseudo-terminal at 80 columns."""

import json

from conftest import REPO

EXAMPLE = str(REPO / "examples" / "models" / "conv.onnx")


def test_the_header_comes_before_a_load_failure(run_cli):
    result = run_cli("run", EXAMPLE, "--onnxrt", "--backend", "faulty", "--faulty-fault", "load:raise",
                     plugins=["cmpx_test_faulty"])
    assert result.exit_code == 3, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("cmpx ") and "backends: onnxrt" in lines[0], result.output
    assert lines[1] == "ERROR   faulty failed during load: RuntimeError: injected failure during load", result.output
    alone = run_cli("run", EXAMPLE, "--backend", "faulty", "--faulty-fault", "load:exit", plugins=["cmpx_test_faulty"])
    assert alone.exit_code == 3, alone.output
    assert alone.output.splitlines()[0].startswith("cmpx "), alone.output
    assert alone.output.splitlines()[1].startswith("ERROR   faulty"), alone.output
