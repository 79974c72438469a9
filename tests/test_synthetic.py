import re

import numpy as np
import pytest

from cmpx.options.argtypes import ValueRange
from cmpx.dtypes import ONNX_TO_NUMPY, numpy_dtype
from cmpx.errors import UsageError
from cmpx.loaders.options import DataOptions
from cmpx.loaders.synthetic import SyntheticDataLoader
from cmpx.model.info import TensorSpec


def feeds(inputs, **options):
    return list(SyntheticDataLoader(DataOptions(**options)).feeds(inputs))


def test_same_seed_same_feeds_and_each_iteration_differs():
    inputs = [TensorSpec("X", "float32", (2, 3))]
    first, second = feeds(inputs, seed=3, iterations=2), feeds(inputs, seed=3, iterations=2)
    np.testing.assert_array_equal(first[0]["X"], second[0]["X"])
    assert not np.array_equal(first[0]["X"], first[1]["X"])
    np.testing.assert_array_equal(first[1]["X"], feeds(inputs, seed=4)[0]["X"])  # iteration i uses seed + i


def test_floats_default_to_zero_one_and_ints_to_zero_nine_inclusive():
    [feed] = feeds([TensorSpec("F", "float32", (10000,)), TensorSpec("I", "int64", (10000,)),
                    TensorSpec("B", "bool", (10000,))])
    assert 0 <= feed["F"].min() and feed["F"].max() < 1
    assert set(np.unique(feed["I"])) == set(range(10))
    assert 0.4 < feed["B"].mean() < 0.6


def test_ranges_default_and_per_input():
    [feed] = feeds([TensorSpec("F", "float32", (1000,)), TensorSpec("G", "float16", (1000,)),
                    TensorSpec("I", "int8", (1000,))],
                   default_range=ValueRange(-2, -1), ranges={"I": ValueRange(-3, 3)})
    assert -2 <= feed["F"].min() and feed["F"].max() < -1 and feed["G"].max() <= -1
    assert set(np.unique(feed["I"])) == set(range(-3, 4))


def test_int_ranges_must_be_integral_and_fit_the_dtype():
    with pytest.raises(UsageError, match="needs integer bounds"):
        feeds([TensorSpec("I", "int32", (1,))], default_range=ValueRange(0, 1.5))
    with pytest.raises(UsageError, match=r"does not fit uint8"):
        feeds([TensorSpec("I", "uint8", (1,))], default_range=ValueRange(-1, 3))


@pytest.mark.parametrize("dtype", sorted(set(ONNX_TO_NUMPY.values())))
def test_every_onnx_dtype_is_generated_with_its_exact_dtype_and_shape(dtype):
    [feed] = feeds([TensorSpec("T", dtype, (3, 4))])
    assert feed["T"].dtype == numpy_dtype(dtype) and feed["T"].shape == (3, 4)


def test_float_feeds_equal_polygraphys_for_the_same_seed():
    from polygraphy.comparator import DataLoader
    from polygraphy.common import TensorMetadata

    meta = TensorMetadata().add("X", np.float32, (2, 3)).add("Y", np.float16, (4,))
    theirs = DataLoader(seed=7, iterations=2, input_metadata=meta)
    ours = feeds([TensorSpec("X", "float32", (2, 3)), TensorSpec("Y", "float16", (4,))], seed=7, iterations=2)
    for index in range(2):
        for name in ("X", "Y"):
            np.testing.assert_array_equal(ours[index][name], theirs[index][name])


@pytest.mark.parametrize("ranges, default", [({"M": ValueRange(1, 1)}, None), ({"M": ValueRange(0, 0)}, None),
                                             ({}, ValueRange(-5, 5)), ({}, ValueRange(-1, 3)), ({}, None)])
