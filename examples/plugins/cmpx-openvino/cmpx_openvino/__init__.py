"""OpenVINO backend for cmpx."""
