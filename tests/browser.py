"""Headless Chromium for the HTML report's tests: the DOM a real browser builds (after the page's own script ran),
and screenshots. Debian's ``chromium`` package; `.ci/run` installs it where it can."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


def _chromium(binary: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="cmpx-chromium-") as profile:
        done = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    return done


def dump_dom(binary: str, path, width: int | None = None) -> Dom:
    """The DOM of the page at ``path`` once loaded, as the browser serialises it; ``width``: of the window."""
    size = [f"--window-size={width},1000"] if width else []
    return Dom(_chromium(binary, *size, "--dump-dom", f"file://{path}").stdout)


def screenshot(binary: str, path, out, width: int, height: int) -> None:
    _chromium(binary, f"--window-size={width},{height}", f"--screenshot={out}", f"file://{path}")


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element | str] = []

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find_all(self, tag: str | None = None, class_: str | None = None, id_: str | None = None) -> list[Element]:
        found = []
        for child in self.children:
            if isinstance(child, Element):
                if ((tag is None or child.tag == tag) and (class_ is None or class_ in child.classes)
                        and (id_ is None or child.attrs.get("id") == id_)):
                    found.append(child)
                found += child.find_all(tag, class_, id_)
        return found

    def find(self, tag: str | None = None, class_: str | None = None, id_: str | None = None) -> Element:
        found = self.find_all(tag, class_, id_)
        assert found, f"no element {tag or ''}{'.' + class_ if class_ else ''}{'#' + id_ if id_ else ''}"
        return found[0]


class Dom(Element, HTMLParser):
    """The parsed serialised DOM: a tree of Elements (``html`` is the root's only child)."""

    def __init__(self, source: str):
        Element.__init__(self, "#document", {}, None)
        HTMLParser.__init__(self, convert_charrefs=True)
        self.source = source
        self._current: Element = self
        self.feed(source)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or "" for k, v in attrs}, self._current)
        self._current.children.append(element)
        if tag not in VOID:
            self._current = element

    def handle_startendtag(self, tag, attrs):
        self._current.children.append(Element(tag, {k: v or "" for k, v in attrs}, self._current))

    def handle_endtag(self, tag):
        node = self._current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self._current = node.parent

    def handle_data(self, data):
        self._current.children.append(data)
