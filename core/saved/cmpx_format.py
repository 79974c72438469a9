"""cmpx's own saved-run format: a directory of plain .npy files plus a JSON Lines manifest.

    RUN/cmpx-run.jsonl      line 1: {"format": "cmpx-run", "format_version": 1, "kind": "outputs"|"inputs",
                                     "cmpx_version": ..., "model": ..., "created": ...}
                            then one line per source and iteration:
                            {"source": "onnxrt", "iteration": 0, "input_digest": "blake2b:...",
                             "tensors": [{"name": "Y", "file": "0/0/0.npy", "dtype": "float32",
                                          "shape": [1, 4, 8, 8]}, ...],
                             "backend": {"label": "onnxrt 1.32.0", "framework_version": "1.32.0",
                                         "python": ..., "python_version": ..., "environment": ...}}
                            and a last line {"complete": true, "iterations": N} once the run finished
    RUN/<source #>/<iteration>/<tensor #>.npy

An output that is a sequence, map or optional is stored as the 1-D array of its values, and its entry carries
its "structure" (cmpx.structured): {"name": "probabilities", ..., "structure": ["seq*", 4, ["map*", [0, 1, 2],
["t", []]]]}; reading it back gives the same structured value.

Lines are appended as iterations finish, so a run stops streaming to disk, never holding more than one
iteration, and an interrupted run leaves a readable prefix. Arrays are raw .npy (numpy.load reads them, memory-
mapped); types numpy lacks (bfloat16, float8, int4...) are stored as unsigned integers of the same width, and the
manifest's "dtype" names the real type. Nothing is pickled.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

import numpy as np

from cmpx._version import __version__
from cmpx.dtypes import is_extension, numpy_dtype
from cmpx.errors import OutputFailed
from cmpx.saved.model import SavedFile, SavedSource
from cmpx.saved.npy import SavedDataError, load_npy, npy_header
from cmpx.userfiles import inside, open_regular

MANIFEST = "cmpx-run.jsonl"
FORMAT = "cmpx-run"
FORMAT_VERSION = 1


class RunWriter:
    """Writes one saved run, tensor by tensor: ``tensor`` writes a file at once, ``finish_iteration`` records the
    iteration's tensors in the manifest; ``close`` marks the run complete. A disk that fills up or turns read-only
    stops the writer with an OutputFailed naming what was kept: the manifest only ever lists files written
    whole, so every iteration it lists reads back."""

    def __init__(self, path: str, kind: str, model: str | None, option: str = "--save-outputs"):
        if os.path.exists(path) and (not os.path.isdir(path) or os.listdir(path)):
            raise SavedDataError(f"{path} already exists and is not an empty directory; choose a new path")
        self.path = path
        self.option = option
        self.iterations = 0
        self._sources: dict[str, int] = {}
        self._about: dict[str, dict[str, Any]] = {}
        self._pending: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._manifest: IO[str] | None = None
        with self._writing():
            os.makedirs(path, exist_ok=True)
            self._manifest = open(os.path.join(path, MANIFEST), "w", encoding="utf-8")
            self._line({"format": FORMAT, "format_version": FORMAT_VERSION, "kind": kind,
                        "cmpx_version": __version__, "model": model,
                        "created": datetime.datetime.now(datetime.timezone.utc).isoformat()})

    @contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            kept = (f"the first {self.iterations} iteration(s) are kept in {self.path} and read back"
                    if self.iterations else f"nothing usable was written to {self.path}")
            raise OutputFailed(f"{self.option} {self.path}: {exc.strerror or exc}; {kept}") from None

    def add(self, source: str, iteration: int, tensors: Mapping[str, np.ndarray], input_digest: str | None) -> None:
        """All of one source's tensors of one iteration at once (none: a model without inputs still has an
        iteration to record)."""
        self._sources.setdefault(source, len(self._sources))
        self._pending.setdefault((source, iteration), [])
        for name, array in tensors.items():
            self.tensor(source, iteration, name, array)
        self.finish_iteration(iteration, input_digest)

    def tensor(self, source: str, iteration: int, name: str, array: Any) -> None:
        """One tensor (a numpy array), or a cmpx.structured.Structured (its values, and its structure recorded)."""
        structure = getattr(array, "skeleton", None)
        if structure is not None:
            array = array.values
        index = self._sources.setdefault(source, len(self._sources))
        entries = self._pending.setdefault((source, iteration), [])
        folder = os.path.join(str(index), str(iteration))
        relative = os.path.join(folder, f"{len(entries)}.npy")
        stored = array.view(f"u{array.dtype.itemsize}") if is_extension(array.dtype) else array
        target = os.path.join(self.path, relative)
        with self._writing():
            if not entries:
                os.makedirs(os.path.join(self.path, folder), exist_ok=True)
            try:
                with open(target, "wb") as f:
                    np.save(f, stored, allow_pickle=False)
            except OSError:
                _remove(target)
                raise
        entries.append({"name": name, "file": relative, "dtype": array.dtype.name, "shape": list(array.shape)})
        if structure is not None:
            entries[-1]["structure"] = structure

    def describe(self, source: str, about: Mapping[str, Any]) -> None:
        """What made ``source``'s outputs (its framework's version, its Python), recorded with each of its lines."""
        self._about[source] = dict(about)

    def finish_iteration(self, iteration: int, input_digest: str | None) -> None:
        with self._writing():
            for (source, number), entries in list(self._pending.items()):
                if number == iteration:
                    record = {"source": source, "iteration": iteration, "input_digest": input_digest,
                              "tensors": entries}
                    if source in self._about:
                        record["backend"] = self._about[source]
                    self._line(record)
                    del self._pending[(source, number)]
        self.iterations = iteration + 1

    def _line(self, record: dict[str, Any]) -> None:
        if self._manifest is None:
            raise ValueError(f"{self.path}: written after it was closed")
        self._manifest.write(json.dumps(record) + "\n")
        self._manifest.flush()

    def close(self, complete: bool = True) -> None:
        """Mark the run complete (unless it was interrupted) and close the manifest."""
        if self._manifest is None:
            return
        manifest, self._manifest = self._manifest, None
        try:
            if complete:
                self._manifest = manifest
                self._line({"complete": True, "iterations": self.iterations})
        except OSError:
            pass  # the run reads back as incomplete; the error that stopped it is being reported
        finally:
            self._manifest = None
            try:
                manifest.close()
            except OSError:
                pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def is_cmpx_run(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MANIFEST))


def read_cmpx_run(path: str) -> SavedFile:
    """Open a saved run: the manifest is read and every file's header checked now (each must be a regular file
    inside the run directory); arrays load (mapped) one at a time, on demand."""
    manifest = os.path.join(path, MANIFEST)
    inside(path, MANIFEST, path)  # a manifest that is a link leading out of the run directory is refused too
    try:
        with open_regular(manifest, "saved run manifest", "r", encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SavedDataError(f"{manifest}: damaged manifest ({type(exc).__name__}); is the file complete?") from None
    if not records or not isinstance(records[0], dict) or records[0].get("format") != FORMAT:
        raise SavedDataError(f"{manifest}: not a cmpx run manifest")
    header = records[0]
    if header.get("format_version") != FORMAT_VERSION:
        raise SavedDataError(f"{manifest}: format version {header.get('format_version')!r} is not supported by "
                             f"cmpx {__version__} (it reads version {FORMAT_VERSION})")
    sources: dict[str, SavedSource] = {}
    complete = False
    for number, record in enumerate(records[1:], start=2):
        if isinstance(record, dict) and record.get("complete") is True:
            complete = True
            continue
        where = f"{manifest} line {number}"
        try:
            source = sources.setdefault(str(record["source"]), SavedSource(str(record["source"])))
            if record["iteration"] != len(source):
                raise SavedDataError(f"{where}: iteration {record['iteration']!r} of {record['source']} is out of "
                                     "order")
            tensors = [(str(t["name"]), inside(path, t["file"], where), numpy_dtype(t["dtype"]),
                        _shape(t["shape"], where), _structure(t, where)) for t in record["tensors"]]
        except (KeyError, TypeError, AttributeError) as exc:
            raise SavedDataError(f"{where}: damaged record ({type(exc).__name__}: {exc})") from None
        for name, file, dtype, shape, _ in tensors:
            _check_entry(file, dtype, shape, f"{path}: {record['source']} iteration {record['iteration']} {name}")
        source.loaders.append(functools.partial(
            LazyTensors, {name: (file, dtype, structure) for name, file, dtype, _, structure in tensors}, path))
        source.digests.append(record.get("input_digest"))
        if isinstance(record.get("backend"), dict) and source.about is None:
            source.about = record["backend"]
    return SavedFile(path, header.get("kind", "outputs"), list(sources.values()), complete=complete)


def _structure(entry: Mapping[str, Any], where: str) -> list[Any] | None:
    """A saved sequence's, map's or optional's structure, checked against the values it says it holds."""
    structure = entry.get("structure")
    if structure is None:
        return None
    from cmpx.structured import StructureError, check_skeleton

    shape = _shape(entry["shape"], where)
    try:
        if len(shape) != 1:
            raise StructureError(f"its values are stored as {list(shape)}, not as a 1-D array")
        check_skeleton(structure, shape[0])
    except StructureError as exc:
        raise SavedDataError(f"{where}: {entry['name']}: {exc}") from None
    return structure


