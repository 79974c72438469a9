"""Every parser of a file or word a user hands cmpx, driven with hostile input: each reader takes bytes (or text)
and reads them as cmpx would, and ``outcome`` says whether it ended as it must: read, or refused with a usage error
(exit 2, one line). Anything else (an exception that is not cmpx's, an exit code other than 2) is a defect, and
so is a file opened outside the directory the input was put in. Used by tests/test_fuzz_readers.py (a bounded
number of examples each, in CI) and bench/fuzz_readers.py (10,000 each).

Seeds are valid files made here; hypothesis mutates them (flipped, cut, inserted bytes), which reaches far deeper
into a parser than random bytes do.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Reader:
    """One parser: ``seed()`` a valid input (bytes), ``read(data, directory)`` reads ``data`` as cmpx does, from
    files it writes under ``directory``."""

    name: str
    seed: Callable[[], bytes]
    read: Callable[[bytes, str], Any]


def outcome(reader: Reader, data: bytes, directory: str) -> str:
    """``"read"`` or ``"refused"`` (a usage error, exit 2); raises AssertionError for a defect: another exception,
    another exit code, or a file opened outside ``directory`` (and the interpreter's own)."""
    from cmpx.errors import CmpxError, ExitCode

    with _opened() as opened:
        try:
            reader.read(data, directory)
            result = "read"
        except CmpxError as exc:
            if exc.exit_code != ExitCode.USAGE:
                raise AssertionError(f"{reader.name}: exit {int(exc.exit_code)}: {exc}") from exc
            if "\n" in str(exc):
                raise AssertionError(f"{reader.name}: a message of more than one line: {exc!r}") from exc
            result = "refused"
    root = os.path.realpath(directory)
    outside = [path for path in opened if not _allowed(path, root)]
    if outside:
        raise AssertionError(f"{reader.name}: opened {outside[0]} outside {root}")
    return result


# -- where files may be opened -------------------------------------------------------------------------------------

_RECORDING: list[list[str]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _RECORDING and isinstance(args[0], (str, bytes, os.PathLike)):
        _RECORDING[-1].append(os.fsdecode(args[0]))


_HOOKED: list[bool] = []


@contextmanager
def _opened() -> Iterator[list[str]]:
    if not _HOOKED:  # an audit hook cannot be removed: one, installed once, records only inside this block
        sys.addaudithook(_audit)
        _HOOKED.append(True)
    _RECORDING.append([])
    try:
        yield _RECORDING[-1]
    finally:
        _RECORDING.pop()


def _allowed(path: str, root: str) -> bool:
    """Inside the input's directory, or the interpreter's own: its installation, sources, extensions, and the
    bytecode it caches on a module's first import (written as ``__pycache__/NAME.pyc.NUMBER``, then renamed)."""
    real = os.path.realpath(path)
    trusted = (root, sys.prefix, sys.base_prefix, "/proc/", "/dev/null", "/sys/fs/cgroup")
    return real == root or any(real.startswith(prefix.rstrip("/") + "/") or real == prefix for prefix in trusted) \
        or real.endswith((".py", ".pyc", ".so")) or "site-packages" in real \
        or os.path.basename(os.path.dirname(real)) == "__pycache__"


# -- seeds and readers ----------------------------------------------------------------------------------------------

def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _write(directory: str, name: str, data: bytes) -> str:
    path = os.path.join(directory, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _load_everything(path: str, kind: str, fallback: tuple[str, ...] = ()) -> None:
    from cmpx.saved.opening import open_saved

    saved = open_saved(path, kind, fallback)
    for source in saved.sources:
        for iteration in range(len(source)):
            for value in source.load(iteration).values():
                np.asarray(value).sum()


def _manifest_seed() -> bytes:
    header = {"format": "cmpx-run", "format_version": 1, "kind": "outputs", "cmpx_version": "0.1.0"}
    record = {"source": "onnxrt", "iteration": 0, "input_digest": None,
              "tensors": [{"name": "Y", "file": "0/0/0.npy", "dtype": "float32", "shape": [2, 3]}]}
    return "\n".join(json.dumps(line) for line in (header, record, {"complete": True, "iterations": 1})).encode()


def _read_manifest(data: bytes, directory: str) -> None:
    run = os.path.join(directory, "run")
    _write(run, "0/0/0.npy", _npy(np.arange(6, dtype=np.float32).reshape(2, 3)))
    _write(run, "cmpx-run.jsonl", data)
    _load_everything(run, "outputs")


def _read_npy(data: bytes, directory: str) -> None:
    from cmpx.saved.npy import load_npy

    np.asarray(load_npy(data, "fuzzed.npy")).sum()
    np.asarray(load_npy(_write(directory, "a.npy", data), "a.npy", mmap=True)).sum()


def _polygraphy_seed() -> bytes:
    import base64

    array = {"array": base64.b64encode(_npy(np.ones((2, 2), np.float32))).decode(), "polygraphy_class": "ndarray"}
    result = {"outputs": {"Y": {"values": array, "polygraphy_class": "LazyArray"}}, "runtime": 0.1,
              "runner_name": "onnxrt-runner", "polygraphy_class": "IterationResult"}
    return json.dumps({"lst": [["onnxrt-runner", [result]]], "polygraphy_class": "RunResults"}).encode()


def _read_polygraphy(data: bytes, directory: str) -> None:
    _load_everything(_write(directory, "outputs.json", data), "outputs")


def _tensor_proto_seed() -> bytes:
    from onnx import numpy_helper

    return numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "Y").SerializeToString()


def _read_test_data(data: bytes, directory: str) -> None:
    _write(os.path.join(directory, "case"), "test_data_set_0/output_0.pb", data)
    _load_everything(os.path.join(directory, "case"), "outputs", ("Y",))


def _model_seed() -> bytes:
    from cmpx.testing import models

    return models.conv_model().SerializeToString()


def _read_model(data: bytes, directory: str) -> None:
    from cmpx.model.info import read_model

    read_model(_write(directory, "model.onnx", data))


def _sweep_seed() -> bytes:
    return (b'models = ["*.onnx"]\n[defaults]\nargs = ["--iterations", "2"]\n[[runs]]\nname = "ref"\n'
            b'args = ["--backend", "onnxrt", "--backend", "onnxref"]\nresources = {CPU = 1}\n')


def _read_sweep(data: bytes, directory: str) -> None:
    from cmpx.sweep.sweepfile import read_sweep_file

    _write(directory, "m.onnx", _model_seed())
    read_sweep_file(_write(directory, "zoo.toml", data))


def _words_seed() -> bytes:
    return b"X:[1,3,224,224] y:[2,5] batch=4\x001e-3 out:1e-2\x00[-1,1] X:[0,255]\x00512MiB"


def _read_words(data: bytes, directory: str) -> None:
    from cmpx.options.argtypes import byte_size, parse_input_shapes, parse_per_output, parse_shape_words, parse_val_ranges, \
        tolerance

    parts = data.decode("utf-8", "replace").split("\x00")
    words = [part.split() for part in parts] + [[]] * 4
    parse_shape_words(words[0])
    parse_input_shapes([w for w in words[0] if "=" not in w])
    parse_per_output("--atol", words[1], 1e-5, tolerance)
    parse_val_ranges(words[2])
    for word in words[3]:
        byte_size("--memory-budget", word)


def _read_list(data: bytes, directory: str) -> None:
    from cmpx.model.marking import expand_words

    expand_words("--onnx-outputs", [f"@{_write(directory, 'names.txt', data)}", "conv0"])


def _list_seed() -> bytes:
    return b"# tensors to compare\nconv0_out\n  relu*  \n\nfinal\n"


READERS = (
    Reader("cmpx manifest", _manifest_seed, _read_manifest),
    Reader(".npy", lambda: _npy(np.arange(12, dtype=np.float16).reshape(3, 4)), _read_npy),
    Reader("Polygraphy JSON", _polygraphy_seed, _read_polygraphy),
    Reader("ONNX test data", _tensor_proto_seed, _read_test_data),
    Reader("protobuf wire (model)", _model_seed, _read_model),
    Reader("sweep TOML", _sweep_seed, _read_sweep),
    Reader("option words", _words_seed, _read_words),
    Reader("@file list", _list_seed, _read_list),
)


def mutations(seed: bytes) -> Any:
    """A hypothesis strategy of ``seed`` mutated: bytes flipped, runs cut out, bytes inserted, the end cut off, or
    wholly random bytes now and then."""
    from hypothesis import strategies as st

    def apply(edits: list[tuple[str, int, bytes]]) -> bytes:
        data = bytearray(seed)
        for kind, position, extra in edits:
            where = position % (len(data) + 1)
            if kind == "flip" and data:
                data[where % len(data)] ^= extra[0] if extra else 0xFF
            elif kind == "cut":
                del data[where:where + 1 + len(extra) * 4]
            elif kind == "insert":
                data[where:where] = extra
            elif kind == "truncate":
                del data[where:]
        return bytes(data)

    edit = st.tuples(st.sampled_from(["flip", "cut", "insert", "truncate"]), st.integers(0, 1 << 16),
                     st.binary(min_size=1, max_size=12))
    return st.one_of(st.lists(edit, min_size=1, max_size=6).map(apply), st.binary(max_size=256))
