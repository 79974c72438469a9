"""Installed distributions, read as the packaging specifications define them, without importing
importlib.metadata: that import alone costs ~17 ms, a tenth of a small run's coordinator (bench/README.md).

An installed project is a ``{name}-{version}.dist-info`` directory (or a legacy ``.egg-info`` one) in a sys.path
directory; its ``METADATA`` (``PKG-INFO``) starts with ``Name:`` and ``Version:`` headers, and its
``entry_points.txt`` is INI text: ``[group]`` lines, then ``name = module:attr [extras]`` lines. As with
importlib.metadata, the first distribution of a (normalized) name along sys.path wins.

Whatever this reader does not handle — a sys.path entry that is a zip file or an ``.egg``, a distribution finder
other than the standard path finder on sys.meta_path — makes it answer None, and callers then use
importlib.metadata. Specifications: https://packaging.python.org/en/latest/specifications/recording-installed-packages/
and .../entry-points/.
"""

from __future__ import annotations

import os
import pkgutil
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

_INFO_SUFFIXES = (".dist-info", ".egg-info")
_OBJECT_REFERENCE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?(\[.*\]\s*)?$")


@dataclass(frozen=True)
class Distribution:
    name: str  # as its metadata spells it
    version: str
    path: str  # its .dist-info / .egg-info directory


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str  # "module:attr [extras]"
    dist: Distribution

    def load(self) -> Any:
        match = _OBJECT_REFERENCE.match(self.value)
        if match is None:
            raise ValueError(f"entry point {self.name!r} of {self.dist.name}: {self.value!r} is not module:attr")
        return pkgutil.resolve_name(match["module"] + (f":{match['attr']}" if match["attr"] else ""))


def distributions(paths: Sequence[str] | None = None) -> list[Distribution] | None:
    """Every installed distribution along ``paths`` (default sys.path), the first of each name; None where this
    reader cannot tell (see the module docstring). Reads every METADATA: for a look at everything, not for the
    hot path (``entry_points`` and ``version`` read only what they need)."""
    folders = _info_folders(paths)
    return None if folders is None else [_distribution(folder) for folder in folders.values()]


def entry_points(group: str, paths: Sequence[str] | None = None) -> list[EntryPoint]:
    """Every entry point of ``group``, distribution by distribution, read from the files; where this reader cannot
    tell (module docstring), from importlib.metadata."""
    folders = _info_folders(paths)
    if folders is None:
        return _entry_points_from_importlib(group)
    found: list[EntryPoint] = []
    for folder in folders.values():
        pairs = list(_section(_read(os.path.join(folder, "entry_points.txt")) or "", group))
        if pairs:
            dist = _distribution(folder)
            found.extend(EntryPoint(name, value, dist) for name, value in pairs)
    return found


def _entry_points_from_importlib(group: str) -> list[EntryPoint]:
    from importlib import metadata

    described: dict[int, Distribution] = {}  # a distribution's METADATA is parsed once, not per entry point
    found = []
    for entry_point in metadata.entry_points(group=group):
        dist = getattr(entry_point, "dist", None)
        if dist is not None and id(dist) not in described:
            headers = dist.metadata
            described[id(dist)] = Distribution(headers["Name"] or "", headers["Version"] or "", "")
        found.append(EntryPoint(entry_point.name, entry_point.value,
                                described[id(dist)] if dist is not None else Distribution("", "", "")))
    return found


def version(names: Sequence[str], paths: Sequence[str] | None = None) -> str | None:
    """The version of the first of ``names`` that is installed, or None (a sys.path this reader cannot read is
    asked through importlib.metadata)."""
    folders = _info_folders(paths)
    if folders is None:
        from importlib import metadata

        for name in names:
            try:
                return metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
        return None
    folder = next((folders[_normalize(n)] for n in names if _normalize(n) in folders), None)
    return None if folder is None else _distribution(folder).version


def _info_folders(paths: Sequence[str] | None) -> dict[str, str] | None:
    """Normalized distribution name -> its .dist-info/.egg-info path, the first along ``paths``; None where this
    reader cannot tell."""
    if paths is None:
        if any(hasattr(finder, "find_distributions") and finder is not _standard_path_finder()
               for finder in sys.meta_path):
            return None
        paths = sys.path
    found: dict[str, str] = {}
    for entry in paths:
        root = entry or "."
        if not os.path.isdir(root):
            if os.path.exists(root):
                return None  # a zip file or another importer's path
            continue
        if root.lower().endswith(".egg"):
            return None
        for child in _children(root):
            low = child.lower()
            if low.endswith(_INFO_SUFFIXES):
                found.setdefault(_normalize(low.rpartition(".")[0].partition("-")[0]), os.path.join(root, child))
    return found


def _distribution(folder: str) -> Distribution:
    headers = _headers(folder) if os.path.isdir(folder) else {}
    return Distribution(headers.get("name", os.path.basename(folder).partition("-")[0]), headers.get("version", ""),
                        folder)


def _standard_path_finder() -> Any:
    import importlib.machinery

    return importlib.machinery.PathFinder


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _children(root: str) -> list[str]:
    try:
        return os.listdir(root)
    except OSError:
        return []


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _headers(folder: str) -> dict[str, str]:
    """Name and Version from METADATA (or PKG-INFO): the header block, up to the first empty line."""
    text = _read(os.path.join(folder, "METADATA")) or _read(os.path.join(folder, "PKG-INFO")) or ""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.lower() in ("name", "version") and key.lower() not in headers:
            headers[key.lower()] = value.strip()
    return headers


def _section(text: str, group: str) -> Iterator[tuple[str, str]]:
    """``name = value`` pairs of the ``[group]`` section of INI text (comments start with # or ;)."""
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        if current == group:
            name, sep, value = line.partition("=")
            if sep:
                yield name.strip(), value.strip()
