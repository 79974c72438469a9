"""Feeds from saved inputs (--load-inputs): cmpx runs, Polygraphy JSON, ONNX test-data directories."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cmpx.loaders.options import DataOptions
from cmpx.model.info import TensorSpec
from cmpx.saved.opening import open_saved


class SavedDataLoader:
    """Every iteration of every path, in order; --iterations N keeps the first N."""

    def __init__(self, options: DataOptions):
        self.options = options

    def feeds(self, inputs: Sequence[TensorSpec]) -> Iterator[Mapping[str, Any]]:
        names = [spec.name for spec in inputs]
        files = [open_saved(path, "inputs", names) for path in self.options.paths]  # all checked before any feed
        feeds = (source.load(i) for saved in files for source in saved.sources for i in range(len(source)))
        return itertools.islice(feeds, self.options.iterations)
