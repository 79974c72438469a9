"""Read-only support for ONNX test-data directories: test_data_set_N/input_K.pb and output_K.pb TensorProtos.

Names come from the protos; where a proto has none, from the model's inputs (or outputs) in order.
A path may be one test_data_set_N directory or a directory holding several (taken in N order).
"""

from __future__ import annotations

import functools
import glob
import os
import re
from collections.abc import Sequence
from typing import Any

from cmpx.dtypes import ONNX_TO_NUMPY, PACKED_BITS, numpy_dtype
from cmpx.saved.model import SavedFile, SavedSource
from cmpx.saved.npy import SavedDataError
from cmpx.userfiles import inside, open_regular

_SET = re.compile(r"test_data_set_(\d+)\Z")


def test_data_sets(path: str) -> list[str]:
    """The test_data_set_N directories at ``path`` (itself one, or holding several), in N order."""
    if _SET.match(os.path.basename(os.path.normpath(path))):
        return [path]
    found = [(int(m.group(1)), d) for d in glob.glob(os.path.join(path, "test_data_set_*"))
             if os.path.isdir(d) and (m := _SET.match(os.path.basename(d)))]
    return [d for _, d in sorted(found, key=lambda numbered: numbered[0])]


def read_test_data(path: str, kind: str, fallback_names: Sequence[str]) -> SavedFile:
    """``kind`` "inputs" reads input_K.pb, "outputs" output_K.pb, naming unnamed protos from ``fallback_names``."""
    prefix = "input" if kind == "inputs" else "output"
    source = SavedSource("inputs" if kind == "inputs" else "expected")
    numbered = re.compile(rf"{prefix}_(\d+)\.pb\Z")
    for directory in test_data_sets(path):
        found = [(int(m.group(1)), os.path.join(directory, name)) for name in os.listdir(directory)
                 if (m := numbered.match(name))]
        files = [file for _, file in sorted(found)]
        if not files:
            raise SavedDataError(f"{directory}: no {prefix}_K.pb files")
        source.loaders.append(functools.partial(_read_protos, files, fallback_names))
        source.digests.append(None)
    if not len(source):
        raise SavedDataError(f"{path}: no test_data_set_N directories")
    for iteration in range(len(source)):  # every tensor read once now: a damaged one is found before any backend
        source.load(iteration)
    return SavedFile(path, kind, [source])


def _read_protos(files: Sequence[str], fallback_names: Sequence[str]) -> dict:
    tensors = {}
    for position, file in enumerate(files):
        proto, array = read_tensor_proto(file)
        name = proto.name or (fallback_names[position] if position < len(fallback_names) else None)
        if name is None:
            raise SavedDataError(f"{file}: the tensor has no name and the model has no {position + 1}th tensor "
                                 "to name it after")
        tensors[name] = array
    return tensors


def read_tensor_proto(file: str) -> tuple[Any, Any]:
    """A TensorProto file and its array. External data is looked up in the file's own directory and must stay
    inside it; the size the tensor declares is checked against the data before anything is allocated."""
    from google.protobuf.message import DecodeError
    from onnx import TensorProto, numpy_helper

    directory = os.path.dirname(os.path.abspath(file))
    proto = TensorProto()
    try:
        with open_regular(file, "tensor file") as f:
            proto.ParseFromString(f.read())
    except (DecodeError, ValueError) as exc:
        raise SavedDataError(f"{file}: not a readable TensorProto ({type(exc).__name__})") from None
    available = len(proto.raw_data)
    if proto.data_location == TensorProto.EXTERNAL:
        entries = {entry.key: entry.value for entry in proto.external_data}
        data_file = inside(directory, entries.get("location"), f"{file}: external data")
        try:
            offset, length = int(entries.get("offset") or 0), entries.get("length")
        except ValueError:
            raise SavedDataError(f"{file}: external data offset {entries.get('offset')!r} is not a number") from None
        available = max(0, os.path.getsize(data_file) - offset) if length is None else int(length)
    elements = 1
    for dim in proto.dims:
        elements *= max(int(dim), 0)
    try:
        bits = PACKED_BITS.get(proto.data_type) or 8 * numpy_dtype(ONNX_TO_NUMPY[proto.data_type]).itemsize
    except KeyError:
        raise SavedDataError(f"{file}: element type {proto.data_type} is not a numeric type cmpx compares") from None
    needed = (elements * bits + 7) // 8  # int4, float4 and int2 values are packed, several to a byte
    if (proto.data_location == TensorProto.EXTERNAL or proto.raw_data) and needed > available:
        raise SavedDataError(f"{file}: the tensor declares {elements} elements ({needed} bytes) but its "
                             f"data holds {available} bytes; the file is damaged or truncated")
    try:
        array = numpy_helper.to_array(proto, base_dir=directory)
    except (ValueError, TypeError, OSError, MemoryError) as exc:
        raise SavedDataError(f"{file}: not a readable TensorProto ({type(exc).__name__})") from None
    return proto, array
