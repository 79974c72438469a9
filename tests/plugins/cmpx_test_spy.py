"""Records which cmpx workers (and fork servers, as "server:PID") of this coordinator are alive when plugins are
loaded and when outputs are compared (lines "import PID..." and "compare PID..." in $CMPX_TEST_SPY_FILE): shows
that a run's workers, or the server that forks them, were started before plugin discovery and ran it."""

import os

import cmpx
from cmpx.testing.leaks import fork_servers, worker_processes


def _record(moment: str) -> None:
    with open(os.environ["CMPX_TEST_SPY_FILE"], "a") as f:
        servers = [f"server:{pid}" for pid in sorted(fork_servers())]
        f.write(" ".join([moment, *map(str, sorted(worker_processes())), *servers]) + "\n")


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
