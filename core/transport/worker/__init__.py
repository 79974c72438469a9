"""The backend worker process: ``python -m cmpx.transport.worker FD_IN FD_OUT PARENT_PID``."""
