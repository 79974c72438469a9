"""Reading Polygraphy's JSON files: saved inputs (a list of feed dicts) and RunResults outputs.

Arrays in them are base64-encoded .npy (older files: latin-1 text or .npz); they are decoded with pickle
disabled, one iteration at a time. The JSON text itself must be read whole (that is how the format is made).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
from typing import Any

from cmpx.saved.model import SavedFile, SavedSource
from cmpx.saved.npy import SavedDataError, load_npy
from cmpx.userfiles import open_regular

NPY_MAGIC = b"\x93NUMPY"


def looks_like_polygraphy(path: str) -> bool:
    """A JSON document (Polygraphy's files are JSON; anything else JSON-like is reported by the parser)."""
    with open_regular(path, "saved file") as f:
        start = f.read(64).lstrip()
    return start[:1] in (b"[", b"{")


def read_polygraphy(path: str) -> SavedFile:
    """Read and check the whole file now (every array's header against its data), so that a damaged file is an
    error before any backend runs; the arrays are decoded again, one iteration at a time, when used."""
    kind, sources = _sources(_document(path), path)
    saved = SavedFile(path, kind, sources)
    for source in saved.sources:  # every array decoded once now: a damaged one is found before any backend runs
        for iteration in range(len(source)):
            source.load(iteration)
    return saved


def polygraphy_files(path: str) -> list[str]:
    """The JSON files of a Polygraphy per-iteration directory, in Polygraphy's (lexical) order."""
    try:
        names = sorted(name for name in os.listdir(path) if name.endswith(".json"))
    except OSError:
        return []
    return [os.path.join(path, name) for name in names if os.path.isfile(os.path.join(path, name))]


def read_polygraphy_directory(path: str) -> SavedFile:
    """A directory written by ``polygraphy run --save-inputs DIR`` / ``--save-outputs DIR`` (0.53): one JSON file per
    iteration (a feed dict, or a one-iteration RunResults; a file may hold several), read in lexical order, as
    Polygraphy reads them. Each file is read and checked now, then dropped: an iteration is read again, from its
    file alone, when it is used, so memory holds one file at a time."""
    kind: str | None = None
    merged: dict[str, SavedSource] = {}
    files = polygraphy_files(path)
    _check_numbering(path, [os.path.basename(file) for file in files])
    for file in files:
        file_kind, sources = _sources(_document(file), file)
        if kind not in (None, file_kind):
            raise SavedDataError(f"{file}: holds saved {file_kind} while {path} holds {kind}; one directory holds one "
                                 "kind")
        kind = file_kind
        for source in sources:
            target = merged.setdefault(source.name, SavedSource(source.name))
            for index in range(len(source)):
                source.load(index)  # checked now; loaded again later from the file alone
                target.loaders.append(functools.partial(_reload, file, source.name, index))
                target.digests.append(None)
    if kind is None:
        raise SavedDataError(f"{path}: a directory without .json files")
    return SavedFile(path, kind, list(merged.values()))


def _check_numbering(path: str, names: list[str]) -> None:
    """Polygraphy numbers its files 0000000000.json, 0000000001.json, ...: a missing one would pair every later
    iteration with the wrong inputs or outputs, so a gap is an error."""
    numbers = [int(name[:-5]) for name in names if len(name) == 15 and name[:-5].isdigit()]
    if len(numbers) != len(names):
        return  # not numbered the way Polygraphy numbers them: read in lexical order
    missing = sorted(set(range(len(numbers) and max(numbers) + 1)) - set(numbers))
    if missing:
        shown = ", ".join(f"{number:010d}.json" for number in missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise SavedDataError(f"{path}: iteration file(s) {shown} missing; the later files would be paired with the "
                             "wrong iterations. Restore them, or copy the files you want into a directory of their "
                             "own, numbered from 0000000000.json")


def _reload(file: str, name: str, index: int) -> Any:
    _, sources = _sources(_document(file), file)
    return next(source for source in sources if source.name == name).load(index)


def _document(path: str) -> Any:
    try:
        with open_regular(path, "saved file", "r", encoding="utf-8") as f:
            return json.load(f)
    except RecursionError:
        raise SavedDataError(f"{path}: not readable as Polygraphy JSON (nested too deeply)") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError, and integers too long to convert
        reason = f"{type(exc).__name__} at {exc.pos}" if isinstance(exc, json.JSONDecodeError) else \
            "a number it cannot represent"
        raise SavedDataError(f"{path}: not readable as Polygraphy JSON ({reason}); is the file complete?") from None


def _sources(document: Any, path: str) -> tuple[str, list[SavedSource]]:
    """("inputs" or "outputs", the sources) of one Polygraphy document."""
    if isinstance(document, list):
        return "inputs", [_inputs(document, path)]
    if isinstance(document, dict) and document.get("polygraphy_class") == "RunResults":
        return "outputs", _run_results(document, path)
    if isinstance(document, dict) and document and all(isinstance(v, dict) and "array" in v
                                                        for v in document.values()):
        return "inputs", [_inputs([document], path)]  # one feed dict: Polygraphy reads it as one iteration
    raise SavedDataError(f"{path}: a JSON file, but neither Polygraphy inputs (a list of feed dicts) nor "
                         "RunResults outputs")


def _inputs(document: list[Any], path: str) -> SavedSource:
    source = SavedSource("inputs")
    for iteration, feed in enumerate(document):
        if not isinstance(feed, dict):
            raise SavedDataError(f"{path}: iteration {iteration} is not a dict of input name -> array")
        source.loaders.append(functools.partial(_arrays, feed, f"{path}: iteration {iteration}"))
        source.digests.append(None)
    return source


def _run_results(document: dict[str, Any], path: str) -> list[SavedSource]:
    sources = []
    try:
        for runner_name, iterations in document["lst"]:
            source = SavedSource(str(runner_name))
            for index, iteration in enumerate(iterations):
                outputs = {name: lazy["values"] if isinstance(lazy, dict) and "values" in lazy else lazy
                           for name, lazy in iteration["outputs"].items()}
                where = f"{path}: {runner_name} iteration {index}"
                source.loaders.append(functools.partial(_arrays, outputs, where))
                source.digests.append(None)
            sources.append(source)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SavedDataError(f"{path}: damaged Polygraphy RunResults ({type(exc).__name__})") from None
    return sources


def _arrays(encoded: dict[str, Any], where: str) -> dict[str, Any]:
    return {name: _array(value, f"{where} {name}") for name, value in encoded.items()}


def _array(value: Any, where: str) -> Any:
    if not isinstance(value, dict) or "array" not in value:
        raise SavedDataError(f"{where}: not an encoded array")
    text = value["array"]
    if not isinstance(text, str):
        raise SavedDataError(f"{where}: the encoded array is not a string")
    try:
        data = base64.b64decode(text.encode("ascii", "replace"), validate=True)
    except (binascii.Error, ValueError) as exc:
        try:
            data = text.encode("latin-1")  # Polygraphy's older encoding: the .npy bytes as latin-1 text
        except UnicodeEncodeError:
            data = b""
        if not data.startswith(NPY_MAGIC):
            raise SavedDataError(f"{where}: the array's base64 text is damaged ({exc}); save the file again") from None
    return load_npy(data, where)
