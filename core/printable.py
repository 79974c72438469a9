"""Names from models and files are data: what cmpx prints of them cannot steer the terminal or forge a line.

A tensor, output, node or backend name comes from a file someone else wrote. Printed raw, an escape sequence in it
can clear the screen, set the terminal's title or colour the text, and a newline can print a forged
``PASSED | ... | exit 0`` line. Every line cmpx writes for a person passes through ``printable``: control
characters (C0 but tab, DEL, C1), the Unicode line and paragraph separators and the bidirectional overrides
(which reorder what is shown, "Trojan source") are written as escapes (``\\x1b``, ``\\n``, ``\\u2028``), so the
name stays readable and unambiguous. ``xml_text`` does the same for what XML 1.0 cannot hold.
"""

from __future__ import annotations

import re
from typing import Any

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")
# XML 1.0 allows tab, newline, carriage return and U+0020 and above, but not the surrogates, U+FFFE and U+FFFF
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\u2028\u2029" + _BIDI + "]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char == "\n":
        return "\\n"
    if char == "\r":
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` as one line that a terminal shows as it is: control characters, line separators and bidi
    overrides written as escapes."""
    return _UNSAFE.sub(_escape, text)


def printable_lines(text: str) -> list[str]:
    """A block of text (a worker's stderr, a traceback) as lines, each ``printable``."""
    return [printable(line) for line in text.split("\n")]


def xml_text(text: str) -> str:
    """``text`` with what XML 1.0 cannot hold (and what a terminal viewing the report would obey) escaped."""
    return _NOT_XML.sub(_escape, text)


def xml_safe(element: Any) -> Any:
    """``element`` (an ElementTree element) with every text, tail and attribute value passed through
    ``xml_text``, in place; returned for chaining."""
    for node in element.iter():
        if node.text:
            node.text = xml_text(node.text)
        if node.tail:
            node.tail = xml_text(node.tail)
        for key, value in node.attrib.items():
            node.attrib[key] = xml_text(value)
    return element
