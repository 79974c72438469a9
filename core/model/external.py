"""--external-data-dir DIR: a model whose external data (weights) live elsewhere than beside it. The backends, the
transforms and ONNX itself look for external data next to the model, and refuse links there (onnx refuses symbolic
and hard links, ONNX Runtime paths that resolve elsewhere), so cmpx copies the model file and its data files from
DIR (each must stay inside DIR) into a directory of the run's scratch space, which goes with the run. The copy
costs the weights' size in temporary disk space, and the time to copy them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from cmpx.errors import ModelError, OutputFailed, UsageError
from cmpx.userfiles import inside


def external_locations(model_path: str) -> list[str]:
    """The files the model's initializers keep their data in (``location`` entries), each once, in order; read
    from the model's structure, its weights unread."""
    from cmpx.model.info import read_model

    return list(read_model(model_path).external_data)


def external_data_view(model_path: str, data_dir: str, scratch: str, warn: Callable[[str], None]) -> str:
    """The path of a copy of ``model_path`` in a directory (under ``scratch``) holding copies of its external data
    files from ``data_dir``."""
    if not os.path.isdir(data_dir):
        raise UsageError(f"--external-data-dir {data_dir} is not a directory; give the directory holding the "
                         "model's data files")
    locations = external_locations(model_path)
    if not locations:
        raise ModelError(f"--external-data-dir {data_dir}: {model_path} keeps all its weights inside the file; leave "
                         "the option out")
    view = os.path.join(scratch, "external-data")
    os.makedirs(view, exist_ok=True)
    copy = os.path.join(view, os.path.basename(model_path))
    shutil.copyfile(model_path, copy)  # the graph without its weights: small
    for location in locations:
        target = inside(data_dir, location, f"--external-data-dir {data_dir}: the model's data file")
        placed = os.path.join(view, location)
        os.makedirs(os.path.dirname(placed), exist_ok=True)
        try:
            shutil.copyfile(target, placed)
        except OSError as exc:
            raise OutputFailed(f"--external-data-dir: cannot copy {location} ({os.path.getsize(target) >> 20} MiB) "
                               f"into the run's scratch space {scratch}: {exc.strerror}") from None
    return copy
