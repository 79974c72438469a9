"""Records which cmpx workers of this coordinator are alive when plugins are loaded and when outputs are compared
(lines "import PID..." and "compare PID..." in $CMPX_TEST_SPY_FILE): shows that a run's workers were started
before plugin discovery and are the ones that ran it."""

import os

import cmpx
from cmpx.testing.leaks import worker_processes


def _record(moment: str) -> None:
    with open(os.environ["CMPX_TEST_SPY_FILE"], "a") as f:
        f.write(" ".join([moment, *map(str, sorted(worker_processes()))]) + "\n")


_record("import")


class Spy:
    name = "spy"
    threshold = None

    def compare(self, context):
        from cmpx import MetricResult

        _record("compare")
        return MetricResult(self.name, True, summary="recorded the live workers", criterion="always", value=0)


@cmpx.hookimpl
def register_metrics(registry):
    registry.add(Spy(), description="records the live workers (tests only)")
