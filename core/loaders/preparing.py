"""The feeds of a run as the planner prepares them: checked against the memory there is before they are made,
fitted to the model's inputs (exact names, --input-map), the first one made before any inference (a data source
that fails, or gives nothing, fails then), anything a loader's code raises made that loader's failure; and the
warning for tensors Polygraphy's JSON can only hold widened."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cmpx.errors import CmpxError, LimitReached, UsageError
from cmpx.loaders.feeds import fit_feeds
from cmpx.model.info import ModelInfo, TensorSpec
from cmpx.options.request import RunRequest

Feeds = Iterator[Mapping[str, Any]]


def warn_widened(request: RunRequest, model: ModelInfo, warn: Callable[[str], None]) -> None:
    """Polygraphy's JSON holds the types numpy knows: a bfloat16 or float8 tensor saved there is widened to
    float32 (exactly: every value is kept), which Polygraphy reads and cmpx reads back as the model's type."""
    from cmpx.dtypes import is_extension, numpy_dtype

    for option, path, specs in (("--save-inputs", request.save_inputs, model.inputs),
                                ("--save-outputs", request.save_outputs, model.outputs)):
        if not (path or "").lower().endswith(".json"):
            continue
        wide = [f"{spec.name} ({spec.dtype})" for spec in specs if spec.is_tensor and _known(spec.dtype)
                and is_extension(numpy_dtype(spec.dtype))]
        if wide:
            warn(f"{option} {path}: Polygraphy's JSON has no type for {', '.join(wide[:5])}: saved widened to "
                 "float32, every value exact (cmpx reads them back as the model's type; a directory keeps the type)")


def _known(dtype: str) -> bool:
    from cmpx.dtypes import numpy_dtype

    try:
        numpy_dtype(dtype)
    except (TypeError, ValueError, KeyError):
        return False
    return True


def check_input_sizes(inputs: Sequence[TensorSpec]) -> None:
    """The inputs cmpx is to make fit in the memory available (cgroup limits included), before any is made: an
    input too large for it is one line naming it and the sizes (it was a MemoryError, or the kernel's kill)."""
    from cmpx.dtypes import numpy_dtype
    from cmpx.memory import available_memory, size_text

    sizes = {}
    for spec in inputs:
        if spec.sizes is None:
            continue
        try:
            sizes[spec.name] = math.prod(spec.sizes) * numpy_dtype(spec.dtype).itemsize
        except TypeError:  # a dtype numpy cannot size: the loader says so
            continue
    available = available_memory()
    if not sizes or not available or sum(sizes.values()) <= available:
        return
    name = max(sizes, key=lambda n: sizes[n])
    spec = next(s for s in inputs if s.name == name)
    raise LimitReached(f"input {name} {list(spec.sizes or ())} {spec.dtype} needs {size_text(sizes[name])}"
                       + (f" (all inputs {size_text(sum(sizes.values()))})" if len(sizes) > 1 else "")
                       + f", more than the {size_text(available)} of memory available (cgroup limits included); "
                       "give smaller --input-shapes")


def input_map_of(words: Sequence[str], inputs: Sequence[TensorSpec]) -> dict[str, str]:
    """--input-map NAME=DATA words read against the model's inputs (a name may hold '=': the split whose left side
    is an input wins)."""
    names = [spec.name for spec in inputs]
    mapping = {}
    for word in words:
        splits = [(word[:i], word[i + 1:]) for i, c in enumerate(word) if c == "="]
        fitting = [split for split in splits if split[0] in names]
        if not fitting:
            raise UsageError(f"--input-map {word}: {splits[0][0] if splits else word!r} is not a model input; give "
                             f"NAME=DATA with NAME one of: {', '.join(names)}")
        mapping[fitting[0][0]] = fitting[0][1]
    return mapping


def fitted(feeds: Any, inputs: Sequence[TensorSpec], loader: str, warn: Callable[[str], None],
            input_map: Mapping[str, str] | None = None) -> Feeds:
    warned: set[str] = set()

    def warn_once(message: str) -> None:
        key = message.split(": input ", 1)[-1]
        if key not in warned:
            warned.add(key)
            warn(message)

    source = iter(feeds)
    for iteration in itertools.count():
        # No local names the feed while this generator is suspended: once the run has copied a feed into
        # shared memory, its arrays can be freed.
        try:
            yield fit_feeds(next(source), inputs, iteration, f"data loader {loader!r}", warn_once, input_map)
        except StopIteration:
            return


def peeked(feeds: Feeds, source: str) -> tuple[Mapping[str, Any], Feeds]:
    """The first feed of ``feeds``, made now (a data source that fails should fail before any inference), and the
    feeds, that one included; a source that gives none is bad input (nothing could be compared)."""
    feeds = _guarded(feeds, source)
    first = next(feeds, None)
    if first is None:
        raise UsageError(f"the data loader {source!r} gave no feed: nothing to run; check what it yields (or the "
                         "saved inputs it reads)")
    return first, _prepend([first], feeds)


def fed_shapes(inputs: Sequence[TensorSpec], feed: Mapping[str, Any]) -> list[TensorSpec]:
    """``inputs`` with the shapes ``feed`` gives where the model leaves a dimension open (saved or scripted data:
    what the slicing plan sizes the marked tensors from; a later feed of other shapes is sized as the first)."""
    def open_shape(spec: TensorSpec) -> bool:
        return spec.shape is None or not all(isinstance(d, int) for d in spec.shape)

    return [replace(spec, shape=tuple(int(d) for d in feed[spec.name].shape))
            if open_shape(spec) and hasattr(feed.get(spec.name), "shape") else spec for spec in inputs]


def _guarded(feeds: Feeds, source: str) -> Feeds:
    """``feeds``, with anything a data loader's code raises (SystemExit too) made that loader's failure (exit 2):
    a plugin's or script's code never ends cmpx with an exit code of its own."""
    while True:
        try:
            feed = next(feeds)
        except StopIteration:
            return
        except (KeyboardInterrupt, CmpxError):
            raise
        except BaseException as exc:  # noqa: BLE001 - user code
            raise UsageError(f"the data loader {source!r} raised {type(exc).__name__}: {exc}") from exc
        yield feed


def _prepend(holder: list[Mapping[str, Any]], rest: Feeds) -> Feeds:
    yield holder.pop()
    yield from rest
