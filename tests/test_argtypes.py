import math

import pytest

from cmpx.argtypes import PerOutput, parse_input_shapes, parse_per_output, parse_val_ranges, tolerance
from cmpx.errors import UsageError
from cmpx.model.info import TensorSpec
from cmpx.model.shapes import resolve_input_shapes


def test_input_shapes_parse_names_with_colons_and_scalars():
    assert parse_input_shapes(["X:[1,3,224,224]", "in:0:[2, 5]", "s:[]"]) == {
        "X": (1, 3, 224, 224), "in:0": (2, 5), "s": ()}


@pytest.mark.parametrize("text, message", [
    ("X:3x128", "the accepted form is NAME:[D0,D1,...]"),
    ("X:[1,a]", "dimension 'a' of X is not an integer"),
    ("X:[1,-2]", "dimension -2 of X is negative"),
    ("[1,2]", "cannot read '[1,2]'"),
])
def test_malformed_shapes_show_the_accepted_form(text, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_input_shapes([text])


def test_per_output_values_split_on_the_last_colon():
    values = parse_per_output("--atol", ["1e-3", "a:b:0.5"], 1e-5, tolerance)
    assert values == PerOutput(1e-3, {"a:b": 0.5})
    assert values.get("a:b") == 0.5 and values.get("other") == 1e-3


@pytest.mark.parametrize("text", ["abc", "-1", "nan", "x:", ":1"])
def test_bad_tolerances_are_usage_errors(text):
    with pytest.raises(UsageError, match="--atol"):
        parse_per_output("--atol", [text], 1e-5, tolerance)


def test_infinite_tolerance_is_allowed():
    assert math.isinf(parse_per_output("--rtol", ["inf"], 0.0, tolerance).default)


def test_value_ranges():
    default, per_input = parse_val_ranges(["[0,1]", "X:[-1,1]"])
    assert (default.low, default.high) == (0, 1) and (per_input["X"].low, per_input["X"].high) == (-1, 1)
    for bad in ["[1,0]", "[a,1]", "X:[1]", "0,1"]:
        with pytest.raises(UsageError, match="--val-range"):
            parse_val_ranges([bad])


INPUTS = [TensorSpec("X", "float32", ("N", 3, None)), TensorSpec("Y", "int64", (2,))]


def test_dynamic_dims_become_one_and_the_warning_names_the_input():
    warnings = []
    resolved = resolve_input_shapes(INPUTS, {}, warnings.append)
    assert [s.shape for s in resolved] == [(1, 3, 1), (2,)]
    assert warnings == ["input X has dynamic shape [N,3,?]; using [1, 3, 1]. Set it with --input-shapes X:[1,3,1]"]


def test_overrides_must_match_rank_and_static_dims_and_name_an_input():
    assert resolve_input_shapes(INPUTS, {"X": (4, 3, 9)}, print)[0].shape == (4, 3, 9)
    with pytest.raises(UsageError, match="rank 3"):
        resolve_input_shapes(INPUTS, {"X": (4, 3)}, print)
    with pytest.raises(UsageError, match="dimension 1 is fixed to 3"):
        resolve_input_shapes(INPUTS, {"X": (4, 5, 9)}, print)
    with pytest.raises(UsageError, match="'Z' is not one of the model inputs: X, Y"):
        resolve_input_shapes(INPUTS, {"Z": (1,)}, print)


def test_unknown_rank_needs_an_explicit_shape():
    with pytest.raises(UsageError, match="unknown rank"):
        resolve_input_shapes([TensorSpec("R", "float32", None)], {}, print)
    assert resolve_input_shapes([TensorSpec("R", "float32", None)], {"R": (2, 2)}, print)[0].shape == (2, 2)
