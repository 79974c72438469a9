"""Sizes of dynamic dimensions nothing sets (issue #29, item 8): exporters' expressions are evaluated from the
names in them, names that follow a convention get its size, anything else 1; an expression is parsed, never run."""

import re

import numpy as np
import pytest
from hypothesis import given, strategies as st
from onnx import TensorProto, helper, numpy_helper

from cmpx.testing import models as modelgen

from cmpx.errors import UsageError
from cmpx.model.dimension_sizes import CONVENTIONS, evaluate, is_expression, names_in
from cmpx.model.info import TensorSpec
from cmpx.model.shapes import resolve_input_shapes

# A decoder exported with its KV cache, as optimum writes it: the mask covers the past and the new token.
KV_CACHE = [TensorSpec("input_ids", "int64", ("batch_size", "sequence_length")),
            TensorSpec("attention_mask", "int64", ("batch_size", "past_sequence_length + 1")),
            TensorSpec("past_key_values.0.key", "float32", ("batch_size", 4, "past_sequence_length", 8)),
            TensorSpec("past_key_values.0.value", "float32", ("batch_size", 4, "past_sequence_length", 8))]


def test_a_kv_cache_models_mask_is_the_past_plus_one_whatever_sets_the_past():
    warnings = []
    shapes = [s.shape for s in resolve_input_shapes(KV_CACHE, {}, warnings.append)]
    assert shapes == [(1, 1), (1, 17), (1, 4, 16, 8), (1, 4, 16, 8)]  # one new token after a past of 16
    assert "sequence_length=1, cmpx's size for one new token after a KV cache's past" in warnings[0]
    assert "past_sequence_length + 1 = 17" in warnings[1]
    assert "--input-shapes batch_size=1 past_sequence_length=16" in warnings[1]
    by_name = resolve_input_shapes(KV_CACHE, {}, print, dims={"past_sequence_length": 5})
    assert [s.shape for s in by_name][1:3] == [(1, 6), (1, 4, 5, 8)]
    through_an_input = resolve_input_shapes(KV_CACHE, {"past_key_values.0.key": (2, 4, 9, 8)}, print)
    assert [s.shape for s in through_an_input][1:] == [(2, 10), (2, 4, 9, 8), (2, 4, 9, 8)]


def test_the_other_exporters_mask_of_the_past_and_the_new_tokens_agrees_too():
    mask = TensorSpec("attention_mask", "int64", ("batch_size", "past_sequence_length + sequence_length"))
    inputs = [KV_CACHE[0], mask, *KV_CACHE[2:]]
    assert resolve_input_shapes(inputs, {}, print)[1].shape == (1, 17)
    given = resolve_input_shapes(inputs, {}, print, dims={"sequence_length": 4})
    assert [s.shape for s in given][:2] == [(1, 4), (1, 20)]


def test_a_name_only_inside_an_expression_can_be_set_and_is_listed():
    inputs = [TensorSpec("frames", "float32", ("batch", "2*sequence", 80))]
    assert resolve_input_shapes(inputs, {}, print, dims={"sequence": 3})[0].shape == (1, 6, 80)
    with pytest.raises(UsageError, match=re.escape("its named dimensions are: batch, sequence")):
        resolve_input_shapes(inputs, {}, print, dims={"time": 3})


def test_conventions_images_and_audio():
    image = TensorSpec("pixel_values", "float32", ("batch", 3, "height", "width"))
    audio = TensorSpec("input_values", "float32", ("batch", "sequence"))  # wav2vec2, as exported
    unknown = TensorSpec("x", "float32", ("s0", "unk__1", None))
    shapes = [s.shape for s in resolve_input_shapes([image, audio, unknown], {}, print)]
    assert shapes == [(1, 3, 224, 224), (1, 16000), (1, 1, 1)]
    assert {c.what for c in CONVENTIONS} >= {"a batch", "a token sequence", "audio samples"}


