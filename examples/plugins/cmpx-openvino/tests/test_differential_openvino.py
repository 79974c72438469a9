"""Issue 26, items 10 and 11, for the OpenVINO plugin (the built-ins' part is cmpx's tests/test_differential.py):
what its worker returns through shared memory is bit for bit what OpenVINO's own compiled model returns (f32 on
the CPU, as the plugin asks), and ``--backend openvino --backend openvino`` differs by exactly 0: over ONNX's
operator test cases (the cheapest case of every operator OpenVINO runs; all of them with
CMPX_TEST_ALL_NODE_CASES=1) and over cmpx's corpus of real architectures, unmarked, with --mark-all and sliced."""

from pathlib import Path

import pytest

pytest.importorskip("cmpx_openvino", reason="install it: pip install -e examples/plugins/cmpx-openvino")
pytest.importorskip("openvino", reason="the plugin needs the openvino package")

from cmpx.testing import node_cases  # noqa: E402
from cmpx.testing.differential import NodeCaseCheck  # noqa: E402
from cmpx.testing.through_runs import check_model  # noqa: E402

FULL = node_cases.every_case_wanted()
CORPUS = Path(__file__).resolve().parents[4] / "tests" / "models" / "real"


# One test process runs both differential modules: ONNX collects its node test cases (~11 s) once per process.
pytestmark = pytest.mark.xdist_group("onnx-node-cases")

@pytest.fixture
def no_leaks(cmpx_no_leaks):  # cmpx's own leak check, from its pytest plugin
    yield


@pytest.fixture(scope="module")
def fork_servers():  # the corpus runs' workers forked, numpy imported once (OpenVINO itself after each fork)
    import cmpx

    with cmpx.ForkServers() as servers:
        yield servers


def test_node_cases_on_the_workers_are_openvinos_bits(tmp_path, no_leaks):
    cases = node_cases.collect()
    with NodeCaseCheck("openvino", str(tmp_path)) as check:
        chosen = cases if FULL else node_cases.stratified(cases, check.usable, tries=3)
        for case in chosen:
            check.check(case)
    tally = check.tally
    assert tally.defects == {}, tally.defects
    least_cases, least_operators = (1400, 160) if FULL else (140, 155)  # measured: 1446/165, 157/164
    assert tally.identical >= least_cases and len(tally.operators) >= least_operators, tally.counts()
    # RandomUniformLike: OpenVINO's own API gives other values each compile, even with a seed
    assert set(tally.skipped) <= {"the framework's own API returns other values each run (random operators)",
                                  "the framework's own API fails: RuntimeError",
                                  "the framework's own API fails: ValueError",  # packed uint4 feeds
                                  "a sequence, optional or string input (cmpx feeds numeric tensors only)"}, \
        tally.counts()
    assert check.workers.replaced == 0


@pytest.mark.parametrize("name", ["cnn", "bert", "gpt2", "vit", "external/model"])
def test_the_corpus_unmarked_marked_and_sliced(name, tmp_path, no_leaks, fork_servers):
    sliced = name == "cnn" or (FULL and name in ("bert", "external/model"))  # gpt2, vit: the xfail below
    problems, counts = check_model("openvino", str(CORPUS / f"{name}.onnx"), str(tmp_path), sliced=sliced,
                                   fork_servers=fork_servers)
    assert problems == []
    assert counts["outputs"] == (2 if name in ("bert", "vit") else 1)
    assert counts["marked"] >= 90, counts
    assert counts["slices"] >= 2 if sliced else counts["slices"] == 0


@pytest.mark.xfail(strict=False, reason="cmpx limitation, not fixed: OpenVINO compiles a pattern otherwise when a "
                   "slice cuts it (GPT-2's tanh GELU: the Mul after the cut, node_mul_177, differs in the last bits, "
                   "and everything after it), so a sliced --mark-all run is not the unsliced run bit for bit; ViT "
                   "likewise; the CNN and BERT are identical")
@pytest.mark.parametrize("name", ["gpt2"] + (["vit"] if FULL else []))
def test_a_sliced_transformer_on_openvino_is_the_unsliced_run(name, tmp_path, no_leaks):
    problems, counts = check_model("openvino", str(CORPUS / f"{name}.onnx"), str(tmp_path), sliced=True)
    assert counts["slices"] >= 2 and problems == []


def test_the_scikit_learn_pipeline_is_refused_by_openvino_itself(tmp_path):
    # OpenVINO's own API cannot even read its ZipMap output (the plugin reads the model without it, then finds no
    # ai.onnx.ml operators): nothing of cmpx's can be compared with OpenVINO's own results
    with pytest.raises(Exception, match="Unsupported value_info type: output_probability"):
        check_model("openvino", str(CORPUS / "skl_pipeline.onnx"), str(tmp_path))

