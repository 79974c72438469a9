"""A plugin whose registration raises after adding one backend: none of its adds may be kept."""

import cmpx


@cmpx.hookimpl
def register_backends(registry):
    registry.add("halfway", "cmpx_test_raising:Nothing")
    raise RuntimeError("registration exploded")


@cmpx.hookimpl
def register_metrics(registry):
    class Always:
        name = "always"

        def compare(self, actual, reference, tolerance):
            raise AssertionError("never called in tests")

    registry.add(Always())
