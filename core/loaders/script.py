"""Feeds from a user's Python script (--data-loader-script file.py[:func], func defaulting to load_data).

The function is called once and must return an iterable (typically a generator) of {input name: array}
dicts. Running the script is the point (as in Polygraphy); nothing is ever unpickled.
"""

from __future__ import annotations

import importlib.machinery
import itertools
import os
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cmpx.errors import UsageError
from cmpx.userfiles import check_regular
from cmpx.loaders.options import DataOptions
from cmpx.model.info import TensorSpec

DEFAULT_FUNCTION = "load_data"


def split_script(text: str) -> tuple[str, str]:
    """``file.py[:func]`` -> (file, func); the split is on the last ':' after '.py'."""
    path, sep, function = text.rpartition(":")
    if not sep or not path.endswith(".py"):
        return text, DEFAULT_FUNCTION
    return path, function or DEFAULT_FUNCTION


class ScriptDataLoader:
    def __init__(self, options: DataOptions):
        self.path, self.function = split_script(options.script or "")
        self.options = options

    def feeds(self, inputs: Sequence[TensorSpec]) -> Iterator[Any]:
        function = self._function()
        try:
            produced = function()
            iterator = iter(produced)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # user code: anything it raises (SystemExit(0) too) is this loader's failure
            raise UsageError(f"--data-loader-script {self.path}: {self.function}() raised "
                             f"{type(exc).__name__}: {exc}") from exc
        return itertools.islice(self._guarded(iterator), self.options.iterations)

    def _function(self):
        check_regular(self.path, "--data-loader-script")
        name = f"cmpx_data_script_{abs(hash(self.path))}"
        loader = importlib.machinery.SourceFileLoader(name, self.path)  # Python source, whatever the file's suffix
        module = types.ModuleType(name)
        module.__file__ = self.path
        sys.path.insert(0, os.path.dirname(os.path.abspath(self.path)))
        try:
            loader.exec_module(module)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - a script calling sys.exit() at import is its own failure
            raise UsageError(f"--data-loader-script {self.path}: importing it raised {type(exc).__name__}: {exc}") \
                from exc
        finally:
            sys.path.pop(0)
        function = getattr(module, self.function, None)
        if not callable(function):
            raise UsageError(f"--data-loader-script {self.path}: no function {self.function!r}; define it or "
                             f"name another with {self.path}:FUNCTION")
        return function

    def _guarded(self, iterator: Iterator[Any]) -> Iterator[Any]:
        while True:
            try:
                feed = next(iterator)
            except StopIteration:
                return
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - as above
                raise UsageError(f"--data-loader-script {self.path}: {self.function}() raised "
                                 f"{type(exc).__name__}: {exc}") from exc
            yield _owned(feed)


def _owned(feed: Any) -> Any:
    """``feed`` with copies of its arrays, taken before the script runs on. cmpx makes the next feed while the
    current one is fed, saved and compared (cmpx.loaders.prefetch); a script that fills the same buffer again for
    each feed, which Polygraphy allows (it uses each feed before asking for the next), would change the feed in
    use: other data fed than saved, outputs saved beside the wrong inputs."""
    if not isinstance(feed, Mapping):
        return feed  # not a feed: cmpx.loaders.feeds says why
    import numpy as np

    return {name: value.copy() if isinstance(value, np.ndarray) else value for name, value in feed.items()}
