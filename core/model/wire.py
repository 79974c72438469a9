"""The protobuf wire format, read directly: the few fields cmpx needs from a large message without a schema
library, and without touching the fields it skips (an ONNX model's weights are never read or copied).

Reference: https://protobuf.dev/programming-guides/encoding/. Groups (wire types 3 and 4, deprecated and
unused by ONNX) are rejected as malformed input.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
_FIXED_SIZES = {FIXED64: 8, FIXED32: 4}
_MAX_VARINT_BYTES = 10


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message."""


def read_varint(buffer: memoryview, position: int) -> tuple[int, int]:
    """The unsigned varint at ``position`` and the position after it."""
    result = shift = 0
    end = min(len(buffer), position + _MAX_VARINT_BYTES)
    while position < end:
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
    if position >= len(buffer):
        raise WireError("truncated varint")
    raise WireError("varint longer than 10 bytes")


def as_int64(value: int) -> int:
    """A varint read as a two's complement int64 (how protobuf encodes negative int32/int64 fields)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def fields(buffer: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """Each field of the message in ``buffer``, in order: (field number, wire type, value). A varint's value
    is the unsigned integer; every other value is a zero-copy slice of ``buffer``."""
    position, size = 0, len(buffer)
    while position < size:
        tag, position = read_varint(buffer, position)
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise WireError(f"field number 0 at byte {position}")
        if wire_type == VARINT:
            value, position = read_varint(buffer, position)
            yield number, wire_type, value
            continue
        if wire_type == LENGTH_DELIMITED:
            length, position = read_varint(buffer, position)
        elif wire_type in _FIXED_SIZES:
            length = _FIXED_SIZES[wire_type]
        else:
            raise WireError(f"unsupported wire type {wire_type} for field {number}")
        end = position + length
        if end > size:
            raise WireError(f"field {number} runs {end - size} byte(s) past the end of its message")
        yield number, wire_type, buffer[position:end]
        position = end


def text(value: int | memoryview, field: str) -> str:
    """A string field's value."""
    if not isinstance(value, memoryview):
        raise WireError(f"{field} is not a string")
    try:
        return str(value, "utf-8")
    except UnicodeDecodeError as exc:
        raise WireError(f"{field} is not valid UTF-8") from exc


def message(value: int | memoryview, field: str) -> memoryview:
    """An embedded message field's bytes."""
    if not isinstance(value, memoryview):
        raise WireError(f"{field} is not a message")
    return value


def integer(value: int | memoryview, field: str) -> int:
    """A varint field's value."""
    if isinstance(value, memoryview):
        raise WireError(f"{field} is not a varint")
    return value
