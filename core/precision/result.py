"""What ``cmpx precision`` found, written and checked: the node list (what ``--keep-fp32 @FILE`` or
``--no-quantize @FILE`` reads), the transformed model beside it, and an independent run of the user's own run with
that list, whose report is the final verdict with its statistics."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cmpx.errors import ExitCode, UsageError
from cmpx.precision.macs import fed_index, mac_share, mac_words
from cmpx.precision.nodes import kept_option, weight_share, write_node_list
from cmpx.precision.search import candidate_bound

if TYPE_CHECKING:
    from cmpx.precision.request import Pair, PrecisionOptions
    from cmpx.precision.nodes import Eligible
    from cmpx.reduce.observe import Observer


@dataclass
class Outcome:
    """The search as it goes: candidates run, the smallest set seen passing."""

    index: Any  # cmpx.model.subgraph.GraphIndex of the model
    eligible: Eligible
    pair: Pair
    started: float
    count: int = 0
    best: list[str] | None = None
    finished: bool = True  # False: --max-candidates stopped it
    all_passed: bool = False  # every eligible node kept was seen passing (before any candidate)
    bound: Callable[[int, int], int] = candidate_bound  # the most candidates for N nodes with k kept
    fed: dict[str, tuple[int, ...]] = field(default_factory=dict)  # each input's shape as the runs feed it

    def header(self, note: str) -> list[str]:
        option = "--" + kept_option(self.pair.kind).replace("_", "-")
        what = "keep in float32" if option == "--keep-fp32" else "leave unquantized"
        return [f"cmpx precision: the nodes to {what} for {self.pair.backend} ({self.pair.kind}) to pass against "
                f"{self.pair.reference}; {note}", f"use: cmpx run MODEL ... {option} @THIS_FILE"]

    def interrupted(self, path: str, echo: Callable[[str], None]) -> None:
        """Ctrl-C: the smallest set seen passing is written, said to be unfinished."""
        best = self.best if self.best is not None else self.eligible.names if self.all_passed else None
        if best is None:
            echo(f"interrupted after {self.count} candidate(s): none passed yet, nothing written")
            return
        write_node_list(path, best, self.header(f"interrupted after {self.count} candidate(s): the smallest "
                                                "set seen passing, not searched to the end"))
        echo(f"interrupted after {self.count} candidate(s): wrote the smallest set seen passing ({len(best)} "
             f"node(s), not searched to the end) to {path}")


def transformed_path(output: str, kind: str) -> str:
    """Where the transformed model goes: beside the node list, ``kept.txt`` -> ``kept.fp16.onnx``."""
    return f"{os.path.splitext(output)[0]}.{kind}.onnx"


def finish(options: PrecisionOptions, outcome: Outcome, kept: Sequence[str], observer: Observer,
           echo: Callable[[str], None]) -> ExitCode:
    """Write ``kept``, run the user's run with it as a user would (the run's report shown), write the transformed
    model, and say how much stays in float32; exit 0 when that run passes, 1 when it does not."""
    from cmpx.options.words import command_line, request_words

    pair, path = outcome.pair, options.output
    position = {node.name: number for number, node in enumerate(outcome.index.nodes)}
    kept = sorted(kept, key=lambda name: position.get(name, len(position)))  # in graph order
    total = len(outcome.eligible.names)
    note = f"{len(kept)} of {total} node(s) that the transform changes, found in {outcome.count} candidate(s)"
    write_node_list(path, kept, outcome.header(note))
    option = kept_option(pair.kind)
    words: dict[str, Any] = {option: (*pair.given, f"@{path}")}
    check = replace(options.request, **words)
    echo(f"wrote {path}: {len(kept)} node(s)" + (f": {', '.join(kept)}" if kept else ""))
    echo(f"check: cmpx run {command_line(request_words(check, None, pair.specs))}")
    model = transformed_path(path, pair.kind)
    with tempfile.TemporaryDirectory(prefix="cmpx-precision-") as scratch:
        observer.label("checking the list", outcome.started)
        seen = observer(replace(check, save_transformed=scratch), echo)
        made = os.path.join(scratch, f"{os.path.splitext(os.path.basename(str(options.request.model)))[0]}."
                                     f"{pair.kind}.onnx")
        if os.path.isfile(made):
            _copy_model(made, model)
            echo(f"wrote {model} (the {pair.kind} model with the list applied)")
    weights, all_weights = weight_share(outcome.index, kept)
    share = f"{100 * weights / all_weights:.1f}%" if all_weights else "no float weights"
    what = "in float32" if option == "keep_fp32" else "unquantized"
    echo(f"{what}: {len(kept)} of {total} node(s) the {pair.kind} transform changes ({len(outcome.index.nodes)} in "
         f"the model); {weights} of {all_weights} float weight elements ({share})")
    echo(f"{what}: {mac_words(mac_share(fed_index(outcome.index, outcome.fed), kept))}")
    echo(f"{outcome.count} candidate(s) in {time.monotonic() - outcome.started:.1f} s (at most "
         f"{outcome.bound(total, len(kept))} for {total} node(s) with {len(kept)} kept)" +
         ("" if outcome.finished else "; stopped by --max-candidates"))
    if seen.passed:
        echo(f"verdict: PASSED with the list ({path}) (exit {int(ExitCode.PASSED)})")
        return ExitCode.PASSED
    echo(f"verdict: the list written does not pass by itself: {seen.verdict()} (exit {int(ExitCode.MISMATCH)})")
    return ExitCode.MISMATCH


def _copy_model(made: str, destination: str) -> None:
    """The transformed model and the weight files it names beside it, under names of its own (``kept.fp16.onnx``
    reads ``kept.fp16.onnx.data``): the transform names them after the model (``m.int8.onnx.data``), so the
    model of another list written to the same folder would write over them, and read the other's weights."""
    import onnx
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    from cmpx.model.external import external_locations

    locations = external_locations(made)
    if not locations:
        shutil.copyfile(made, destination)
        return
    base = os.path.basename(destination)
    renamed = {location: f"{base}.data" if i == 0 else f"{base}.{i}.data" for i, location in enumerate(locations)}
    source_directory, target_directory = os.path.dirname(made), os.path.dirname(os.path.abspath(destination))
    for location, name in renamed.items():
        shutil.copyfile(os.path.join(source_directory, location), os.path.join(target_directory, name))
    model = onnx.load(made, load_external_data=False)  # the graph only: its weights stay in the files
    for tensor in _get_all_tensors(model):
        if uses_external_data(tensor):
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = renamed.get(entry.value, entry.value)
    with open(destination, "wb") as f:
        f.write(model.SerializeToString())


def not_the_model(output: str, kind: str, model: str) -> None:
    """-o and the transformed model written beside it must not be the model itself (it would be overwritten)."""
    for written in (output, transformed_path(output, kind)):
        if os.path.exists(written) and os.path.samefile(written, model):
            raise UsageError(f"-o {output}: cmpx precision would write {written}, the model itself; give the node "
                             "list another path (-o kept.txt)")
