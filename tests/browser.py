"""Headless Chromium for the HTML report's tests: the DOM a real browser builds (after the page's own script ran),
and screenshots, from one browser per test process (``headless_chromium`` in conftest.py). Debian's ``chromium``
package; `.ci/run` installs it where it can."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class Browser:
    """One headless Chromium for many pages, driven through the DevTools protocol on a pipe
    (``--remote-debugging-pipe``: JSON commands on its fd 3, answers and events on its fd 4, each message ending
    in a NUL byte). A page costs a tab, not a browser: a browser's start is ~0.85 s of CPU here."""

    def __init__(self, binary: str, timeout: float = 90):
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="cmpx-chromium-")
        commands, self._commands = os.pipe()
        self._answers, answers = os.pipe()
        commands, answers = (_above_4(fd) for fd in (commands, answers))  # never 3 or 4, which the shell sets
        self._log = tempfile.TemporaryFile()
        # the shell puts the pipes on the descriptors Chromium reads and writes (3 and 4), then becomes it
        self._process = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{commands} 4>&{answers} {commands}<&- {answers}>&-', "chromium", binary,
             "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-extensions", f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe",
             "about:blank"], pass_fds=(commands, answers), stdout=self._log, stderr=self._log)
        os.close(commands)
        os.close(answers)
        self._buffer = b""
        self._events: list[dict] = []
        self._last_id = 0

    def dom(self, path, width: int | None = None) -> str:
        """The serialised DOM of the page at ``path`` once loaded (after its scripts ran), as --dump-dom gives it."""
        expression = ("(document.doctype ? new XMLSerializer().serializeToString(document.doctype) + '\\n' : '')"
                      " + document.documentElement.outerHTML")
        with self._page(path, (width, 1000) if width else None) as session:
            found = self._send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        return found["result"]["value"]

    def screenshot(self, path, out, width: int, height: int) -> None:
        with self._page(path, (width, height)) as session:
            shot = self._send("Page.captureScreenshot", {"format": "png"}, session)
        Path(out).write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except AssertionError:
            pass
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._answers)
        self._log.close()
        self._profile.cleanup()

    @contextlib.contextmanager
    def _page(self, path, size: tuple[int, int] | None) -> Iterator[str]:
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        try:
            session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self._send("Page.enable", session=session)
            if size:
                self._send("Emulation.setDeviceMetricsOverride",
                           {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False}, session)
            self._send("Page.navigate", {"url": Path(path).absolute().as_uri()}, session)
            self._wait_for("Page.loadEventFired", session)
            yield session
        finally:
            self._send("Target.closeTarget", {"targetId": target})
            self._events.clear()

    def _send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._last_id += 1
        message: dict = {"id": self._last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._last_id:
                if "error" in answer:
                    raise AssertionError(f"chromium refused {method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def _wait_for(self, event: str, session: str) -> None:
        while not any(e.get("method") == event and e.get("sessionId") == session for e in self._events):
            self._events.append(self._read())

    def _read(self) -> dict:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._answers], [], [], left)[0]:
                raise AssertionError(f"chromium did not answer in {self.timeout} s")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                self._log.seek(0)
                raise AssertionError(f"chromium exited ({self._process.wait()}): {self._log.read()[-2000:]!r}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)


def _above_4(fd: int) -> int:
    """``fd`` moved to a descriptor number of 10 or more."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


def dump_dom(browser: Browser, path, width: int | None = None) -> Dom:
    """The DOM of the page at ``path`` once loaded, as the browser serialises it; ``width``: of the window."""
    return Dom(browser.dom(path, width))


def screenshot(browser: Browser, path, out, width: int, height: int) -> None:
    browser.screenshot(path, out, width, height)


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