def test_what_a_new_user_exported_next(tmp_path):
    """Found by trying exports from transformers and onnxruntime-genai: optimum's vision inputs name their channels,
    a 3-D audio input has channels too, fused attention masks cover the past and the new token, and an
    encoder-decoder's encoder sequence is no new token."""
    vit = TensorSpec("pixel_values", "float32", ("batch_size", "num_channels", "height", "width"))
    audio = TensorSpec("audio", "float32", ("batch", "channels", "num_samples"))
    assert [s.shape for s in resolve_input_shapes([vit], {}, print)] == [(1, 3, 224, 224)]
    assert resolve_input_shapes([audio], {}, print)[0].shape == (1, 1, 16000)
    genai = [KV_CACHE[0], TensorSpec("attention_mask", "int64", ("batch_size", "total_sequence_length")),
             *KV_CACHE[2:]]
    assert resolve_input_shapes(genai, {}, print)[1].shape == (1, 17)
    assert resolve_input_shapes(genai, {}, print, dims={"past_sequence_length": 4})[1].shape == (1, 5)
    seq2seq = [TensorSpec("encoder_hidden_states", "float32", ("batch_size", "encoder_sequence_length", 8)),
               *KV_CACHE]
    warnings = []
    shapes = [s.shape for s in resolve_input_shapes(seq2seq, {}, warnings.append)]
    assert shapes[0] == (1, 16, 8) and shapes[1] == (1, 1)  # the encoder's sequence; one new decoder token
    assert "encoder_sequence_length=16, cmpx's size for a token sequence" in warnings[0]


def test_a_size_given_for_an_expression_sets_its_name_or_must_agree_with_it():
    given = resolve_input_shapes(KV_CACHE, {"attention_mask": (1, 9)}, print)
    assert [s.shape for s in given][2] == (1, 4, 8, 8)  # past_sequence_length + 1 = 9: the past is 8
    with pytest.raises(UsageError, match=re.escape(
            "--input-shapes attention_mask:[1,9] sets dimension past_sequence_length + 1 to 9, but with "
            "past_sequence_length=16 it is 17")):
        resolve_input_shapes(KV_CACHE, {"attention_mask": (1, 9), "past_key_values.0.key": (1, 4, 16, 8)}, print)


def test_the_warning_says_why_from_every_size_and_names_a_fraction_as_such():
    inputs = [TensorSpec("input_ids", "int64", ("batch_size", "sequence_length")),
              TensorSpec("mask", "int64", ("batch_size", "past_sequence_length + sequence_length")),
              TensorSpec("third", "float32", ("sequence/3",)),
              TensorSpec("torch", "float32", ("CeilToInt(IntTrueDiv(s, 3))",))]
    warnings = []
    shapes = [s.shape for s in resolve_input_shapes(inputs, {}, warnings.append, dims={"past_sequence_length": 4,
                                                                                       "s": 7})]
    assert shapes == [(1, 1), (1, 5), (1,), (3,)]
    assert "sequence_length=1, cmpx's size for one new token after a KV cache's past" in warnings[0]
    assert "sequence/3 gives no whole size of 0 or more: 1" in warnings[1]  # (the mask's names were named)


def test_data_from_files_leaves_what_it_does_not_know_open():
    resolved = resolve_input_shapes(KV_CACHE, {}, print, fill_dynamic=False, dims={"past_sequence_length": 3})
    assert resolved[1].shape == ("batch_size", 4) and resolved[2].shape == ("batch_size", 4, 3, 8)
    assert all(s.chosen == () for s in resolved)


@pytest.mark.parametrize("text, sizes, value", [
    ("past_sequence_length + 1", {"past_sequence_length": 16}, 17),
    ("2*sequence", {"sequence": 5}, 10),
    ("Min(64, sequence)", {"sequence": 100}, 64),
    ("floor(s0/2) + 1", {"s0": 7}, 4),
    ("(s0 - 1)//2 + 1", {"s0": 9}, 5),
    ("s0 - 5", {"s0": 2}, None),  # no negative sizes
    ("s0/2", {"s0": 3}, None),  # no fractions
    ("s1 + 1", {"s0": 3}, None),  # a name without a size
])
def test_expressions(text, sizes, value):
    assert evaluate(text, sizes) == value


@pytest.mark.parametrize("text", ["__import__('os').system('true')", "s0 ** 99999999", "(lambda: 1)()",
                                  "s0.real", "[1][0]", "'a' * 3", "True + 1", "open('f')", "s0 if s0 else 1",
                                  "1.5 * s0", "x" * 300])
def test_anything_but_an_arithmetic_of_sizes_is_a_name_not_an_expression(text):
    assert evaluate(text, {"s0": 2}) is None
    assert not is_expression(text)


