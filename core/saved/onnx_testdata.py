"""Read-only support for ONNX test-data directories: test_data_set_N/input_K.pb and output_K.pb TensorProtos.

Names come from the protos; where a proto has none, from the model's inputs (or outputs) in order.
A path may be one test_data_set_N directory or a directory holding several (taken in N order).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence

from cmpx.saved.model import SavedFile, SavedSource
from cmpx.saved.npy import SavedDataError

_SET = re.compile(r"test_data_set_(\d+)\Z")


def test_data_sets(path: str) -> list[str]:
    """The test_data_set_N directories at ``path`` (itself one, or holding several), in N order."""
    if _SET.match(os.path.basename(os.path.normpath(path))):
        return [path]
    found = [d for d in glob.glob(os.path.join(path, "test_data_set_*")) if os.path.isdir(d) and _SET.match(
        os.path.basename(d))]
    return sorted(found, key=lambda d: int(_SET.match(os.path.basename(d)).group(1)))


def read_test_data(path: str, kind: str, fallback_names: Sequence[str]) -> SavedFile:
    """``kind`` "inputs" reads input_K.pb, "outputs" output_K.pb, naming unnamed protos from ``fallback_names``."""
    prefix = "input" if kind == "inputs" else "output"
    source = SavedSource("inputs" if kind == "inputs" else "expected")
    for directory in test_data_sets(path):
        files = sorted(glob.glob(os.path.join(directory, f"{prefix}_*.pb")),
                       key=lambda f: int(re.search(r"_(\d+)\.pb\Z", f).group(1)))
        if not files:
            raise SavedDataError(f"{directory}: no {prefix}_K.pb files")
        source.loaders.append(lambda files=files: _read_protos(files, fallback_names))
        source.digests.append(None)
    if not len(source):
        raise SavedDataError(f"{path}: no test_data_set_N directories")
    return SavedFile(path, kind, [source])


def _read_protos(files: Sequence[str], fallback_names: Sequence[str]) -> dict:
    from google.protobuf.message import DecodeError
    from onnx import TensorProto, numpy_helper

    tensors = {}
    for position, file in enumerate(files):
        proto = TensorProto()
        try:
            with open(file, "rb") as f:
                proto.ParseFromString(f.read())
            array = numpy_helper.to_array(proto)
        except (DecodeError, OSError, ValueError, TypeError) as exc:
            raise SavedDataError(f"{file}: not a readable TensorProto ({exc})") from None
        name = proto.name or (fallback_names[position] if position < len(fallback_names) else None)
        if name is None:
            raise SavedDataError(f"{file}: the tensor has no name and the model has no {position + 1}th tensor "
                                 "to name it after")
        tensors[name] = array
    return tensors
