"""Regenerate tests/models/real/: ONNX models exported from real architectures the way users export them, which
cmpx's end-to-end tests (tests/test_real_models.py) run on every backend. CI does not run this script: the models
are committed (about 2 MB in all), and this script only says how they were made and remakes them.

Every model is built from a tiny config with random weights (fixed seeds; nothing is downloaded) and exported with
the exporter's ordinary entry point:

  bert.onnx             transformers BertModel (hidden 32, 2 layers, 2 heads, vocab 100, type vocab 2, max pos 64)
                        torch.onnx.export(dynamo=True) [the default], opset 18, dynamic axes batch/sequence
  gpt2.onnx             transformers GPT2LMHeadModel (n_embd 32, 2 layers, 2 heads, vocab 100, n_positions 64,
                        use_cache=False), dynamo=True, opset 18, batch/sequence dynamic through dynamic_shapes
                        (torch.export.Dim) because dynamic_axes= fails for this model (see make_gpt2)
  cnn.onnx              torchvision RegNet (RegNetX-style: Conv-BN-ReLU blocks, group convs, residual adds) with
                        reduced width (widths 16/32/64/128, 108k parameters), input [batch,3,32,32], opset 18.
                        Both exporters fold BatchNormalization into Conv in eval mode by default (dynamo: its
                        onnxscript optimizer; legacy: eval-mode peephole). To keep BN nodes in the graph this one
                        uses the legacy exporter (dynamo=False) with training=TrainingMode.PRESERVE on a model in
                        eval() mode, which keeps BatchNormalization(training_mode=0) with the running statistics.
  vit.onnx              transformers ViTModel (image 32, patch 8, hidden 32, 2 layers, 2 heads), dynamo=True,
                        opset 18, dynamic batch
  skl_pipeline.onnx     scikit-learn Pipeline(StandardScaler, LogisticRegression) on 8 float features, 3 classes,
                        skl2onnx.convert_sklearn with the default ZipMap output, target_opset {'': 17,
                        'ai.onnx.ml': 3} (a ceiling: skl2onnx writes the lowest opsets its ops need, ai.onnx 9 and
                        ai.onnx.ml 1)
  external/model.onnx   cnn.onnx re-saved with every initializer as external data in one file,
  external/weights.bin  external/weights.bin (onnx.save_model(save_as_external_data=True, size_threshold=0))

A short MANIFEST.json beside the models records the exporter actually used for each, and the package versions.
Each torch model is checked against its PyTorch output in ONNX Runtime, the sklearn pipeline against predict_proba,
and every file passes onnx.checker.check_model(full_check=True).

It needs torch, torchvision, transformers, onnxscript, scikit-learn and skl2onnx, which cmpx itself does not (a
6 GB environment with torch's CUDA wheels). Run it with (last run with: Python 3.11.7, torch 2.14.1+cu130 (run on
the CPU), torchvision 0.29.1+cu130, transformers 5.24.0, onnx 1.23.2, onnxscript 0.7.2, onnx-ir 1.1.0,
onnxruntime 1.32.0, scikit-learn 1.9.1, skl2onnx 1.20.0, numpy 2.4.6):

    python3 -m venv /work/corpus/.venv-export    # any directory
    /work/corpus/.venv-export/bin/pip install torch transformers onnx onnxscript skl2onnx scikit-learn onnxruntime
    /work/corpus/.venv-export/bin/pip install --no-deps torchvision && /work/corpus/.venv-export/bin/pip install pillow
    /work/corpus/.venv-export/bin/python tests/models/real/make_corpus.py [OUTDIR]   # default: this directory

The output is byte-for-byte reproducible with the same package versions (checked by running it twice).
"""

import json
import os
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

OPSET = 18
MANIFEST = {}


def _seed(s):
    torch.manual_seed(s)
    np.random.seed(s)


def _check(path):
    onnx.checker.check_model(path, full_check=True)


def _ort_vs_torch(path, feeds, torch_outs, atol=1e-4):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outs = sess.run(None, {k: v.numpy() for k, v in feeds.items()})
    diffs = []
    for o, t in zip(outs, torch_outs):
        t = t.detach().numpy()
        assert o.shape == t.shape, (path, o.shape, t.shape)
        d = float(np.max(np.abs(o - t)))
        assert d < atol, (path, d)
        diffs.append(d)
    return diffs