def _shape(value: object, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(d, int) and d >= 0 for d in value):
        raise SavedDataError(f"{where}: shape {value!r} is not a list of sizes")
    return tuple(value)


def _check_entry(file: str, dtype: np.dtype, shape: tuple[int, ...], where: str) -> None:
    stored_shape, stored_dtype = npy_header(file, where)
    stored = np.dtype(f"u{dtype.itemsize}") if is_extension(dtype) else dtype
    if stored_dtype != stored or stored_shape != shape:
        raise SavedDataError(f"{where}: the file holds {stored_dtype} {list(stored_shape)}, the manifest says "
                             f"{dtype} {list(shape)}")


class LazyTensors(Mapping):
    """One iteration's tensors, each memory-mapped only when asked for (a mark-all run may hold thousands: they
    are never all open at once)."""

    def __init__(self, files: dict[str, tuple[str, np.dtype, list[Any] | None]], path: str):
        self._files = files
        self._path = path

    def __getitem__(self, name: str) -> Any:
        file, dtype, structure = self._files[name]
        array = load_npy(file, f"{self._path}: {name}", mmap=True)
        array = array.view(dtype) if is_extension(dtype) else array
        if structure is not None:
            from cmpx.structured import Structured

            return Structured(structure, array)
        return array

    def __contains__(self, name: object) -> bool:  # without mapping the file, as Mapping's default would
        return name in self._files

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)
