"""A plugin that registers a backend name a built-in already uses."""

import cmpx


@cmpx.hookimpl
def register_backends(registry):
    registry.add("onnxrt", "cmpx_test_clash:Other")
