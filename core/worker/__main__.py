import sys

from cmpx.worker.main import main

sys.exit(main(sys.argv[1:]))
