"""Reading .npy data safely: pickle is never allowed, and damaged files are reported, not half-read."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from cmpx.errors import UsageError
from cmpx.userfiles import open_regular


class SavedDataError(UsageError):
    """A saved file is missing, damaged, of an unknown kind, or would need pickle to load."""


def load_npy(source: Any, where: str, *, mmap: bool = False) -> np.ndarray:
    """An array from a .npy path (memory-mapped when ``mmap``) or bytes; pickle stays disabled, the header is
    checked against the data it announces before anything is allocated, and errors never quote the file."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if data[:2] == b"PK":  # old Polygraphy files held .npz archives
            return _load_npz(data, where)
        _, _, _, data_start, data_bytes = _header(io.BytesIO(data), where)
        if len(data) < data_start + data_bytes:
            raise SavedDataError(f"{where}: the array declares {data_bytes} bytes of data but holds "
                                 f"{max(0, len(data) - data_start)}; the file is damaged or truncated")
        return _load(io.BytesIO(data), where)
    with open_regular(source, f"{where}:") as f:
        shape, _, dtype, data_start, data_bytes = _header(f, where)
        size = os.fstat(f.fileno()).st_size
    if size < data_start + data_bytes:
        raise SavedDataError(f"{where}: truncated ({size} of {data_start + data_bytes} bytes)")
    if mmap and data_bytes:
        return _load(source, where, mmap_mode="r")
    with open_regular(source, f"{where}:") as f:
        return _load(f, where)


def npy_header(path: str, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype a .npy file declares, checked against its size; nothing of its data is read."""
    with open_regular(path, f"{where}:") as f:
        shape, _, dtype, data_start, data_bytes = _header(f, where)
        size = os.fstat(f.fileno()).st_size
    if size < data_start + data_bytes:
        raise SavedDataError(f"{where}: truncated ({size} of {data_start + data_bytes} bytes)")
    return tuple(int(d) for d in shape), dtype


def _header(f: Any, where: str) -> tuple[tuple[int, ...], bool, np.dtype, int, int]:
    """(shape, fortran order, dtype, where the data starts, how many bytes it needs), read without trusting it."""
    try:
        version = np.lib.format.read_magic(f)
        reader = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
        if version not in reader:
            raise ValueError
        shape, fortran, dtype = reader[version](f, max_header_size=100_000)
    except Exception:  # noqa: BLE001 - numpy parses the header text with Python's tokenizer: any failure is a bad one
        raise SavedDataError(f"{where}: not a valid .npy array (its header cannot be read)") from None
    if dtype.hasobject:
        raise SavedDataError(f"{where}: refused: the array needs pickle to load (object dtype), and cmpx never "
                             "unpickles data; re-save it as a numeric array")
    if dtype.kind in "USMm":  # strings, dates: nothing cmpx can compare or feed
        raise SavedDataError(f"{where}: holds {dtype} values ({'text' if dtype.kind in 'US' else 'dates'}); cmpx "
                             "compares and feeds numbers: leave this tensor out of the saved run")
    count = 1
    for dim in shape:
        count *= int(dim)
    return shape, fortran, dtype, f.tell(), count * dtype.itemsize


def _load(source: Any, where: str, **kwargs: Any) -> np.ndarray:
    try:
        return np.load(source, allow_pickle=False, **kwargs)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object arrays" in str(exc).lower():
            raise SavedDataError(f"{where}: refused: the array needs pickle to load (object dtype), and cmpx never "
                                 "unpickles data; re-save it as a numeric array") from None
        raise SavedDataError(f"{where}: not a valid .npy array") from None
    except (OSError, EOFError, MemoryError) as exc:
        raise SavedDataError(f"{where}: cannot be read ({type(exc).__name__})") from None


def _load_npz(data: bytes, where: str) -> np.ndarray:
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        names = archive.files
        if not names:
            raise SavedDataError(f"{where}: empty .npz archive")
        with archive.zip.open(f"{names[0]}.npy") as member:
            header = _header(member, where)
            info = archive.zip.getinfo(f"{names[0]}.npy")
            if info.file_size < header[3] + header[4]:
                raise SavedDataError(f"{where}: the archived array declares {header[4]} bytes of data but holds less")
        return archive[names[0]]
    except SavedDataError:
        raise
    except (ValueError, OSError, EOFError, KeyError, MemoryError, zipfile_error()):
        raise SavedDataError(f"{where}: not a valid .npz archive") from None


def zipfile_error() -> type[Exception]:
    import zipfile

    return zipfile.BadZipFile
