"""The models' digests for the cells' fingerprints, hashed once per file version: ``digests.json`` in the results
directory keeps each model's SHA-256 (hashed on up to ``HASHING_THREADS`` threads) with the file's identity when it was hashed (device, inode, size, mtime_ns
and ctime_ns), so a later sweep into the same directory hashes only the models whose file changed.

Any change to the file changes one of those (a rewrite in place its mtime and ctime, a new file its inode; a tool
that sets the mtime back, ``touch -d`` or ``cp -p``, still changes the ctime, which nothing can set). A file
modified in the last ``RACY_SECONDS`` before it was hashed, or while it was, is hashed again next time: on a file
system with coarse timestamps a second write within the same tick would leave them unchanged. An unreadable or
damaged cache counts as empty; it is never trusted for more than the identity it names.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cmpx.outputs import write_whole
from cmpx.sweep.capacity import cpus
from cmpx.sweep.matrix import model_digest

CACHE_FILE = "digests.json"
RACY_SECONDS = 2.0
HASHING_THREADS = 8  # at most; a shared file system may serve more, a local disk gains little beyond
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _hash(path: str) -> tuple[str, list[int] | None]:
    """The digest, and the file's identity if it may be cached (unchanged while read, not modified just now)."""
    now = time.time_ns()
    before = _identity(os.stat(path))
    digest = model_digest(path)
    settled = before == _identity(os.stat(path)) and min(now - before[3], now - before[4]) > RACY_SECONDS * 1e9
    return digest, before if settled else None


class DigestCache:
    """``digests(models)``: each model's SHA-256, from the cache in ``out`` where the file is unchanged; ``hashed``
    counts the files read in full. ``save()`` writes the cache back (only this sweep's models), if it changed."""

    def __init__(self, out: str):
        self.path = os.path.join(out, CACHE_FILE)
        self.entries = _read(self.path)
        self.hashed = 0
        self._changed = False

    def digests(self, models: Sequence[str]) -> dict[str, str]:
        found = {}
        kept: dict[str, dict[str, Any]] = {}
        todo = []
        for model in models:
            entry = self.entries.get(model)
            try:
                identity = _identity(os.stat(model))
            except OSError:
                identity = None  # hashing says why (the error the sweep gave before the cache)
            if entry is not None and identity is not None and entry["identity"] == identity:
                found[model] = entry["sha256"]
                kept[model] = entry
            else:
                todo.append(model)
        # hashlib lets go of the GIL while it hashes: one thread per CPU hashes that many files at once
        with ThreadPoolExecutor(max(1, min(len(todo), cpus(), HASHING_THREADS))) as pool:
            for model, (digest, settled) in zip(todo, pool.map(_hash, todo)):
                self.hashed += 1
                found[model] = digest
                if settled is not None:
                    kept[model] = {"identity": settled, "sha256": digest}
        self._changed = kept != self.entries
        self.entries = kept
        return found

    def save(self) -> None:
        if self._changed:
            write_whole("--out", self.path, json.dumps({"format": "cmpx-sweep-digests", "format_version": 1,
                                                        "models": self.entries}, indent=0) + "\n")
            self._changed = False


def _read(path: str) -> dict[str, dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
        models = document["models"] if document.get("format") == "cmpx-sweep-digests" else {}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return {}
    if not isinstance(models, dict):
        return {}
    return {path: entry for path, entry in models.items() if _valid(entry)}


def _valid(entry: Any) -> bool:
    return (isinstance(entry, dict) and isinstance(entry.get("sha256"), str) and _SHA256.fullmatch(entry["sha256"])
            is not None and isinstance(entry.get("identity"), list) and len(entry["identity"]) == 5
            and all(type(n) is int for n in entry["identity"]))
