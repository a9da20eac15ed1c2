"""The plain-PyTorch peers of `keras-tse bench`: timm's `VisionTransformer` and a ViT of PyTorch's own
`nn.TransformerEncoderLayer`, each at our ViT's shape.

A PyTorch user weighing this zoo would pick timm instead, or build the model from `torch.nn`, and would
train it the way PyTorch's users do: a `torch.nn.Module`, `torch.compile` on it, `torch.autocast` for
mixed precision, a `torch.optim` optimizer. So this module is the one place in `keras_tse/` outside
`data/` that computes with a framework directly: the peers *are* the other framework's models, never
keras_tse layers. It runs only in the bench's child process for the `timm_*` and `torch_*` cases (with
Keras on PyTorch, so no other framework loads beside it).

The shape is `zoo.vit`'s (Table 1): 32x32x3 images, patch 4 (64 patches and a class token),
width 192, FFN 384, 8 heads, the final LayerNorm and a head on the class token.
- timm: no query/key/value bias, the same trainable parameters as ours, to the one. `timm_post` is
  timm's `ResPostBlock`: res-post-norm (Swin v2's), the norm inside the residual branch,
  `x + LN(f(x))`, not Algorithm 1's `LN(x + f(x))`; `timm_pre` its `Block` (pre-norm).
- torch.nn: `nn.TransformerEncoderLayer` with ReLU and no dropout, `norm_first=False` for
  `torch_post` (`LN(x + f(x))`, Algorithm 1: the same architecture as our `vit_post`) and `True` for
  `torch_pre`. Its attention has query/key/value biases (PyTorch offers none without turning off
  every bias), 576 parameters a block more than ours.
The optimizer is ours (Adam, 1e-4, epsilon 1e-7 as Keras's); the model is `torch.compile`-d exactly
when ours is compiled (`jit_compile`), so each ours/peer ratio compares like with like. timm's own
initialisation and LayerNorm epsilon (1e-6) are kept: they do not change the step time.
"""

import importlib
import json
import sys
import time

import numpy as np

from keras_tse.training import benchmark as bench

TIMM_CASES = ("timm_post", "timm_pre")
TORCH_CASES = ("torch_post", "torch_pre")
AUTOCAST = {"mixed_bfloat16": "bfloat16", "mixed_float16": "float16"}


def timm_vit(depth, normalize_first=False, hidden_dim=192, ffn_dim=384, num_heads=8, num_classes=10):
    """timm's VisionTransformer at `zoo.vit`'s shape, `Block` (pre-norm) or `ResPostBlock` (post-norm)."""
    vision_transformer = importlib.import_module("timm.models.vision_transformer")
    block = vision_transformer.Block if normalize_first else vision_transformer.ResPostBlock
    return vision_transformer.VisionTransformer(
        img_size=32,
        patch_size=4,
        num_classes=num_classes,
        embed_dim=hidden_dim,
        depth=depth,
        num_heads=num_heads,
        mlp_ratio=ffn_dim / hidden_dim,
        block_fn=block,
        global_pool="token",
        qkv_bias=False,  # as our SelfAttention: the same parameter count, checked by the tests
    )


