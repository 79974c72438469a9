"""Large weights converted at disk speed: detached from the model while its graph is transformed, then read from
their external data file, converted and written into the output's external data chunk by chunk.

A transform whose weight conversion is element-wise (fp16, bf16, fp64) needs no weight in memory while it
rewrites the graph. ``detach`` puts a one-element placeholder (one float32 zero) in place of each external
float32 tensor, so the graph tools (ONNX Runtime's float16 converter, the bfloat16 retyping, the widening) run on
a graph of a few kilobytes and convert only the placeholder; the placeholder's final type then says what its
tensor became. ``DetachedWeights.write`` reads each tensor from its source file in chunks of ``CHUNK`` elements,
converts each chunk (the transform's own ``convert``, which must give exactly what the in-memory conversion
gives) into reused buffers, and a writer thread appends it to the output's data file while the next chunk is
read: memory stays at a few chunks whatever the model's size, nothing passes through protobuf, and the source
files are read once.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cmpx.transforms.saving import tensors
from cmpx.userfiles import inside

CHUNK = 1 << 21  # elements per chunk: 8 MiB of float32
ALIGNMENT = 4096  # each tensor starts on a page, so ONNX Runtime can map it
FLOAT = 1

# (float32 chunk, the tensor's final ONNX type, SCRATCH bytes per element of scratch) -> the chunk in that type
Convert = Callable[[Any, int, Any], Any]
SCRATCH = 8  # enough for float64


@dataclass
class DetachedTensor:
    dims: tuple[int, ...]
    source: str  # the external data file
    offset: int  # of the tensor's bytes in it
    count: int  # elements


class DetachedWeights:
    """The tensors ``detach`` took out of a model, by name, to be written back converted by ``convert``."""

    def __init__(self, tensors: dict[str, DetachedTensor], convert: Convert):
        self.tensors = tensors
        self.convert = convert

    def write(self, model: Any, data_path: str) -> None:
        """Write each detached tensor, in the type its placeholder has now in ``model`` (converted by
        ``convert``), into ``data_path``, and make the placeholder an external reference to it with its dims."""
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np
        from onnx import TensorProto

        placeholders = {t.name: t for t in tensors(model.graph) if t.name in self.tensors}
        buffers = [np.empty(CHUNK, np.float32) for _ in range(2)]
        scratches = [np.empty(CHUNK * SCRATCH, np.uint8) for _ in range(2)]
        with open(data_path, "wb") as out, ThreadPoolExecutor(1, thread_name_prefix="cmpx-weights") as writer:
            for name, detached in self.tensors.items():
                tensor = placeholders.get(name)
                if tensor is None:  # the transform dropped it
                    continue
                start = out.seek(-out.tell() % ALIGNMENT, os.SEEK_CUR)
                # the writer thread writes one chunk while this one reads and converts the next (the writes
                # wait on the disk); each chunk is read and converted into the buffers whose write is done
                pending = None
                with open(detached.source, "rb") as source:
                    source.seek(detached.offset)
                    for index, done in enumerate(range(0, detached.count, CHUNK)):
                        chunk = buffers[index % 2][: min(CHUNK, detached.count - done)]
                        if source.readinto(chunk.view(np.uint8).data) != chunk.nbytes:
                            raise ValueError(f"{detached.source} ends inside tensor {name}")
                        converted = self.convert(chunk, tensor.data_type, scratches[index % 2])
                        converted = np.ascontiguousarray(converted).view(np.uint8)
                        if pending is not None:
                            pending.result()
                        pending = writer.submit(out.write, converted.data)
                if pending is not None:
                    pending.result()
                tensor.ClearField("raw_data")
                del tensor.dims[:]
                tensor.dims.extend(detached.dims)
                tensor.data_location = TensorProto.EXTERNAL
                del tensor.external_data[:]
                for key, value in (("location", os.path.basename(data_path)), ("offset", str(start)),
                                   ("length", str(out.tell() - start))):
                    entry = tensor.external_data.add()
                    entry.key, entry.value = key, value
        for info in [*model.graph.value_info, *model.graph.input]:  # the converter typed the placeholders
            if info.name in self.tensors and info.type.HasField("tensor_type"):
                shape = info.type.tensor_type.shape
                del shape.dim[:]
                for size in self.tensors[info.name].dims:
                    shape.dim.add().dim_value = size


def detach(model: Any, model_path: str, convert: Convert) -> DetachedWeights:
    """Replace each external float32 tensor of ``model`` (read from ``model_path`` without its weights) by a
    one-element placeholder, and say where its data is. A name that two tensors share (subgraphs may shadow
    one), or whose stated length is not its size, is left alone, to be read the ordinary way."""
    from collections import Counter

    from onnx import TensorProto

    from cmpx.model.graph import model_directory

    base = model_directory(model_path)
    every = list(tensors(model.graph))
    names = Counter(t.name for t in every)
    detached = {}
    for tensor in every:
        if tensor.data_location != TensorProto.EXTERNAL or tensor.data_type != FLOAT or names[tensor.name] > 1:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        count = 1
        for size in tensor.dims:
            count *= size
        if "location" not in info or int(info.get("length", count * 4)) != count * 4:
            continue
        source = inside(base, info["location"], f"{model_path}: external data")
        detached[tensor.name] = DetachedTensor(tuple(tensor.dims), source, int(info.get("offset", 0)), count)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT
        del tensor.dims[:]
        tensor.dims.append(1)
        tensor.raw_data = bytes(4)
    return DetachedWeights(detached, convert)


