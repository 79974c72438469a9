import os
import sys

from cmpx.transport.worker.main import main

code = main(sys.argv[1:])
# The backend has been closed (or the coordinator is gone): skip interpreter finalization, which tears down numpy
# and the framework module by module for ~5-10 ms while the coordinator waits for this process to end. The
# process's exit releases everything (memory, mappings, a CUDA context) as it would after a crash.
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
