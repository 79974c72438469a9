"""Where each key of a sweep file is written, so that an error can name its line: Python's TOML reader keeps no
positions. A light scan of the text that understands what sweep files use: top-level keys, ``[table]`` and
``[[array.of.tables]]`` headers, ``key = value`` lines. Keys it cannot place (inside inline tables, say) have no
line, and errors then name only the key."""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""")


class KeyLines:
    """``line(table, index, key)``: the 1-based line of ``key`` in ``table`` (``""`` for the top level) and, for an
    array of tables, its ``index``-th entry; ``line(table, index)`` the line of the table's header."""

    def __init__(self, text: str):
        self._lines: dict[tuple[str, int | None, str | None], int] = {}
        counts: dict[str, int] = {}
        table, index = "", None
        in_multiline = False
        for number, raw in enumerate(text.splitlines(), start=1):
            if in_multiline:  # inside a ''' or """ string: no keys here
                in_multiline = raw.count('"""') % 2 == 0 and raw.count("'''") % 2 == 0
                continue
            header = _HEADER.match(raw)
            if header and not _KEY.match(raw):
                table = header.group(2).strip()
                if header.group(1) == "[[":
                    index = counts.get(table, 0)
                    counts[table] = index + 1
                else:
                    index = None
                self._lines.setdefault((table, index, None), number)
                continue
            key = _KEY.match(raw)
            if key:
                self._lines.setdefault((table, index, key.group(1).strip("'\"")), number)
                in_multiline = raw.count('"""') % 2 == 1 or raw.count("'''") % 2 == 1

    def line(self, table: str, index: int | None = None, key: str | None = None) -> int | None:
        found = self._lines.get((table, index, key))
        if found is None and key is not None:
            return self._lines.get((table, index, None))  # the table's header, at least
        return found
