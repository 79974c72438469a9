"""The backend worker process: ``python -m cmpx.transport.worker FD_IN FD_OUT PARENT_PID``.

Kept free of imports: the coordinator reads ``CANNOT_START`` from here, and a worker under another project's Python
(``--backend NAME@PYTHON``) imports this package before it has checked that it can run at all.
"""

# A worker whose Python cannot run it (too old, without numpy or msgpack) exits with this code after writing one line
# to stderr that starts with CANNOT_START_PREFIX and says what is missing; the coordinator reports that line.
CANNOT_START = 86
CANNOT_START_PREFIX = "cmpx worker cannot start: "
