"""Sizes for the named dynamic dimensions of a model's inputs that nothing sets, when cmpx makes the data.

Exporters name dynamic dimensions (``batch``, ``sequence_length``) and write some as expressions of others
(``past_sequence_length + 1`` for a KV-cache model's attention mask, ``2*sequence``, sympy's ``Min(64, s0)``).
An expression is evaluated from the sizes of the names in it, so that inputs that must agree do; a name no
option sets gets its conventional size (CONVENTIONS, documented in docs/data.md; a model with a KV cache decodes
one new token), else 1 (Polygraphy's choice).
Expressions are parsed, never run: only integers, names, + - * // / %, parentheses and min/max/floor/ceiling.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SAMPLES_PER_SECOND = 16_000  # speech models' usual rate: one second of audio


@dataclass(frozen=True)
class Convention:
    what: str  # what such a dimension is, as docs/data.md's table says
    size: int
    names: frozenset[str]  # dimension names, lower case


NEW_TOKENS = frozenset({"sequence", "sequence_length", "sequence_len", "seq", "seq_len", "seq_length", "tokens",
                        "num_tokens", "decoder_sequence_length", "text_length"})
CONVENTIONS = (
    Convention("a batch", 1, frozenset({"batch", "batch_size", "batchsize", "bs", "n", "b", "num_batches"})),
    Convention("a token sequence", 16, NEW_TOKENS | {
        "encoder_sequence_length", "encoder_sequence_length_out", "max_seq_len", "max_sequence_length"}),
    Convention("the past of a KV cache", 16, frozenset({
        "past_sequence_length", "past_seq_len", "past_seq_length", "past_length", "past_len", "past_sequence",
        "past_key_values_length", "past_decoder_sequence_length", "cache_length", "cache_len"})),
    Convention("an image's height or width", 224, frozenset({
        "height", "width", "h", "w", "image_height", "image_width", "img_height", "img_width", "img_h", "img_w"})),
    Convention("audio samples", SAMPLES_PER_SECOND, frozenset({
        "audio_length", "audio_len", "num_samples", "samples", "sample_length", "wav_length", "wav_len",
        "samples_length", "waveform_length"})),
    Convention("an image's colour channels", 3, frozenset({"num_channels", "channels", "channel", "c",
                                                          "in_channels", "num_channel"})),
    # the past and the new tokens together (onnxruntime-genai's and ORT's fused attention masks)
    Convention("the past of a KV cache and the new token", 17, frozenset({
        "total_sequence_length", "total_seq_len", "total_length", "total_sequence"})),
)

BATCH, _SEQUENCE, PAST, _IMAGE, AUDIO, CHANNELS, TOTAL = CONVENTIONS
# A model with a KV cache among its inputs decodes: one new token after the past (optimum's attention mask of
# ``past_sequence_length + 1`` needs it); the encoder's sequence of an encoder-decoder stays a sequence.
DECODING = Convention("one new token after a KV cache's past", 1, NEW_TOKENS)
AUDIO_CHANNELS = Convention("audio's channels (mono)", 1, CHANNELS.names)

# Inputs that hold raw audio by their usual names: their dynamic dimensions other than a batch or channels are
# samples.
AUDIO_INPUTS = frozenset({"input_values", "audio", "audio_values", "input_audio", "waveform", "wav", "speech",
                          "raw_audio", "audio_signal"})


def decodes(names: Iterable[str]) -> bool:
    """Whether a model whose inputs have the dimensions ``names`` takes a KV cache's past."""
    return any(name.lower() in PAST.names for name in names)


def convention_of(dimension: str, input_name: str, decoding: bool = False) -> Convention | None:
    """The convention that sizes ``dimension`` of input ``input_name`` (of a model that ``decoding``), or None
    (it becomes 1)."""
    name = dimension.lower()
    if input_name.lower() in AUDIO_INPUTS and name not in BATCH.names:
        return AUDIO_CHANNELS if name in CHANNELS.names else AUDIO
    if decoding and name in DECODING.names:
        return DECODING
    return next((c for c in CONVENTIONS if name in c.names), None)


def is_expression(dimension: str) -> bool:
    """Whether a dimension's name is an expression of others (``past_sequence_length + 1``), not a plain name."""
    return IDENTIFIER.fullmatch(dimension.strip()) is None and _parse(dimension) is not None


def names_in(dimension: str) -> list[str]:
    """The plain names an expression is made of, in order (a plain name is its own)."""
    tree = _parse(dimension)
    if tree is None:
        return []
    return list(dict.fromkeys(node.id for node in ast.walk(tree) if isinstance(node, ast.Name)
                              and node.id not in _FUNCTIONS))


def solve(dimension: str, name: str, size: int, sizes: Mapping[str, int]) -> int | None:
    """The size of ``name`` for which the expression ``dimension`` gives ``size`` (the other names from
    ``sizes``), when the expression is linear in it (``past + 1``, ``2*s``, ``past + sequence``); else None."""
    at = [given for x in (0, 1, 2) if (given := evaluate(dimension, {**sizes, name: x})) is not None]
    if len(at) < 3 or at[1] - at[0] != at[2] - at[1] or at[1] == at[0]:
        return None
    slope, value = at[1] - at[0], size - at[0]
    return value // slope if value % slope == 0 and value // slope >= 0 else None


def evaluate(dimension: str, sizes: Mapping[str, int]) -> int | None:
    """The size an expression gives from ``sizes`` of its names; None when it is not one cmpx reads, a name in
    it has no size, or it gives no whole size of 0 or more."""
    tree = _parse(dimension)
    if tree is None:
        return None
    try:
        value = _value(tree.body, sizes)
    except (KeyError, ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    return value if value >= 0 else None


_FUNCTIONS: dict[str, Callable[..., int | float]] = {
    "min": min, "max": max, "Min": min, "Max": max, "floor": math.floor, "ceiling": math.ceil, "ceil": math.ceil,
    "FloorToInt": math.floor, "CeilToInt": math.ceil,  # torch's sympy spellings:
    "IntTrueDiv": lambda a, b: a / b, "FloorDiv": lambda a, b: a // b, "Mod": lambda a, b: a % b}
_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
              ast.FloorDiv: lambda a, b: a // b, ast.Div: lambda a, b: a / b, ast.Mod: lambda a, b: a % b}
MAX_EXPRESSION = 200  # characters: a dimension's name, not a program


def _parse(dimension: str) -> ast.Expression | None:
    if len(dimension) > MAX_EXPRESSION:
        return None
    try:
        tree = ast.parse(dimension.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd, ast.Name, ast.Load, ast.Constant,
               ast.Call, *_OPERATORS)
    for node in ast.walk(tree):
        if not isinstance(node, allowed):
            return None
        if isinstance(node, ast.Constant) and (isinstance(node.value, bool) or not isinstance(node.value, int)):
            return None
        if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS
                                           or node.keywords or not node.args):
            return None
    return tree


def _value(node: ast.AST, sizes: Mapping[str, int]) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        return sizes[node.id]
    if isinstance(node, ast.UnaryOp):
        operand = _value(node.operand, sizes)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, sizes), _value(node.right, sizes)
        if abs(left) > 1 << 62 or abs(right) > 1 << 62:
            raise OverflowError
        return _OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _FUNCTIONS[node.func.id](*(_value(arg, sizes) for arg in node.args))
    raise ValueError(type(node).__name__)
