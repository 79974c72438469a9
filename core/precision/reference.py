"""The reference's outputs, computed once per search. ``cmpx precision`` runs the reference backend alone once,
saving its model outputs (cmpx's saved-run format, as ``--save-outputs`` writes it), and compares every later run
of the transformed model against that saved run (as ``--load-outputs`` reads it, the reference then named
``NAME@reference``): a candidate costs the transformed backend's worker only, not two.

The ranking run, which needs the reference's every tensor, and the final check (the user's own run, as printed)
stay live. A ``--data-loader-script`` may feed other data on each run (nothing says it is deterministic), so with
one the reference stays live on every run; synthetic data (seeded) and ``--load-inputs`` are the same every run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cmpx.lifecycle.preflight import Preflight
    from cmpx.options.request import RunRequest
    from cmpx.precision.request import Pair

LABEL = "reference"  # the saved run's directory, so its backend is NAME@reference


@dataclass(frozen=True)
class SavedReference:
    save: RunRequest  # the reference alone, its outputs saved
    compare: RunRequest  # the transformed backend against the saved outputs (with_kept adds the nodes kept)
    name: str  # the saved reference's backend name: NAME@reference


def saved_reference(request: RunRequest, checked: Preflight, pair: Pair, directory: str) -> SavedReference | None:
    """The two requests, the outputs saved under ``directory``; None when the reference must stay live."""
    from cmpx.reduce.observe import for_backends

    if request.data_loader_script:
        return None
    words = dict(zip((b.name for b in checked.backends), request.backends))
    saved = os.path.join(directory, LABEL)
    name = f"{pair.reference}@{LABEL}"
    save = replace(for_backends(request, checked, {pair.reference}), backends=(words[pair.reference],),
                   reference=None, save_outputs=saved, save_inputs=None)
    compare = replace(for_backends(request, checked, {pair.backend}), backends=(words[pair.backend],),
                      load_outputs=(saved,), reference=name)
    return SavedReference(save, compare, name)
