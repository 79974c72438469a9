"""Reading .npy data safely: pickle is never allowed, and damaged files are reported, not half-read."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from cmpx.errors import UsageError


class SavedDataError(UsageError):
    """A saved file is missing, damaged, of an unknown kind, or would need pickle to load."""


def load_npy(source: Any, where: str, *, mmap: bool = False) -> np.ndarray:
    """An array from a .npy path (memory-mapped when ``mmap``) or bytes; pickle stays disabled."""
    try:
        if mmap:
            data_bytes = _check_npy_file(source, where)
            return np.load(source, mmap_mode="r" if data_bytes else None, allow_pickle=False)
        loaded = np.load(io.BytesIO(source) if isinstance(source, bytes) else source, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object arrays" in str(exc).lower():
            raise SavedDataError(f"{where}: refused: the array needs pickle to load (object dtype), and cmpx never "
                                 "unpickles data; re-save it as a numeric array") from None
        raise SavedDataError(f"{where}: not a valid .npy array ({exc})") from None
    except (OSError, EOFError) as exc:
        raise SavedDataError(f"{where}: cannot be read ({exc})") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):  # old Polygraphy files held .npz archives
        names = loaded.files
        if not names:
            raise SavedDataError(f"{where}: empty .npz archive")
        loaded = loaded[names[0]]
    return loaded


def _check_npy_file(path: str, where: str) -> int:
    """Header sane, no object dtype, and the file long enough for the data it announces; returns the data size."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            if version not in reader:
                raise ValueError(f"unsupported .npy version {version}")
            shape, _, dtype = reader[version](f, max_header_size=100_000)
            data_start = f.tell()
    except FileNotFoundError:
        raise SavedDataError(f"{where}: file missing") from None
    except (ValueError, OSError, EOFError) as exc:
        raise SavedDataError(f"{where}: not a valid .npy array ({exc})") from None
    if dtype.hasobject:
        raise SavedDataError(f"{where}: refused: the array needs pickle to load (object dtype), and cmpx never "
                             "unpickles data; re-save it as a numeric array")
    data_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if os.path.getsize(path) < data_start + data_bytes:
        raise SavedDataError(f"{where}: truncated ({os.path.getsize(path)} of {data_start + data_bytes} bytes)")
    return data_bytes
