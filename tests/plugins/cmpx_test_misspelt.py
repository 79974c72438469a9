"""A plugin with a misspelt hook name: it must be reported by name, and break nothing else."""

import cmpx


@cmpx.hookimpl
def register_backend(registry):  # missing the final "s"
    registry.add("never", "cmpx_test_misspelt:Nothing")
