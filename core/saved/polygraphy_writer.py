"""Writing Polygraphy's JSON files (``--save-inputs X.json``, ``--save-outputs Y.json``), which ``polygraphy run
--load-inputs/--load-outputs`` reads: the inputs as a JSON list of ``{name: array}``, the outputs as a
``RunResults`` (``{"lst": [[runner, [IterationResult...]]...], "polygraphy_class": "RunResults"}``). Arrays are
``{"array": base64 of an .npy file saved without pickle, "polygraphy_class": "ndarray"}``, as Polygraphy writes them.
Types numpy lacks (bfloat16, float8...) are widened to float32, which Polygraphy can read.

Iterations are written as they come: the inputs straight into the file, each backend's outputs into a file of its
own, put together when the run ends; so memory does not grow with the iteration count. The file appears under its
name only once complete (a temporary file, renamed)."""

from __future__ import annotations

import base64
import functools
import io
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from typing import IO, Any

import numpy as np

from cmpx.dtypes import is_extension
from cmpx.errors import OutputFailed
from cmpx.outputs import AtomicFile


def encode_array(array: np.ndarray) -> dict[str, str]:
    if is_extension(array.dtype):
        array = array.astype(np.float32)
    buffer = io.BytesIO()
    contiguous = array if array.flags.c_contiguous else np.array(array, order="C")  # (ascontiguousarray makes 0-d 1-d)
    np.save(buffer, contiguous, allow_pickle=False)
    return {"array": base64.b64encode(buffer.getvalue()).decode("ascii"), "polygraphy_class": "ndarray"}


class PolygraphyWriter:
    """The writer interface of cmpx.saved.cmpx_format.RunWriter, for a Polygraphy JSON file."""

    def __init__(self, path: str, kind: str, model: str | None, option: str = "--save-outputs"):
        self.path = path
        self.kind = kind
        self.option = option
        self.iterations = 0
        self._target: AtomicFile | None = AtomicFile(option, path)
        self._pending: dict[tuple[str, int], dict[str, Any]] = {}
        self._runners: dict[str, Any] = {}  # runner -> (temporary file, iterations written)
        self._count = 0
        self._failed = False
        self._failing(lambda file: file.write("[\n" if kind == "inputs" else ""))

    def _failing(self, action: Callable[[IO], object]) -> None:
        """``action(file)``, a write of the JSON file or its spill files; a failed write fails the whole file."""
        target = self._target
        if target is None:
            raise ValueError(f"{self.path}: written after it was closed")
        try:
            with target.failing():
                action(target.file)
        except OutputFailed as exc:
            self._failed = True  # the file is gone: close() only cleans up
            raise OutputFailed(f"{exc}; a Polygraphy JSON file is written whole, so none of it is kept") from None

    def add(self, source: str, iteration: int, tensors: Mapping[str, np.ndarray], input_digest: str | None) -> None:
        self._pending.setdefault((source, iteration), {})  # an iteration of no tensors (a model without inputs): {}
        for name, array in tensors.items():
            self.tensor(source, iteration, name, array)
        self.finish_iteration(iteration, input_digest)

    def describe(self, source: str, about: Mapping[str, Any]) -> None:
        """(Polygraphy's files have no place to say which framework made a run.)"""

    def tensor(self, source: str, iteration: int, name: str, array: np.ndarray) -> None:
        self._pending.setdefault((source, iteration), {})[name] = encode_array(array)

    def finish_iteration(self, iteration: int, input_digest: str | None, seconds: Mapping[str, float] | None = None
                         ) -> None:
        for (source, number), arrays in list(self._pending.items()):
            if number != iteration:
                continue
            del self._pending[(source, number)]
            if self.kind == "inputs":
                text = (",\n" if self._count else "") + json.dumps(arrays, indent=4)
                self._failing(functools.partial(_write, text))
                self._count += 1
            else:
                self._runner_iteration(source, arrays, (seconds or {}).get(source))
        self.iterations = iteration + 1

    def _runner_iteration(self, runner: str, arrays: dict[str, Any], seconds: float | None) -> None:
        if runner not in self._runners:
            fd, spill = tempfile.mkstemp(prefix=".cmpx-polygraphy-", suffix=".json",
                                         dir=os.path.dirname(os.path.abspath(self.path)))
            self._runners[runner] = [os.fdopen(fd, "w", encoding="utf-8"), spill, 0]
        entry = self._runners[runner]
        record = {"outputs": {name: {"values": value, "polygraphy_class": "LazyArray"} for name, value in arrays.items()},
                  "runtime": seconds, "runner_name": runner, "polygraphy_class": "IterationResult"}
        self._failing(lambda _: entry[0].write(("," if entry[2] else "") + json.dumps(record)))
        entry[2] += 1

    def close(self, complete: bool = True) -> None:
        """Finish the file (a run interrupted or stopped by an error is still written, with what it has)."""
        if self._target is None:
            return
        target, self._target = self._target, None
        try:
            if self._failed:  # a write failed (a full disk): what it said stands, nothing is left behind
                return
            if self.kind == "inputs":
                with target.failing():
                    target.file.write("\n]\n")
            else:
                with target.failing():
                    target.file.write('{"lst": [')
                    for index, (runner, (spill, name, _)) in enumerate(self._runners.items()):
                        spill.close()
                        target.file.write(("," if index else "") + f"[{json.dumps(runner)}, [")
                        with open(name, encoding="utf-8") as f:
                            while chunk := f.read(1 << 20):
                                target.file.write(chunk)
                        target.file.write("]]")
                    target.file.write('], "polygraphy_class": "RunResults"}\n')
            target.commit()
        finally:
            target.abandon()
            for spill, name, _ in self._runners.values():
                try:
                    spill.close()  # (its buffered tail may not fit a full disk: it is removed anyway)
                except OSError:
                    pass
                try:
                    os.unlink(name)
                except OSError:
                    pass


def run_writer(path: str, kind: str, model: str | None, option: str) -> Any:
    """The writer for ``path``: Polygraphy's JSON for a path ending in .json, else a cmpx run directory."""
    if path.lower().endswith(".json"):
        return PolygraphyWriter(path, kind, model, option)
    from cmpx.saved.cmpx_format import RunWriter

    return RunWriter(path, kind, model, option)


def _write(text: str, file: IO) -> None:
    file.write(text)
