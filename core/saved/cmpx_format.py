"""cmpx's own saved-run format: a directory of plain .npy files plus a JSON Lines manifest.

    RUN/cmpx-run.jsonl      line 1: {"format": "cmpx-run", "format_version": 1, "kind": "outputs"|"inputs",
                                     "cmpx_version": ..., "model": ..., "created": ...}
                            then one line per source and iteration:
                            {"source": "onnxrt", "iteration": 0, "input_digest": "blake2b:...",
                             "tensors": [{"name": "Y", "file": "0/0/0.npy", "dtype": "float32",
                                          "shape": [1, 4, 8, 8]}, ...],
                             "backend": {"label": "onnxrt 1.32.0", "framework_version": "1.32.0",
                                         "python": ..., "python_version": ..., "environment": ...}}
    RUN/<source #>/<iteration>/<tensor #>.npy

Lines are appended as iterations finish, so a run stops streaming to disk, never holding more than one
iteration, and an interrupted run leaves a readable prefix. Arrays are raw .npy (numpy.load reads them, memory-
mapped); types numpy lacks (bfloat16, float8, int4...) are stored as unsigned integers of the same width, and the
manifest's "dtype" names the real type. Nothing is pickled.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from cmpx import __version__
from cmpx.dtypes import is_extension, numpy_dtype
from cmpx.saved.model import SavedFile, SavedSource
from cmpx.saved.npy import SavedDataError, load_npy

MANIFEST = "cmpx-run.jsonl"
FORMAT = "cmpx-run"
FORMAT_VERSION = 1


class RunWriter:
    """Writes one saved run, tensor by tensor: ``tensor`` writes a file at once, ``finish_iteration`` records the
    iteration's tensors in the manifest."""

    def __init__(self, path: str, kind: str, model: str | None):
        if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
            raise SavedDataError(f"{path} already exists and is not an empty directory; choose a new path")
        os.makedirs(path, exist_ok=True)
        self.path = path
        self._sources: dict[str, int] = {}
        self._about: dict[str, dict[str, Any]] = {}
        self._pending: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._manifest = open(os.path.join(path, MANIFEST), "w", encoding="utf-8")
        self._line({"format": FORMAT, "format_version": FORMAT_VERSION, "kind": kind, "cmpx_version": __version__,
                    "model": model, "created": datetime.datetime.now(datetime.timezone.utc).isoformat()})

    def add(self, source: str, iteration: int, tensors: Mapping[str, np.ndarray], input_digest: str | None) -> None:
        """All of one source's tensors of one iteration at once."""
        for name, array in tensors.items():
            self.tensor(source, iteration, name, array)
        self.finish_iteration(iteration, input_digest)

    def tensor(self, source: str, iteration: int, name: str, array: np.ndarray) -> None:
        index = self._sources.setdefault(source, len(self._sources))
        entries = self._pending.setdefault((source, iteration), [])
        folder = os.path.join(str(index), str(iteration))
        if not entries:
            os.makedirs(os.path.join(self.path, folder), exist_ok=True)
        relative = os.path.join(folder, f"{len(entries)}.npy")
        stored = array.view(f"u{array.dtype.itemsize}") if is_extension(array.dtype) else array
        np.save(os.path.join(self.path, relative), stored, allow_pickle=False)
        entries.append({"name": name, "file": relative, "dtype": array.dtype.name, "shape": list(array.shape)})

    def describe(self, source: str, about: Mapping[str, Any]) -> None:
        """What made ``source``'s outputs (its framework's version, its Python), recorded with each of its lines."""
        self._about[source] = dict(about)

    def finish_iteration(self, iteration: int, input_digest: str | None) -> None:
        for (source, number), entries in list(self._pending.items()):
            if number == iteration:
                record = {"source": source, "iteration": iteration, "input_digest": input_digest, "tensors": entries}
                if source in self._about:
                    record["backend"] = self._about[source]
                self._line(record)
                del self._pending[(source, number)]

    def _line(self, record: dict[str, Any]) -> None:
        self._manifest.write(json.dumps(record) + "\n")
        self._manifest.flush()

    def close(self) -> None:
        self._manifest.close()


def is_cmpx_run(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MANIFEST))


def read_cmpx_run(path: str) -> SavedFile:
    """Open a saved run: the manifest is read and every file checked now; arrays load (mapped) on demand."""
    manifest = os.path.join(path, MANIFEST)
    try:
        with open(manifest, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SavedDataError(f"{manifest}: damaged manifest ({exc})") from None
    if not records or records[0].get("format") != FORMAT:
        raise SavedDataError(f"{manifest}: not a cmpx run manifest")
    header = records[0]
    if header.get("format_version") != FORMAT_VERSION:
        raise SavedDataError(f"{manifest}: format version {header.get('format_version')} is not supported by "
                             f"cmpx {__version__} (it reads version {FORMAT_VERSION})")
    sources: dict[str, SavedSource] = {}
    for number, record in enumerate(records[1:], start=2):
        try:
            source = sources.setdefault(record["source"], SavedSource(record["source"]))
            if record["iteration"] != len(source):
                raise SavedDataError(f"{manifest} line {number}: iteration {record['iteration']} of "
                                     f"{record['source']} is out of order")
            tensors = [(t["name"], os.path.join(path, t["file"]), numpy_dtype(t["dtype"]), tuple(t["shape"]))
                       for t in record["tensors"]]
        except (KeyError, TypeError, AttributeError) as exc:
            raise SavedDataError(f"{manifest} line {number}: damaged record ({exc!r})") from None
        for name, file, dtype, shape in tensors:
            _check_entry(file, dtype, shape, f"{path}: {record['source']} iteration {record['iteration']} {name}")
        source.loaders.append(lambda tensors=tensors: _load(tensors, path))
        source.digests.append(record.get("input_digest"))
        if isinstance(record.get("backend"), dict) and source.about is None:
            source.about = record["backend"]
    return SavedFile(path, header.get("kind", "outputs"), list(sources.values()))


def _check_entry(file: str, dtype: np.dtype, shape: tuple[int, ...], where: str) -> None:
    array = load_npy(file, where, mmap=True)
    stored = np.dtype(f"u{dtype.itemsize}") if is_extension(dtype) else dtype
    if array.dtype != stored or array.shape != shape:
        raise SavedDataError(f"{where}: the file holds {array.dtype} {list(array.shape)}, the manifest says "
                             f"{dtype} {list(shape)}")


def _load(tensors: list[tuple[str, str, np.dtype, tuple[int, ...]]], path: str) -> dict[str, np.ndarray]:
    loaded = {}
    for name, file, dtype, _ in tensors:
        array = load_npy(file, f"{path}: {name}", mmap=True)
        loaded[name] = array.view(dtype) if is_extension(dtype) else array
    return loaded
