"""The timm peer of `keras-tse bench`: timm's `VisionTransformer` at our ViT's shape, in plain PyTorch.

A PyTorch user weighing this zoo would pick timm instead, and would train it the way timm's users
do: a `torch.nn.Module`, `torch.compile` on it, `torch.autocast` for mixed precision, a
`torch.optim` optimizer. So this module is the one place in `keras_tse/` outside `data/` that
computes with a framework directly: the peer *is* the other framework's model, never a keras_tse
layer. It runs only in the bench's child process for the `timm_*` cases (with Keras on PyTorch, so
no other framework loads beside it).

The shape is `zoo.vit`'s (Table 1): 32x32x3 images, patch 4 (64 patches and a class token),
width 192, FFN 384, 8 heads, no query/key/value bias, the final LayerNorm and a head on the class
token: the same trainable parameters, to the one. `timm_post` uses
timm's `ResPostBlock` (post-norm, the paper's "classic" block), `timm_pre` its `Block` (pre-norm).
The optimizer is ours (Adam, 1e-4, epsilon 1e-7 as Keras's); the model is compiled exactly when
ours is (`jit_compile=True`), so each ours/timm ratio compares like with like. timm's own
initialisation and LayerNorm epsilon (1e-6) are kept: they do not change the step time.
"""

import importlib
import json
import sys
import time

import numpy as np

from keras_tse.experiments import bench

TIMM_CASES = ("timm_post", "timm_pre")
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


def run_timm_cases(cases, config):
    """Build and time the timm `cases` like `bench.run_cases` times ours; one result dict per case."""
    try:
        torch = importlib.import_module("torch")
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
    model = timm_vit(config.vit_depth, normalize_first=case == "timm_pre").to(device)
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.normal(size=(config.vit_batch, 3, 32, 32)).astype("float32")).to(device)
    labels = torch.from_numpy(rng.integers(0, 10, config.vit_batch)).to(device)
    run = dict(
        torch=torch,
        model=model,
        forward=torch.compile(model) if config.jit_compile is True else model,
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
    torch, timm = run["torch"], importlib.import_module("timm")
    patches = (32 // 4) ** 2
    flops = 3 * bench.vit_matmul_flops(config.vit_batch, config.vit_depth, patches, patches + 1, 192, 384, 4, 3, 10)
    params = int(sum(p.numel() for p in run["model"].parameters() if p.requires_grad))
    backend = f"torch {torch.__version__} (timm {timm.__version__}, no Keras)"
    return bench.timing_result(case, run, config, params=params, flops=flops, backend=backend)


def _child(argv):
    cases, settings = argv
    config = bench.BenchConfig(**{**json.loads(settings), "cases": tuple(cases.split(","))})
    print(json.dumps(run_timm_cases(config.cases, config)), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1:])
