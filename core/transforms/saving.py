"""Reading a whole model (weights included) for a transform, and writing the result, externally if large."""

from __future__ import annotations

import os

PROTOBUF_LIMIT = 2**31 - 2**25  # stay clear of protobuf's 2 GB message limit


def load_full(model_path: str):
    import onnx

    return onnx.load(model_path, load_external_data=True)


def save_model(model, output_path: str) -> None:
    import onnx

    large = model.ByteSize() > PROTOBUF_LIMIT
    location = os.path.basename(output_path) + ".data"
    onnx.save(model, output_path, save_as_external_data=large, all_tensors_to_one_file=True, location=location)
