import numpy as np
import pytest

from cmpx.argtypes import ValueRange
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


def test_floats_made_chunk_by_chunk_equal_one_draw(monkeypatch):
    from cmpx.loaders import synthetic

    monkeypatch.setattr(synthetic, "CHUNK_ELEMENTS", 7)
    [feed] = feeds([TensorSpec("X", "float16", (5, 9))], seed=11, default_range=ValueRange(-3, 2))
    expected = (np.random.RandomState(11).random_sample(size=(5, 9)) * 5 - 3).astype(np.float16)
    np.testing.assert_array_equal(feed["X"], expected)