def _export_torch(model, kwargs, path, input_names, output_names, dynamic_axes, dynamo=True, **extra):
    """torch.onnx.export with explicit names; the exporter used is recorded in MANIFEST.

    dynamic_axes is either the classic {name: {axis: "dim name"}} form, or ("dynamic_shapes", {...}) for the
    dynamo exporter's own torch.export.Dim form."""
    if isinstance(dynamic_axes, tuple):
        axes = {"dynamic_shapes": dynamic_axes[1]}
        shown = {k: {a: str(d) for a, d in v.items()} for k, v in dynamic_axes[1].items()}
    else:
        axes = {"dynamic_axes": dynamic_axes}
        shown = dynamic_axes
    torch.onnx.export(
        model,
        (),
        path,
        kwargs=kwargs,
        input_names=input_names,
        output_names=output_names,
        opset_version=OPSET,
        dynamo=dynamo,
        external_data=False,
        **axes,
        **extra,
    )
    settings = {"dynamo": dynamo, "opset_version": OPSET, "external_data": False, next(iter(axes)): shown}
    settings.update({k: str(v) for k, v in extra.items()})
    MANIFEST[os.path.basename(path)] = {"exporter": "torch.onnx.export", "settings": settings}


def make_bert(out):
    from transformers import BertConfig, BertModel

    _seed(0)
    cfg = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)
    model = BertModel(cfg).eval()
    g = torch.Generator().manual_seed(0)
    feeds = {
        "input_ids": torch.randint(0, 100, (2, 8), generator=g),
        "attention_mask": torch.tensor([[1] * 8, [1] * 5 + [0] * 3], dtype=torch.int64),
        "token_type_ids": torch.tensor([[0] * 4 + [1] * 4, [0] * 8], dtype=torch.int64),
    }
    names = list(feeds)
    dyn = {k: {0: "batch", 1: "sequence"} for k in names}
    dyn["last_hidden_state"] = {0: "batch", 1: "sequence"}
    dyn["pooler_output"] = {0: "batch"}
    path = os.path.join(out, "bert.onnx")
    _export_torch(model, feeds, path, names, ["last_hidden_state", "pooler_output"], dyn)
    with torch.no_grad():
        ref = model(**feeds)
    _check(path)
    # also another batch/sequence to prove the axes are really dynamic
    feeds2 = {k: torch.ones(3, 13, dtype=torch.int64) for k in names}
    feeds2["input_ids"] = torch.randint(0, 100, (3, 13), generator=g)
    with torch.no_grad():
        ref2 = model(**feeds2)
    return (_ort_vs_torch(path, feeds, [ref.last_hidden_state, ref.pooler_output])
            + _ort_vs_torch(path, feeds2, [ref2.last_hidden_state, ref2.pooler_output]))


def make_gpt2(out):
    from transformers import GPT2Config, GPT2LMHeadModel

    _seed(1)
    cfg = GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2, use_cache=False)
    model = GPT2LMHeadModel(cfg).eval()
    g = torch.Generator().manual_seed(1)
    feeds = {
        "input_ids": torch.randint(0, 100, (2, 8), generator=g),
        "attention_mask": torch.tensor([[1] * 8, [1] * 6 + [0] * 2], dtype=torch.int64),
    }
    names = list(feeds)
    # dynamic_axes= fails here: torch converts it to dynamic_shapes by *position* in forward()'s signature, whose
    # second parameter is `cache`, so attention_mask's axes land on the cache ("'FakeTensor' object has no attribute
    # 'get_seq_length'"). The dynamo exporter's own dynamic_shapes form, keyed by name, works.
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence", max=64)
    dyn = ("dynamic_shapes", {k: {0: batch, 1: seq} for k in names})
    path = os.path.join(out, "gpt2.onnx")
    _export_torch(model, feeds, path, names, ["logits"], dyn)
    with torch.no_grad():
        ref = model(**feeds, use_cache=False)
    _check(path)
    feeds2 = {"input_ids": torch.randint(0, 100, (1, 11), generator=g),
              "attention_mask": torch.ones(1, 11, dtype=torch.int64)}
    with torch.no_grad():
        ref2 = model(**feeds2, use_cache=False)
    return _ort_vs_torch(path, feeds, [ref.logits]) + _ort_vs_torch(path, feeds2, [ref2.logits])


def _regnet():
    from torchvision.models.regnet import BlockParams, RegNet

    _seed(2)
    params = BlockParams.from_init_params(depth=8, w_0=16, w_a=12.0, w_m=2.0, group_width=8)
    model = RegNet(params, num_classes=10, stem_width=16)
    # give BatchNorm non-trivial running statistics and affine parameters (fresh ones are mean 0, var 1, weight 1,
    # bias 0, which would make BN an identity and hide folding/numerics issues)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


