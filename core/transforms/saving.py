"""Reading a model for a transform and writing the result, for models of any size.

A model over 2 GB keeps its weights in external data files, and protobuf cannot hold it as one message: nothing
here serializes a whole model with its weights. Shapes are inferred on the model without its weights; only the
weights a transform changes are read (``load_for_transform``); the others stay in their files, which are copied
next to the transformed model by the kernel (``copy_file_range``, holes kept), never through this process's
memory. They are copied, not linked: onnx refuses external data files with more than one hard link, or behind a
symbolic link, and the reference evaluator and ONNX Runtime's quantizer load models through onnx. A result too
large for one message is written with external data of its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from cmpx.errors import UsageError

if TYPE_CHECKING:
    from onnx import ModelProto, TensorProto


PROTOBUF_LIMIT = 2**31 - 2**25  # stay clear of protobuf's 2 GB message limit


class WeightWriter(Protocol):
    """Weights taken out of a model while it is transformed (cmpx.transforms.streamed.DetachedWeights), written
    by ``write`` into the result's data file; ``tensors``: by name, empty when there were none."""

    @property
    def tensors(self) -> Mapping[str, Any]: ...

    def write(self, model: Any, data_path: str) -> None: ...


def load_for_transform(model_path: str, loads: Callable[[TensorProto], bool]) -> ModelProto:
    """The model at ``model_path`` with inferred shapes and types, the external data of the tensors ``loads``
    selects (a TensorProto -> bool) read in, and every other external tensor left as a reference to its file in
    the model's directory (``save_model`` copies those files next to the transformed model)."""
    from cmpx.model.graph import load_structure

    model = load_structure(model_path)
    read_external(model, model_path, loads)
    return model


def read_external(model: ModelProto, model_path: str, loads: Callable[[TensorProto], bool]) -> None:
    """Read in the external data of the tensors of ``model`` (from ``model_path``) that ``loads`` selects."""
    from onnx import TensorProto
    from onnx.external_data_helper import load_external_data_for_tensor

    from cmpx.model.graph import model_directory

    base = model_directory(model_path)
    for tensor in tensors(model.graph):
        if tensor.data_location == TensorProto.EXTERNAL and loads(tensor):
            load_external_data_for_tensor(tensor, base)
            tensor.data_location = TensorProto.DEFAULT
            del tensor.external_data[:]


def tensors(graph) -> Iterator[Any]:
    """Every TensorProto of a graph: initializers (sparse ones' values too), and tensors in node attributes,
    subgraphs included."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from tensors(subgraph)


def save_model(model: ModelProto, output_path: str, source_path: str | None = None,
               detached: WeightWriter | None = None) -> None:
    """Write ``model`` to ``output_path``: with external data (``<output>.data``) when its weights are too large
    for one protobuf message, when some of them are still references into ``source_path``'s external data
    files, which are then copied next to ``output_path`` under the same relative names, or when ``detached``
    weights (cmpx.transforms.streamed) are to be written, which go first into ``<output>.data``."""
    import onnx
    from onnx import TensorProto

    kept = [t for t in tensors(model.graph) if t.data_location == TensorProto.EXTERNAL and not t.raw_data]
    if kept:
        if source_path is None:
            raise ValueError("a model with external data left unread needs the path it was read from")
        _copy_external_files(kept, source_path, output_path)
    streamed = detached is not None and bool(detached.tensors)
    size = sum(t.ByteSize() for t in tensors(model.graph))
    large = bool(kept) or streamed or size > PROTOBUF_LIMIT
    location = os.path.basename(output_path) + ".data"
    data_path = os.path.join(os.path.dirname(os.path.abspath(output_path)), location)
    if large and os.path.exists(data_path):
        os.unlink(data_path)  # ours, from an earlier run
    if detached is not None and streamed:
        detached.write(model, data_path)  # onnx.save appends the other large tensors after these
    onnx.save(model, output_path, save_as_external_data=large, all_tensors_to_one_file=True, location=location)


def has_external_data(model_path: str) -> bool:
    """Whether any tensor of the model keeps its data in an external file."""
    import onnx
    from onnx import TensorProto

    model = onnx.load(model_path, load_external_data=False)
    return any(t.data_location == TensorProto.EXTERNAL for t in tensors(model.graph))


def _copy_external_files(external: list[Any], source_path: str, output_path: str) -> None:
    from cmpx.model.graph import model_directory
    from cmpx.userfiles import inside

    source_dir, output_dir = model_directory(source_path), model_directory(output_path)
    if os.path.samefile(source_dir, output_dir):
        return
    locations = {entry.value for tensor in external for entry in tensor.external_data if entry.key == "location"}
    for location in sorted(locations):
        source = inside(source_dir, location, f"{source_path}: external data")
        target = os.path.join(output_dir, location)
        if os.path.lexists(target):
            if os.path.isdir(target) or os.path.islink(target):
                raise UsageError(f"{target} is in the way of the external data the transformed model needs; give "
                                 "--save-transformed a directory without it")
            os.unlink(target)  # an earlier transform's copy (a link elsewhere must not be written through)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        copy_keeping_holes(source, target)


def copy_keeping_holes(source: str, target: str) -> None:
    """Copy ``source`` to ``target`` in the kernel, data extents only: the holes of a sparse file stay holes, and
    the bytes never pass through this process (where the system cannot, an ordinary copy)."""
    try:
        with open(source, "rb") as src, open(target, "wb") as dst:
            size = os.fstat(src.fileno()).st_size
            dst.truncate(size)
            position = 0
            while position < size:
                try:
                    start = os.lseek(src.fileno(), position, os.SEEK_DATA)
                except OSError:  # no data after position: the rest is a hole
                    break
                end = os.lseek(src.fileno(), start, os.SEEK_HOLE)
                offset = start
                while offset < end:
                    copied = os.copy_file_range(src.fileno(), dst.fileno(), end - offset, offset, offset)
                    if copied <= 0:
                        raise OSError("copy_file_range copied nothing")
                    offset += copied
                position = end
    except (OSError, AttributeError):  # no SEEK_DATA or copy_file_range here: the plain way
        shutil.copyfile(source, target)
