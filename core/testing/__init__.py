"""Helpers for testing cmpx plugins: small ONNX models and a pytest plugin (fixtures ``cmpx_cli``,
``cmpx_models``), registered through the ``pytest11`` entry point when cmpx is installed; and cmpx's differential
checks against each framework's own API (``differential``, ``framework_api``, ``kept_workers``, ``node_cases``,
``through_runs``), used by its tests and bench/differential.py; and the check of the TensorRT backend's names
against TensorRT's published API (``trt_api`` reads the API, ``trt_names`` the names the backend uses)."""
