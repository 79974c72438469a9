"""The backend worker process: ``python -m cmpx.worker FD_IN FD_OUT PARENT_PID``."""