def test_bool_feeds_take_their_range_as_polygraphy_does(ranges, default):
    """--val-range M:[1,1] forces a mask on in Polygraphy (bool(1) to bool(1)); cmpx drew {0, 1} whatever the
    range, so the mask stayed half off, and every input after it differed, drawn from a stream used otherwise."""
    from polygraphy.comparator import DataLoader
    from polygraphy.common import TensorMetadata

    meta = TensorMetadata().add("M", bool, (64,)).add("X", np.float32, (2, 3))
    val_range = {name: (r.low, r.high) for name, r in ranges.items()}
    if default is not None:
        val_range[""] = (default.low, default.high)
    theirs = DataLoader(seed=5, iterations=2, input_metadata=meta, val_range=val_range or None)
    ours = feeds([TensorSpec("M", "bool", (64,)), TensorSpec("X", "float32", (2, 3))], seed=5, iterations=2,
                 ranges=ranges, default_range=default)
    for index in range(2):
        for name in ("M", "X"):
            np.testing.assert_array_equal(ours[index][name], theirs[index][name])
    if ranges.get("M") == ValueRange(1, 1) or default == ValueRange(-5, 5):
        assert ours[0]["M"].all()


@pytest.mark.parametrize("dtype, bounds, says", [("float16", (-1e5, 1.0), "[-100000,1] does not fit float16 "
                                                                        "([-65504,65504])"),
                                                ("float8_e4m3fn", (0.0, 500.0), "[0,500] does not fit float8_e4m3fn ([-448,448])")])
def test_a_float_range_beyond_the_inputs_type_is_refused(dtype, bounds, says):
    """Such values are infinite or NaN (numpy printed a raw RuntimeWarning, and the run went on with them)."""
    with pytest.raises(UsageError, match=re.escape(f"--val-range for X: {says}")):
        feeds([TensorSpec("X", dtype, (4,))], ranges={"X": ValueRange(*bounds)})
    [feed] = feeds([TensorSpec("X", "float16", (4,))], ranges={"X": ValueRange(-65504.0, 65504.0)})
    assert np.isfinite(feed["X"]).all()


def test_a_bool_range_that_goes_from_true_to_false_is_refused():
    with pytest.raises(UsageError, match=r"--val-range for M: a bool input's range is bool\(low\) to bool\(high\)"):
        feeds([TensorSpec("M", "bool", (4,))], ranges={"M": ValueRange(-1, 0)})


def test_floats_made_chunk_by_chunk_equal_one_draw(monkeypatch):
    from cmpx.loaders import synthetic

    monkeypatch.setattr(synthetic, "CHUNK_ELEMENTS", 7)
    [feed] = feeds([TensorSpec("X", "float16", (5, 9))], seed=11, default_range=ValueRange(-3, 2))
    expected = (np.random.RandomState(11).random_sample(size=(5, 9)) * 5 - 3).astype(np.float16)
    np.testing.assert_array_equal(feed["X"], expected)


