"""Open any saved file cmpx reads, telling the formats apart by what is on disk."""

from __future__ import annotations

import os
from collections.abc import Sequence

from cmpx.saved.cmpx_format import is_cmpx_run, read_cmpx_run
from cmpx.saved.model import SavedFile
from cmpx.saved.npy import SavedDataError
from cmpx.saved.onnx_testdata import read_test_data, test_data_sets
from cmpx.saved.polygraphy_json import looks_like_polygraphy, polygraphy_files, read_polygraphy, \
    read_polygraphy_directory
from cmpx.userfiles import check_regular

FORMS = ("a cmpx run directory (--save-inputs/--save-outputs), a Polygraphy JSON file or per-iteration directory, or "
         "an ONNX test-data directory")


def open_saved(path: str, kind: str, fallback_names: Sequence[str] = ()) -> SavedFile:
    """Open ``path`` as saved ``kind`` ("inputs" or "outputs"); raise SavedDataError if it is not one."""
    if not os.path.exists(path):
        raise SavedDataError(f"{path}: no such file or directory")
    if os.path.isdir(path):
        if is_cmpx_run(path):
            saved = read_cmpx_run(path)
        elif test_data_sets(path):
            saved = read_test_data(path, kind, fallback_names)
        elif polygraphy_files(path):
            saved = read_polygraphy_directory(path)
        else:
            raise SavedDataError(f"{path}: a directory, but not {FORMS}")
    else:
        check_regular(path, "saved file")
        if os.path.getsize(path) == 0:
            raise SavedDataError(f"{path}: the file is empty")
        if not looks_like_polygraphy(path):
            raise SavedDataError(f"{path}: not {FORMS} (cmpx never loads pickle files)")
        saved = read_polygraphy(path)
    if saved.kind != kind:
        raise SavedDataError(f"{path}: holds saved {saved.kind}, but is given as {kind}; use "
                             f"--load-{saved.kind} for it")
    return saved
