"""Making the next iteration's feed while the current one runs, without ever waiting for it when it is not
ready: a loader that is slow (a script reading files, a network) must not delay the comparison and the report of
an iteration whose outputs are already in."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

Feed = Mapping[str, Any]


class Prefetcher:
    """Pulls feeds from ``feeds`` one ahead, on a thread of its own (only that thread ever runs the loader's
    code), up to ``limit`` feeds (None: until the loader is exhausted). ``ready()`` says without waiting whether
    the next feed is made; ``take()`` waits for it and returns None at the end. An exception the loader raises
    is raised by the ``take()`` that would have returned its feed."""

    def __init__(self, feeds: Iterator[Feed], limit: int | None = None):
        self._feeds = feeds
        self._limit = limit
        self._ended = False  # the end (or an error) was taken: nothing more will come
        self._made = threading.Event()
        self._wanted = threading.Event()
        self._feed: Feed | None = None
        self._error: BaseException | None = None
        self._done = False
        self._thread = threading.Thread(target=self._run, name="cmpx-feeds", daemon=True)
        self._wanted.set()
        self._thread.start()

    def _run(self) -> None:
        made = 0
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._done or (self._limit is not None and made >= self._limit):
                self._feed = None
            else:
                try:
                    self._feed = next(self._feeds, None)
                except BaseException as exc:  # handed to the consumer, who decides
                    self._feed, self._error = None, exc
            made += 1
            end = self._feed is None
            self._made.set()
            if end:
                return

    def ready(self) -> bool:
        return self._ended or self._made.is_set()

    def take(self) -> Feed | None:
        if self._ended:
            return None
        self._made.wait()
        self._made.clear()
        feed, self._feed = self._feed, None
        if feed is None:
            self._ended = True
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        if feed is not None:
            self._wanted.set()  # start on the one after
        return feed

    def close(self) -> None:
        """No more feeds are wanted; a loader blocked inside its own code is left to finish on its own."""
        self._done = True
        self._wanted.set()
