import os

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmpx.errors import ProtocolError
from cmpx.transport.protocol import HEADER, MAX_FRAME, FrameDecoder, encode, read_frame, write_frame

messages = st.fixed_dictionaries({"op": st.sampled_from(["hello", "ready", "result", "bye"]),
                                  "id": st.integers(0, 2**31)},
                                 optional={"outputs": st.lists(st.dictionaries(st.text(max_size=5),
                                                                               st.integers(-2**63, 2**63 - 1), max_size=3))})


@given(st.lists(messages, max_size=5), st.integers(1, 7))
def test_frames_survive_any_split_into_chunks(batch, chunk):
    data = b"".join(encode(m) for m in batch)
    decoder, out = FrameDecoder(), []
    for start in range(0, len(data), chunk):
        out += decoder.feed(data[start:start + chunk])
    assert out == batch and decoder.pending == 0


def test_garbage_unknown_ops_and_oversized_frames_are_protocol_errors():
    with pytest.raises(ProtocolError, match="undecodable"):
        FrameDecoder().feed(HEADER.pack(3) + b"\xc1\xc1\xc1")
    with pytest.raises(ProtocolError, match="unexpected message 'launch'"):
        FrameDecoder().feed(encode({"op": "launch"}))
    with pytest.raises(ProtocolError, match="over the"):
        FrameDecoder().feed(HEADER.pack(MAX_FRAME + 1))
    with pytest.raises(ProtocolError, match="unexpected message 'list'"):
        payload = msgpack.packb([1, 2])
        FrameDecoder().feed(HEADER.pack(len(payload)) + payload)


def test_blocking_reads_tell_clean_eof_from_truncation():
    read_end, write_end = os.pipe()
    write_frame(write_end, {"op": "load", "id": 1})
    os.write(write_end, encode({"op": "infer"})[:-1])
    os.close(write_end)
    assert read_frame(read_end) == {"op": "load", "id": 1}
    with pytest.raises(ProtocolError, match="truncated frame"):
        read_frame(read_end)
    assert read_frame(read_end) is None
    os.close(read_end)
