"""Is there a GPU to run TensorRT on? Asked of the CUDA driver through ctypes, before TensorRT is touched:
TensorRT's runtime can crash the process when no driver is present."""

from __future__ import annotations

import ctypes


def cuda_problem() -> str | None:
    """None if a CUDA device is usable, else a one-line reason."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver (libcuda.so.1 not found): TensorRT needs an NVIDIA GPU and its driver"
    code = driver.cuInit(0)
    if code != 0:
        return f"the CUDA driver did not initialise (cuInit error {code}): no CUDA device visible"
    count = ctypes.c_int(0)
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return "no CUDA device visible"
    return None
