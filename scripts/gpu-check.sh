#!/usr/bin/env bash
# Run cmpx's TensorRT checks end to end on a machine with an NVIDIA GPU and TensorRT (never run in CI:
# CI machines have no GPU). Usage, from the repository root:  bash scripts/gpu-check.sh
# It installs cmpx with its trt extra into .venv-gpu, then runs the tests marked gpu and a few comparisons:
# fp32, fp16 and int8 Q/DQ graphs, dynamic shapes with profiles, a saved engine (and running it as the model),
# a timing cache, mark all.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-gpu
.venv-gpu/bin/pip install --quiet -e '.[test,trt]'
export PATH="$PWD/.venv-gpu/bin:$PATH"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python -c "import tensorrt; print('TensorRT', tensorrt.__version__)"
python -m pytest -m gpu -v tests/test_trt.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmpx run examples/models/conv.onnx --backend trt --backend onnxrt --atol 1e-3 --rtol 1e-3
cmpx run examples/models/conv.onnx --backend trt --fp16 --backend onnxrt --atol 1e-2 --rtol 1e-2
cmpx run examples/models/conv.onnx --backend trt --int8 --backend onnxrt:int8 --atol 0.2 --rtol 0.2
cmpx run examples/models/conv.onnx --backend trt --fp8 --backend onnxref:fp8 --atol 0.3 --rtol 0.3  # fp8: Hopper+
cmpx run examples/models/dynamic_identity.onnx --backend trt --backend onnxrt --input-shapes X:[2,2,4,4] \
    --trt-min-shapes X:[1,2,1,1] --trt-opt-shapes X:[2,2,4,4] --trt-max-shapes X:[4,2,8,8] \
    --save-engine "$work/identity.engine" --save-timing-cache "$work/timing.cache" --save-outputs "$work/run"
cmpx run "$work/identity.engine" --backend trt --input-shapes X:[2,2,4,4] --load-outputs "$work/run"
cmpx run examples/models/dynamic_identity.onnx --backend trt --backend onnxrt --input-shapes X:[2,2,4,4] \
    --trt-min-shapes X:[1,2,1,1] --trt-opt-shapes X:[2,2,4,4] --trt-max-shapes X:[4,2,8,8] \
    --load-timing-cache "$work/timing.cache"
cmpx run examples/models/conv.onnx --backend trt --backend onnxrt --mark-all --atol 1e-3 --rtol 1e-3
echo "gpu-check: all TensorRT checks passed"