def _mixed_model(path):
    """Inputs int64 a[2,3], float32 b[2,2], bool c[3] (in that order): outputs ya, yb, yc (identities)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", [name], [f"y{name}"]) for name in "abc"], "mixed",
        [helper.make_tensor_value_info("a", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 2]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [3])],
        [helper.make_tensor_value_info(f"y{name}", kind, shape) for name, kind, shape in
         (("a", TensorProto.INT64, [2, 3]), ("b", TensorProto.FLOAT, [2, 2]), ("c", TensorProto.BOOL, [3]))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), str(path))
    return str(path)


def _polygraphy_inputs(model, out, *extra):
    import os
    import subprocess
    import sys

    polygraphy = os.path.join(os.path.dirname(sys.executable), "polygraphy")
    done = subprocess.run([polygraphy, "run", model, "--onnxrt", "--iterations", "2", "--save-inputs", out, *extra],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    from cmpx.saved.opening import open_saved

    source = open_saved(out, "inputs").sources[0]
    return [source.load(i) for i in range(len(source))]


def test_floats_and_bools_equal_polygraphys_after_an_integer_input_and_ints_too_when_ranged(run_cli, tmp_path):
    """An int64 input before the float one shifted cmpx's stream: a golden made by Polygraphy then failed."""
    model = _mixed_model(tmp_path / "mixed.onnx")
    theirs = _polygraphy_inputs(model, str(tmp_path / "pg.json"))
    ours = run_cli("run", model, "--backend", "onnxrt", "--iterations", "2", "--save-inputs", tmp_path / "ours")
    assert ours.exit_code == 0, ours.output
    from cmpx.saved.opening import open_saved

    mine = open_saved(str(tmp_path / "ours"), "inputs").sources[0]
    for iteration in range(2):
        np.testing.assert_array_equal(mine.load(iteration)["b"], theirs[iteration]["b"])
        np.testing.assert_array_equal(mine.load(iteration)["c"], theirs[iteration]["c"])
        assert set(np.unique(theirs[iteration]["a"])) <= {0, 1}  # Polygraphy's trap: indices never above 1
    ranged = _polygraphy_inputs(model, str(tmp_path / "pg-ranged.json"), "--val-range", "a:[0,5]")
    ours = run_cli("run", model, "--backend", "onnxrt", "--iterations", "2", "--val-range", "a:[0,5]",
                   "--save-inputs", tmp_path / "ours-ranged")
    mine = open_saved(str(tmp_path / "ours-ranged"), "inputs").sources[0]
    for iteration in range(2):
        for name in "abc":
            np.testing.assert_array_equal(mine.load(iteration)[name], ranged[iteration][name])
    # And Polygraphy's golden outputs, made from its own synthetic data, pass against a fresh cmpx run as they are.
    import os
    import subprocess
    import sys

    golden = tmp_path / "golden.json"
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "polygraphy"), "run", model, "--onnxrt", "--val-range", "a:[0,5]",
                    "--save-outputs", str(golden)], check=True, capture_output=True, timeout=300)
    checked = run_cli("run", model, "--backend", "onnxrt", "--val-range", "a:[0,5]", "--load-outputs", golden)
    assert checked.exit_code == 0, checked.output


def test_float32_data_is_cast_to_a_float16_input_with_one_warning(run_cli, tmp_path):
    """A float16 model fed float32 data (what most scripts make) was refused, where float64 was cast: both are
    cast, with a warning, as Polygraphy casts them."""
    import onnx
    from onnx import TensorProto, helper

    io = [helper.make_tensor_value_info(name, TensorProto.FLOAT16, [2, 3]) for name in "XY"]
    model = tmp_path / "half.onnx"
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "half", io[:1], io[1:]),
                                opset_imports=[helper.make_opsetid("", 17)]), model)
    script = tmp_path / "f32.py"
    script.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    yield {'X': np.full((2, 3), 0.1, np.float32)}\n")
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--data-loader-script", script)
    assert result.exit_code == 0, result.output
    assert "input 'X' cast from float32 to float16, the model's type" in result.output


def test_float64_data_is_cast_to_a_float32_input_with_one_warning(run_cli, tmp_path):
    script = tmp_path / "f64.py"
    script.write_text("import numpy as np\n"
                      "def load_data():\n"
                      "    for i in range(3):\n"
                      "        yield {'X': np.full((1, 3, 8, 8), 0.5 + i)}\n")  # numpy's default: float64
    result = run_cli("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--backend", "onnxref",
                     "--data-loader-script", script)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if "cast from float64 to float32" in line]
    assert len(warnings) == 1 and "input 'X'" in warnings[0]
    big = tmp_path / "big.py"
    big.write_text("import numpy as np\ndef load_data():\n    yield {'X': np.full((1, 3, 8, 8), 1e300)}\n")
    overflow = run_cli("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--data-loader-script", big)
    assert "192 value(s) beyond float32's range became infinite" in overflow.output
    ints = tmp_path / "ints.py"
    ints.write_text("import numpy as np\ndef load_data():\n    yield {'X': np.zeros((1, 3, 8, 8), np.int64)}\n")
    refused = run_cli("run", "examples/models/conv.onnx", "--backend", "onnxrt", "--data-loader-script", ints)
    assert refused.exit_code == 2 and "does not convert to it safely" in refused.output