def make_cnn(out):
    model = _regnet()
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    dyn = {"input": {0: "batch"}, "logits": {0: "batch"}}
    path = os.path.join(out, "cnn.onnx")
    _export_torch(model, {"x": x}, path, ["input"], ["logits"], dyn, dynamo=False,
                  training=torch.onnx.TrainingMode.PRESERVE)
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert "BatchNormalization" in ops, ops
    with torch.no_grad():
        ref = model(x)
        x4 = torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(3))
        ref4 = model(x4)
    _check(path)
    return _ort_vs_torch(path, {"input": x}, [ref]) + _ort_vs_torch(path, {"input": x4}, [ref4])


def make_vit(out):
    from transformers import ViTConfig, ViTModel

    _seed(3)
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=64)
    model = ViTModel(cfg).eval()
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    dyn = {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}, "pooler_output": {0: "batch"}}
    path = os.path.join(out, "vit.onnx")
    _export_torch(model, {"pixel_values": x}, path, ["pixel_values"], ["last_hidden_state", "pooler_output"], dyn)
    with torch.no_grad():
        ref = model(pixel_values=x)
        x3 = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(4))
        ref3 = model(pixel_values=x3)
    _check(path)
    return (_ort_vs_torch(path, {"pixel_values": x}, [ref.last_hidden_state, ref.pooler_output])
            + _ort_vs_torch(path, {"pixel_values": x3}, [ref3.last_hidden_state, ref3.pooler_output]))


def make_skl(out):
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(n_samples=300, n_features=8, n_informative=5, n_classes=3, random_state=0)
    X = (X * 3.0 + 10.0).astype(np.float32)  # not already standardised, so the scaler does something
    pipe = Pipeline([("scaler", StandardScaler()), ("clf", LogisticRegression(max_iter=1000))]).fit(X, y)
    opsets = {"": 17, "ai.onnx.ml": 3}
    onx = convert_sklearn(pipe, "skl_pipeline", initial_types=[("input", FloatTensorType([None, 8]))],
                          target_opset=opsets)
    path = os.path.join(out, "skl_pipeline.onnx")
    onnx.save_model(onx, path)
    MANIFEST["skl_pipeline.onnx"] = {"exporter": "skl2onnx.convert_sklearn",
                                     "settings": {"initial_types": "input: FloatTensorType([None, 8])",
                                                  "target_opset": opsets, "options": "default (zipmap=True)"}}
    _check(path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    label, proba = sess.run(None, {"input": X[:10]})
    assert (label == pipe.predict(X[:10])).all()
    p = np.array([[d[k] for k in sorted(d)] for d in proba])
    diff = float(np.max(np.abs(p - pipe.predict_proba(X[:10]))))
    assert diff < 1e-5, diff
    return [diff]


def make_external(out):
    src = os.path.join(out, "cnn.onnx")
    ext_dir = os.path.join(out, "external")
    os.makedirs(ext_dir, exist_ok=True)
    for f in ("model.onnx", "weights.bin"):
        if os.path.exists(os.path.join(ext_dir, f)):
            os.remove(os.path.join(ext_dir, f))
    m = onnx.load(src)
    path = os.path.join(ext_dir, "model.onnx")
    onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                    size_threshold=0, convert_attribute=False)
    os.chmod(os.path.join(ext_dir, "weights.bin"), 0o644)  # onnx creates it 0600
    m2 = onnx.load(path, load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in m2.graph.initializer)
    MANIFEST["external/model.onnx"] = {"exporter": "onnx.save_model of cnn.onnx",
                                       "settings": {"save_as_external_data": True, "all_tensors_to_one_file": True,
                                                    "location": "weights.bin", "size_threshold": 0}}
    _check(path)
    x = np.random.RandomState(5).rand(2, 3, 32, 32).astype(np.float32)
    a = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    b = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    assert np.array_equal(a, b)
    return [0.0]


def main():
    # skl2onnx builds opset_import from a set, so its order follows Python's string hashing: pin the hash seed
    # (re-running this script once) so that every file comes out byte-for-byte the same.
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:])
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)  # deterministic kernels for the reference outputs
    for make in (make_bert, make_gpt2, make_cnn, make_vit, make_skl, make_external):
        diffs = make(out)
        print(f"{make.__name__}: ok, max |onnxruntime - source framework| per output: "
              + ", ".join(f"{d:.2e}" for d in diffs), flush=True)
    import importlib.metadata as md

    versions = {}
    for pkg in ("torch", "torchvision", "transformers", "onnx", "onnxscript", "onnx-ir", "onnxruntime",
                "scikit-learn", "skl2onnx", "numpy"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    versions["python"] = sys.version.split()[0]
    with open(os.path.join(out, "MANIFEST.json"), "w") as f:
        json.dump({"versions": versions, "models": MANIFEST}, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