@given(st.text(max_size=40))
def test_any_text_is_a_name_or_a_size_and_never_raises(text):
    value = evaluate(text, {name: 3 for name in names_in(text)})
    assert value is None or (isinstance(value, int) and value >= 0)


def _model(nodes, inputs, outputs, initializers=()):
    return helper.make_model(helper.make_graph(nodes, "dims", inputs, outputs, list(initializers)),
                             opset_imports=[helper.make_opsetid("", 17)])


def kv_cache_decoder(path) -> str:
    """One layer's key cache: the new token's key joins the past, then takes the mask's length (a Reshape that
    only fits when the mask covers the past and the new token, as optimum's exports need)."""
    f, i = TensorProto.FLOAT, TensorProto.INT64
    nodes = [helper.make_node("Cast", ["input_ids"], ["ids"], to=f),
             helper.make_node("Unsqueeze", ["ids", "axes13"], ["ids4"]),
             helper.make_node("Expand", ["ids4", "heads"], ["new_key"]),
             helper.make_node("Concat", ["past_key", "new_key"], ["present"], axis=2),
             helper.make_node("Shape", ["present"], ["present_shape"]),
             helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
             helper.make_node("Slice", ["present_shape", "zero", "two"], ["lead"]),
             helper.make_node("Slice", ["mask_shape", "one", "two"], ["length"]),
             helper.make_node("Concat", ["lead", "length", "four"], ["target"], axis=0),
             helper.make_node("Reshape", ["present", "target"], ["present_key"])]
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
              [("axes13", [1, 3]), ("heads", [1, 2, 1, 4]), ("zero", [0]), ("one", [1]), ("two", [2]), ("four", [4])]]
    return modelgen.save(_model(nodes, [
        helper.make_tensor_value_info("input_ids", i, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", i, ["batch_size", "past_sequence_length + 1"]),
        helper.make_tensor_value_info("past_key", f, ["batch_size", 2, "past_sequence_length", 4])],
        [helper.make_tensor_value_info("present_key", f, None)], consts), path)


def speech_encoder(path, input_name="input_values", time="sequence") -> str:
    """wav2vec2's first layer: a 400-sample window every 320 samples (25 ms every 20 ms at 16 kHz)."""
    weights = numpy_helper.from_array(np.full((4, 1, 400), 0.01, np.float32), "W")
    nodes = [helper.make_node("Unsqueeze", [input_name, "axis1"], ["x"]),
             helper.make_node("Conv", ["x", "W"], ["features"], strides=[320])]
    return modelgen.save(_model(nodes, [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, ["batch", time])],
                                [helper.make_tensor_value_info("features", TensorProto.FLOAT, None)],
                                [weights, numpy_helper.from_array(np.array([1], np.int64), "axis1")]), path)


def test_a_kv_cache_decoder_and_a_speech_encoder_run_with_no_options(run_cli, tmp_path):
    decoder = run_cli("run", kv_cache_decoder(tmp_path / "decoder.onnx"), "--backend", "onnxrt", "--backend", "onnxref")
    assert decoder.exit_code == 0, decoder.output
    assert ("using [1, 17] (past_sequence_length=16, cmpx's size for the past of a KV cache; past_sequence_length + 1 "
            "= 17)") in decoder.output
    speech = run_cli("run", speech_encoder(tmp_path / "speech.onnx"), "--backend", "onnxrt", "--backend", "onnxref")
    assert speech.exit_code == 0, speech.output
    assert "using [1, 16000] (sequence=16000, cmpx's size for audio samples)" in speech.output


def test_a_backend_failing_on_a_size_cmpx_chose_is_told_which_and_how_to_set_it(run_cli, tmp_path):
    model = speech_encoder(tmp_path / "frames.onnx", input_name="frames", time="t")  # nothing says t is audio
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref")
    assert result.exit_code == 3, result.output
    assert ("hint: cmpx chose the sizes of the model's dynamic dimensions (batch=1 t=1); if the model needs others, "
            "give them: --input-shapes batch=1 t=1 with your sizes") in result.output
    assert result.output.count("hint: cmpx chose the sizes") == 1  # once, though both backends failed
    fixed = run_cli("run", model, "--backend", "onnxrt", "--backend", "onnxref", "--input-shapes", "t=800")
    assert fixed.exit_code == 0, fixed.output
    assert "hint: cmpx chose" not in fixed.output
