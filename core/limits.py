"""The process's own limits, checked when cmpx starts and named when one runs out: open files (``ulimit -n``) and
processes (``ulimit -u``). Exhausting either is a machine limit (exit 2, one line naming it), never a traceback,
a verdict or an internal error. Imports nothing heavy: cmpx.cli.launch calls it first."""

from __future__ import annotations

import errno
import resource

MIN_DESCRIPTORS = 32  # a coordinator, its workers' pipes and logs, and the shared memory it maps
WANTED_DESCRIPTORS = 4096  # raised to (within the hard limit) when the soft one is lower
EXHAUSTED = {errno.EMFILE: "open files (ulimit -n)", errno.ENFILE: "open files of the whole system (fs.file-max)",
             errno.EAGAIN: "processes (ulimit -u)", errno.ENOMEM: "memory"}


def raise_descriptor_limit() -> str | None:
    """Raise the soft limit of open files towards ``WANTED_DESCRIPTORS`` (allowed up to the hard limit); return
    why cmpx cannot run when even the hard limit is under ``MIN_DESCRIPTORS`` (else None)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = WANTED_DESCRIPTORS if hard == resource.RLIM_INFINITY else min(hard, WANTED_DESCRIPTORS)
    if soft != resource.RLIM_INFINITY and soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < MIN_DESCRIPTORS:
        return (f"the limit of open files is {soft} (ulimit -n; hard limit {hard}), under the {MIN_DESCRIPTORS} "
                f"cmpx needs: raise it with ulimit -n {MIN_DESCRIPTORS} or more")
    return None


def exhausted(exc: BaseException) -> str | None:
    """The limit an exception says ran out (an OSError of too many open files or processes, also behind an
    ImportError that could not open a module's file), as words for the message; None for anything else."""
    for error in _chain(exc):
        if isinstance(error, OSError) and error.errno in EXHAUSTED and (
                error.errno not in (errno.EAGAIN, errno.ENOMEM) or _starting_a_process(error)):
            return EXHAUSTED[error.errno]
        if isinstance(error, ImportError) and "Too many open files" in str(error):
            return EXHAUSTED[errno.EMFILE]
    return None


def _starting_a_process(error: BaseException) -> bool:
    """Whether ``error`` came from starting a process (EAGAIN and ENOMEM mean other things elsewhere): raised in
    the subprocess module, or a fork server's failure to fork (an error with ``starts_a_process``)."""
    if getattr(error, "starts_a_process", False):
        return True
    frame = error.__traceback__
    while frame is not None:
        if "subprocess" in frame.tb_frame.f_code.co_filename:
            return True
        frame = frame.tb_next
    return False


def _chain(exc: BaseException | None):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
