"""Data loader scripts, exact input names, safe casts only, and --iterations over loaded data."""

import json
import textwrap

EXAMPLE = "examples/models/conv.onnx"
BACKENDS = ("--backend", "onnxrt", "--backend", "onnxref")


def script(tmp_path, body, name="data.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_a_script_feeds_its_iterations(run_cli, tmp_path):
    path = script(tmp_path, """
        import numpy as np
        def load_data():
            for i in range(3):
                yield {"X": np.full((1, 3, 8, 8), i, np.float32)}
        def other():
            return [{"X": np.ones((1, 3, 8, 8), np.float32)}]
    """)
    result = run_cli("run", EXAMPLE, *BACKENDS, "--data-loader-script", path)
    assert result.exit_code == 0, result.output
    assert "3/3 iterations passed" in result.output
    assert "1/1 iterations passed" in run_cli("run", EXAMPLE, *BACKENDS, "--data-loader-script",
                                              f"{path}:other").output
    assert "2/2 iterations passed" in run_cli("run", EXAMPLE, *BACKENDS, "--data-loader-script", path,
                                              "--iterations", "2").output


def test_a_script_that_refills_one_buffer_feeds_and_saves_each_feed_as_it_was(run_cli, tmp_path, models):
    """Polygraphy uses each feed before asking for the next, so a script may fill one buffer again for each; cmpx
    makes the next feed while one is in use, and fed 1, 2, 2 (saving 1, 1, 2) for 0, 1, 2. Replaying the saved
    inputs against the saved outputs must give the same outputs."""
    path = script(tmp_path, """
        import numpy as np
        def load_data():
            feed = {"A": np.zeros((2, 3), np.float32), "B": np.zeros((2, 3), np.float32)}
            for i in range(3):
                feed["A"][:] = i
                feed["B"][:] = 10 * i
                yield feed
    """)
    saved_in, saved_out = tmp_path / "in", tmp_path / "out"
    first = run_cli("run", models.dynamic_add, *BACKENDS, "--data-loader-script", path, "--save-inputs", saved_in,
                    "--save-outputs", saved_out)
    assert first.exit_code == 0, first.output
    again = run_cli("run", models.dynamic_add, "--backend", "onnxrt", "--load-inputs", saved_in, "--load-outputs",
                    saved_out, "--atol", "0", "--rtol", "0")
    assert again.exit_code == 0 and "3/3 iterations passed" in again.output, again.output
    from cmpx.saved.opening import open_saved

    fed = open_saved(str(saved_in), "inputs").sources[0]
    assert [float(fed.load(i)["A"][0, 0]) for i in range(3)] == [0.0, 1.0, 2.0]


def test_a_loader_failing_on_a_later_feed_stops_the_run_and_reports_what_finished(run_cli, tmp_path, models):
    """Feeds 0 to 2 good, feed 3 of the wrong dtype: exit 2 as before, but no longer with everything done lost
    (no summary, no report files): the three iterations are reported, the reports say why the run stopped."""
    path = script(tmp_path, """
        import numpy as np
        def load_data():
            for i in range(5):
                kind = np.float32 if i < 3 else np.int32
                yield {"A": np.full((2, 3), i, kind), "B": np.ones((2, 3), np.float32)}
    """)
    result = run_cli("run", models.dynamic_add, *BACKENDS, "--data-loader-script", path, "--report-json",
                     tmp_path / "r.json", "--junit", tmp_path / "j.xml")
    assert result.exit_code == 2, result.output
    assert "Summary (stopped: what finished)" in result.output
    assert "  stopped: data loader 'script', iteration 3: input 'A' has dtype int32" in result.output
    assert "3/3 iterations passed" in result.output
    assert result.output.strip().splitlines()[-3].startswith("FAILED (stopped by its data) | 3 comparison(s)")
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["exit_code"] == 2 and report["iterations"] == 3 and "iteration 3" in report["stopped"]
    assert 'name="stopped"' in (tmp_path / "j.xml").read_text()


def test_a_script_is_python_whatever_its_suffix(run_cli, tmp_path):
    """importlib finds no loader for a file not ending in .py: the script was an internal error (exit 4)."""
    path = script(tmp_path, """
        import numpy as np
        def load_data():
            yield {"X": np.ones((1, 3, 8, 8), np.float32)}
    """, "data.txt")
    result = run_cli("run", EXAMPLE, *BACKENDS, "--data-loader-script", path)
    assert result.exit_code == 0, result.output
    assert "1/1 iterations passed" in result.output


def test_safe_casts_are_made_and_said_unsafe_ones_refused(run_cli, tmp_path, models):
    widening = script(tmp_path, """
        import numpy as np
        def load_data():
            yield {"I": np.array([0, 1, 2, 3], np.int32)}
    """, "widen.py")
    result = run_cli("run", models.gather_model, *BACKENDS, "--data-loader-script", widening)
    assert result.exit_code == 0, result.output
    assert "input 'I' converted from int32 to int64 (a safe cast)" in result.output
    narrowing = script(tmp_path, """
        import numpy as np
        def load_data():
            yield {"I": np.array([0.5, 1.5], np.float32)}
    """, "narrow.py")
    refused = run_cli("run", models.gather_model, *BACKENDS, "--data-loader-script", narrowing)
    assert refused.exit_code == 2
    assert "input 'I' has dtype float32, the model takes int64, and float32 does not convert to it safely" \
        in refused.output


def test_bad_scripts_are_usage_errors_before_any_worker(run_cli, tmp_path):
    cases = {
        "def load_data():\n    raise RuntimeError('no data today')\n": "load_data() raised RuntimeError: no data today",
        "def load_data():\n    yield {'x': 1}\n": "no data for input 'X'; the data holds 'x', which no input is named",
        "import numpy as np\ndef load_data():\n    yield {'X': np.zeros((2, 3, 8, 8), np.float32)}\n":
            "input 'X' has shape [2, 3, 8, 8], which does not fit [1,3,8,8]",
        "def load_data():\n    yield [1, 2]\n": "expected a dict of input name -> array, got list",
        "def load_data():\n    return 5\n": "load_data() raised TypeError",
        "raise ImportError('broken')\n": "importing it raised ImportError: broken",
        "x = 1\n": "no function 'load_data'",
    }
    for number, (body, message) in enumerate(cases.items()):
        path = script(tmp_path, body, f"bad{number}.py")
        result = run_cli("run", EXAMPLE, *BACKENDS, "--data-loader-script", path)
        assert result.exit_code == 2, (body, result.output)
        assert message in result.output, (body, result.output)
        assert "loaded" not in result.output
    missing = run_cli("run", EXAMPLE, *BACKENDS, "--data-loader-script", tmp_path / "nope.py")
    assert missing.exit_code == 2 and "--data-loader-script not found" in missing.output


def test_a_loaded_batch_can_fill_dynamic_dimensions(run_cli, tmp_path, models):
    path = script(tmp_path, """
        import numpy as np
        def load_data():
            yield {"A": np.ones((5, 3), np.float32), "B": np.ones((5, 3), np.float32)}
    """)
    result = run_cli("run", models.dynamic_add, *BACKENDS, "--data-loader-script", path)
    assert result.exit_code == 0, result.output
    assert "dynamic shape" not in result.output


def test_loaders_cannot_be_combined(run_cli, tmp_path):
    result = run_cli("run", EXAMPLE, *BACKENDS, "--data-loader-script", "a.py", "--load-inputs", tmp_path)
    assert result.exit_code == 2 and "give either --load-inputs or --data-loader-script" in result.output


def test_reused_and_double_buffered_segments_never_mix_iterations(run_cli, tmp_path):
    from cmpx.saved.cmpx_format import read_cmpx_run

    path = script(tmp_path, """
        import numpy as np
        def load_data():
            for i in range(5):
                yield {"X": np.full((1, 2, 3, 3), i, np.float32)}
    """)
    result = run_cli("run", "examples/models/dynamic_identity.onnx", *BACKENDS, "--data-loader-script", path,
                     "--save-outputs", tmp_path / "out")
    assert result.exit_code == 0, result.output
    saved = read_cmpx_run(str(tmp_path / "out"))
    for source in saved.sources:
        assert [float(source.load(i)["Y"].max()) for i in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert [float(source.load(i)["Y"].min()) for i in range(5)] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_a_scalar_input_stays_a_scalar_on_every_backend(run_cli, tmp_path):
    """A 0-d input (a gain, a temperature) reaches each backend 0-d: Unsqueeze of it is [1], times X[3,4]."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Unsqueeze", ["g", "axes"], ["u"]), helper.make_node("Mul", ["X", "u"], ["Y"])], "scalar",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [0])])
    model = tmp_path / "scalar.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    result = run_cli("run", model, *BACKENDS, "--onnx-outputs", "u", "Y")
    assert result.exit_code == 0, result.output
    assert "2/2 outputs passed" in result.output, result.output
