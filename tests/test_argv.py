from hypothesis import given
from hypothesis import strategies as st

from cmpx.options.argv import expand_multi_values
from cmpx.options.grammar import multi_value_options

MULTI_VALUE = multi_value_options()


def test_several_values_after_one_flag_become_repeated_flags():
    args = ["m.onnx", "--atol", "1e-3", "out0:1e-2", "--input-shapes", "X:[1,2]", "Y:[3,4]", "--backend", "a"]
    assert expand_multi_values(args, MULTI_VALUE) == [
        "m.onnx", "--atol", "1e-3", "--atol", "out0:1e-2", "--input-shapes", "X:[1,2]", "--input-shapes",
        "Y:[3,4]", "--backend", "a"]


def test_a_following_model_path_is_not_swallowed():
    assert expand_multi_values(["--atol", "1e-3", "model.onnx"], MULTI_VALUE) == ["--atol", "1e-3", "model.onnx"]
    assert expand_multi_values(["--input-shapes", "X:[1]", "m.onnx"], MULTI_VALUE) == [
        "--input-shapes", "X:[1]", "m.onnx"]


def test_negative_numbers_are_values_and_double_dash_stops():
    assert expand_multi_values(["--val-range", "[-1,1]", "x:[-2,2]"], MULTI_VALUE) == [
        "--val-range", "[-1,1]", "--val-range", "x:[-2,2]"]
    assert expand_multi_values(["--atol", "1", "--", "2"], MULTI_VALUE) == ["--atol", "1", "--", "2"]


@given(st.lists(st.sampled_from(["--atol", "1e-3", "o:1", "m.onnx", "--backend", "x", "-5", "--"]), max_size=12))
def test_expansion_keeps_every_value_in_order_and_is_idempotent(args):
    expanded = expand_multi_values(args, MULTI_VALUE)
    flags = set(MULTI_VALUE)
    assert [w for w in expanded if w not in flags] == [w for w in args if w not in flags]
    assert expand_multi_values(expanded, MULTI_VALUE) == expanded
