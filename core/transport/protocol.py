"""Length-prefixed msgpack frames between the coordinator and its workers.

A frame is a 4-byte big-endian payload length followed by a msgpack map with at least an ``op`` key; the
messages are listed in messages.py. Tensors never travel in frames, only their descriptors (segment, offset,
dtype, shape).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from typing import Any

import msgpack

from cmpx.errors import ProtocolError
from cmpx.transport.messages import FROM_WORKER, PROTOCOL_VERSION, TO_WORKER

__all__ = ["FROM_WORKER", "HEADER", "MAX_FRAME", "PROTOCOL_VERSION", "TO_WORKER", "FrameDecoder", "encode",
           "read_frame", "write_frame"]

HEADER = struct.Struct(">I")
MAX_FRAME = 16 * 1024 * 1024


def encode(message: Mapping[str, Any]) -> bytes:
    payload = msgpack.packb(message, use_bin_type=True)
    if len(payload) > MAX_FRAME:
        raise ProtocolError(f"message {message.get('op')!r} is {len(payload)} bytes, over the {MAX_FRAME} limit")
    return HEADER.pack(len(payload)) + payload


def _decode_payload(payload: bytes, allowed_ops: frozenset[str]) -> dict[str, Any]:
    try:
        message = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for garbage
        raise ProtocolError(f"undecodable frame ({type(exc).__name__}: {exc})") from None
    if not isinstance(message, dict) or message.get("op") not in allowed_ops:
        op = message.get("op") if isinstance(message, dict) else type(message).__name__
        raise ProtocolError(f"unexpected message {op!r}; expected one of {', '.join(sorted(allowed_ops))}")
    return message


class FrameDecoder:
    """Incremental decoder for a non-blocking reader: feed bytes, get complete messages."""

    def __init__(self, allowed_ops: frozenset[str] = FROM_WORKER):
        self._buffer = bytearray()
        self._allowed = allowed_ops

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        messages = []
        while len(self._buffer) >= HEADER.size:
            (length,) = HEADER.unpack_from(self._buffer)
            if length > MAX_FRAME:
                raise ProtocolError(f"frame of {length} bytes announced, over the {MAX_FRAME} limit")
            if len(self._buffer) < HEADER.size + length:
                break
            payload = bytes(self._buffer[HEADER.size:HEADER.size + length])
            del self._buffer[:HEADER.size + length]
            messages.append(_decode_payload(payload, self._allowed))
        return messages

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame (non-zero at EOF means the frame was truncated)."""
        return len(self._buffer)


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, allowed_ops: frozenset[str] = TO_WORKER) -> dict[str, Any] | None:
    """Blocking read of one frame; None at a clean EOF, ProtocolError on a truncated or bad frame."""
    header = _read_exactly(fd, HEADER.size)
    if not header:
        return None
    if len(header) < HEADER.size:
        raise ProtocolError("truncated frame header")
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ProtocolError(f"frame of {length} bytes announced, over the {MAX_FRAME} limit")
    payload = _read_exactly(fd, length)
    if len(payload) < length:
        raise ProtocolError(f"truncated frame: {len(payload)} of {length} bytes")
    return _decode_payload(payload, allowed_ops)


def write_frame(fd: int, message: Mapping[str, Any]) -> None:
    data = memoryview(encode(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]
