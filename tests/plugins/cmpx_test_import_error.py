"""A plugin module that cannot be imported."""

import cmpx_this_module_does_not_exist  # noqa: F401
