import math
import re

import pytest

from cmpx.options.argtypes import PerOutput, parse_input_shapes, parse_per_output, parse_shape_words, parse_val_ranges, \
    tolerance
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
    assert warnings == ["input X has dynamic shape [N,3,?]; using [1, 3, 1]. Set it with --input-shapes X:[1,3,1], "
                        "or by name for every input that has it: --input-shapes N=1"]


# Issue 17, finding 2: inputs exported with shared symbolic dimensions (BERT's input_ids, attention_mask and
# token_type_ids are all [batch, sequence]) must get one size per symbol, however it was given.
BERT_INPUTS = [TensorSpec(name, "int64", ("batch", "sequence")) for name in
               ("input_ids", "attention_mask", "token_type_ids")] + [TensorSpec("image", "float32", ("batch", 3))]


def test_a_size_given_through_one_input_applies_to_every_input_sharing_its_dimension_names():
    warnings = []
    resolved = resolve_input_shapes(BERT_INPUTS, {"input_ids": (4, 128)}, warnings.append)
    assert [s.shape for s in resolved] == [(4, 128), (4, 128), (4, 128), (4, 3)]
    assert warnings == []


def test_dimensions_set_by_name_and_the_python_apis_words():
    shapes, dims = parse_shape_words(["batch=4", "sequence=128"])
    assert shapes == {} and dims == {"batch": 4, "sequence": 128}
    resolved = resolve_input_shapes(BERT_INPUTS, shapes, print, dims=dims)
    assert {s.shape for s in resolved} == {(4, 128), (4, 3)}
    shapes, dims = parse_shape_words(["image:[2,3]", "sequence=7"])
    assert [s.shape for s in resolve_input_shapes(BERT_INPUTS, shapes, print, dims=dims)][:2] == [(2, 7), (2, 7)]


@pytest.mark.parametrize("words, message", [
    (["input_ids:[4,128]", "attention_mask:[2,128]"], "input_ids:[4,128] sets dimension batch to 4, but "
                                                      "attention_mask:[2,128] sets it to 2"),
    (["batch=4", "image:[2,3]"], "batch=4 sets dimension batch to 4, but image:[2,3] sets it to 2"),
    (["batc=4"], "no input of the model has a dimension named 'batc'; its named dimensions are: batch, sequence"),
    (["batch=4", "batch=2"], "dimension batch is given twice"),
    (["batch=-1"], "batch=-1 is negative"),
    (["batch=four"], "the size 'four' of dimension batch is not an integer"),
])
def test_conflicting_or_unknown_dimension_sizes_are_errors_naming_both(words, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        shapes, dims = parse_shape_words(words)
        resolve_input_shapes(BERT_INPUTS, shapes, print, dims=dims)


def test_dimensions_cmpx_sizes_are_named_once_not_once_per_input():
    warnings = []
    resolved = resolve_input_shapes(BERT_INPUTS, {}, warnings.append)
    assert warnings == ["input input_ids has dynamic shape [batch,sequence]; using [1, 16] (sequence=16, cmpx's size "
                        "for a token sequence). Set it with --input-shapes input_ids:[1,16], or by name for every "
                        "input that has them: --input-shapes batch=1 sequence=16"]
    assert [s.chosen for s in resolved] == [("batch=1", "sequence=16")] * 3 + [("batch=1",)]


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
