"""TensorRT backend for cmpx (TensorRT 11, and 10.x). Written against the documented Python API; see README.md
for what has and has not been run on real hardware."""