def torch_vit(depth, normalize_first=False, hidden_dim=192, ffn_dim=384, num_heads=8, num_classes=10):
    """A ViT of `torch.nn.TransformerEncoderLayer`s at `zoo.vit`'s shape: patch convolution, class
    token, learned position embeddings, the blocks, a final LayerNorm and a head on the class token."""
    nn = importlib.import_module("torch.nn")
    torch = importlib.import_module("torch")
    patches = (32 // 4) ** 2

    class PlainViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patches = nn.Conv2d(3, hidden_dim, kernel_size=4, stride=4)
            self.class_token = nn.Parameter(torch.zeros(1, 1, hidden_dim))
            self.positions = nn.Parameter(torch.randn(1, patches + 1, hidden_dim) * 0.02)
            layer = nn.TransformerEncoderLayer(
                hidden_dim, num_heads, ffn_dim, dropout=0.0, activation="relu", batch_first=True,
                norm_first=normalize_first,
            )  # fmt: skip
            self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(hidden_dim)
            self.head = nn.Linear(hidden_dim, num_classes)

        def forward(self, images):
            tokens = self.patches(images).flatten(2).transpose(1, 2)
            tokens = torch.cat([self.class_token.expand(len(tokens), -1, -1), tokens], dim=1) + self.positions
            return self.head(self.norm(self.blocks(tokens))[:, 0])

    return PlainViT()


def run_timm_cases(cases, config):
    """Build and time the plain-PyTorch `cases` (timm's, torch.nn's) like `bench.run_cases` times ours;
    one result dict per case."""
    try:
        torch = importlib.import_module("torch")
        if any(case in TIMM_CASES for case in cases):
            importlib.import_module("timm")
    except ImportError as error:  # an optional peer: one line per case, never a traceback
        return [dict(case=case, error=f"{error} (pip install timm)") for case in cases]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    runs = {case: _warm_up(case, config, torch, device) for case in cases}
    for _ in range(config.rounds):
        for run in runs.values():
            run["timed"] += _steps(run, config.steps)
    return [_result(case, run, config) for case, run in runs.items()]


def _warm_up(case, config, torch, device):
    torch.manual_seed(0)
    build = timm_vit if case in TIMM_CASES else torch_vit
    model = build(config.vit_depth, normalize_first=case.endswith("_pre")).to(device)
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.normal(size=(config.vit_batch, 3, 32, 32)).astype("float32")).to(device)
    labels = torch.from_numpy(rng.integers(0, 10, config.vit_batch)).to(device)
    run = dict(
        torch=torch,
        model=model,
        forward=torch.compile(model) if config.jit_compile in (True, "whole_model") else model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-4, eps=1e-7),
        scaler=torch.amp.GradScaler(device, enabled=config.dtype == "mixed_float16"),
        autocast=AUTOCAST.get(config.dtype),
        device=device,
        batch=(images, labels),
        items=config.vit_batch,
        unit="images/s",
        timed=[],
    )
    bench.reset_peak_memory()  # Keras runs on PyTorch here: bench's readers read torch's allocator
    run["first"] = _steps(run, 1 + config.warmup)[0]
    run["memory"] = bench.peak_memory_bytes()
    return run


def _steps(run, count):
    """Wall time of `count` train steps, each ending with the loss read back to the host (as ours)."""
    durations = []
    for _ in range(count):
        start = time.perf_counter()
        run["loss"] = _train_step(run)
        durations.append(time.perf_counter() - start)
    return durations


def _train_step(run):
    torch, (images, labels) = run["torch"], run["batch"]
    dtype = getattr(torch, run["autocast"]) if run["autocast"] else None
    with torch.autocast(run["device"], dtype=dtype, enabled=dtype is not None):
        loss = torch.nn.functional.cross_entropy(run["forward"](images), labels)
    run["scaler"].scale(loss).backward()
    run["scaler"].step(run["optimizer"])
    run["scaler"].update()
    run["optimizer"].zero_grad(set_to_none=True)
    return float(loss)


def _result(case, run, config):
    torch = run["torch"]
    patches = (32 // 4) ** 2
    flops = 3 * bench.vit_matmul_flops(config.vit_batch, config.vit_depth, patches, patches + 1, 192, 384, 4, 3, 10)
    params = int(sum(p.numel() for p in run["model"].parameters() if p.requires_grad))
    library = f"timm {importlib.import_module('timm').__version__}" if case in TIMM_CASES else "torch.nn"
    compiled = ", torch.compile" if run["forward"] is not run["model"] else ""
    backend = f"torch {torch.__version__} ({library}{compiled}, no Keras)"
    return bench.timing_result(case, run, config, params=params, flops=flops, backend=backend)


def _child(argv):
    cases, settings = argv
    config = bench.BenchConfig(**{**json.loads(settings), "cases": tuple(cases.split(","))})
    print(json.dumps(run_timm_cases(config.cases, config)), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1:])
