"""`keras-tse bench`: train-step throughput and peak memory of the zoo models, beside a peer.

What a user weighing this zoo against the obvious alternative wants to know, measured the same way
for every case of one run:

- `vit_post`, `vit_pre`, `vit_deescalate`: our ViT (`zoo.vit`) with each block kind;
- `peer_post`, `peer_pre`: the same model (our patch embedding, class token, final LayerNorm and
  head) with its blocks replaced by KerasHub `TransformerEncoder` layers (`normalize_first=False`
  and `True`), the peer a Keras user would build instead; KerasHub has no Transformer-XL, so the
  language model is compared with itself across norms only;
- `timm_post`, `timm_pre` (`--peer timm`): timm's `VisionTransformer` at the same shape
  (`ResPostBlock`, res-post-norm: the norm inside the residual branch; `Block`, pre-norm) trained
  in plain PyTorch, the peer a PyTorch user would pick (`keras_tse.training.timm_peer`); its own
  child process, whatever the Keras backend;
- `torch_post`, `torch_pre` (`--peer torch`): a ViT of the same shape built from PyTorch's own
  `nn.TransformerEncoderLayer` (`norm_first=False`: Algorithm 1's classic post-norm, the same
  architecture as `vit_post`; `norm_first=True`: pre-norm), in the same child as timm's. It needs no
  torchvision, so it runs where timm does not import. With `jit_compile` both plain-PyTorch peers are
  `torch.compile`-d whole, as a PyTorch user would;
- `txl_post`, `txl_pre`, `txl_deescalate`: `zoo.transformer_xl`, tokens per second.

With `vit_deescalate` the run also times one `TokenSimilarityMetric` probe measurement on its
model and reports its cost at the callback's default frequency (once per epoch: CIFAR-10's 391
steps at batch 128). The parent prints every ratio (ours / peer, deescalate / post, pre / post).

A step is timed from the end of one `fit` batch to the end of the next with the loss read back to
the host (so asynchronous dispatch cannot hide work); throughput is the batch over the median of
the timed steps; compile time is the first step less that median. Each model family runs in its
own child process (each case in its own with `isolate`); with `budget_s` a child still running when
the budget is spent is stopped and its cases report that, so a paper-size run ends in a time the
user chose with every case that finished.

Model FLOPs per step count the matrix multiplications of the forward pass (projections, FFN,
attention scores and their weighted sums, the patch convolution or the adaptive softmax) times 3
for the backward pass, the usual convention of MFU (Chowdhery et al. 2022, App. B); element-wise
work is not counted. MFU is reported when `--peak-tflops` names the device's peak for the dtype.

Peak memory is what the backend's allocator reports on a GPU, or the child process's peak resident
set on a CPU (framework and every model of the process included). Reading the allocator is the one
place in `keras_tse/` outside `data/` that touches a backend module: Keras has no API for it, and
the reading computes nothing.
"""

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import time

import keras
import numpy as np

from keras_tse import _checks, run_files
from keras_tse.machine import accelerator_name

# the cases, peers and dtypes are the command line's (checked where the flags enter, before Keras loads)
from keras_tse.training.bench_cases import CASES, DTYPES, PEERS, PLAIN_TORCH_CASES, TXL_CASES, VIT_CASES

CIFAR_STEPS_PER_EPOCH = 391  # the callback's default frequency is once per epoch: 50,000 / 128


@dataclasses.dataclass
class BenchConfig:
    """One benchmark run; `quick()` is the CPU-sized variant (`--quick`)."""

    cases: tuple = None  # default: every case of ours, the `peer`s' and Transformer-XL's
    peer: tuple = ("keras_hub",)  # whose ViT to time beside ours: keras_hub, timm or both
    dtype: str = "float32"
    vit_depth: int = 80  # the paper's ViT (Table 1)
    vit_batch: int = 128  # the paper's batch size (Sec. 3.3)
    txl_depth: int = 60  # the paper's Transformer-XL (Sec. 3.4)
    txl_batch: int = 40
    txl_segment: int = 150
    txl_small: bool = False  # widths of preset transformer_xl8_small instead of the paper's
    warmup: int = 3  # steps after the first that are not timed
    steps: int = 10  # timed steps
    rounds: int = 2  # turns of `steps` timed steps per case (see run_cases)
    isolate: bool = False  # one process per case (clean peak memory) instead of one per model family
    jit_compile: object = "auto"  # Keras's default; True: XLA, on PyTorch per block; "whole_model" (block_compile)
    peak_tflops: float = None  # the device's peak for `dtype`, for MFU
    budget_s: float = None  # stop a child still running after this many seconds of the whole run

    @classmethod
    def quick(cls, **overrides):
        """CPU-sized models (ViT-8 batch 32, Transformer-XL-4 batch 8 at the small preset's widths): minutes."""
        settings = dict(vit_depth=8, vit_batch=32, txl_depth=4, txl_batch=8, txl_segment=32, txl_small=True)
        settings.update(warmup=2, steps=6, rounds=3)
        return cls(**{**settings, **overrides})

    def __post_init__(self):
        self.peer = _checks.subset_of("peer", self.peer, tuple(PEERS))
        if self.cases is None:
            peers = [c for p in self.peer for c in PEERS[p]]
            self.cases = tuple(c for c in CASES if c in peers or not c.startswith(("peer", "timm", "torch")))
        self.cases = _checks.subset_of("cases", self.cases, CASES)
        _checks.one_of("dtype", self.dtype, DTYPES)
        _checks.config_fields(
            self, positive_ints=("vit_depth", "vit_batch", "txl_depth", "txl_batch", "txl_segment", "steps", "rounds")
        )
        if self.budget_s is not None:
            self.budget_s = _checks.positive_float("budget_s", self.budget_s)


# --- one case, in the child process -------------------------------------------------------------


def run_cases(cases, config):
    """Build, compile and time `cases` in this process, in turns; returns one result dict per case.

    Each case is compiled and warmed up first (its compile time and peak memory are read then);
    then `config.rounds` rounds give every case `config.steps` timed steps in turn (A B C A B C),
    so a slow spell of a shared machine falls on every case alike. A case's step time is the
    median of all its timed steps.
    """
    keras.config.set_dtype_policy(config.dtype)
    runs, missing = {}, []
    for case in cases:
        keras.utils.set_random_seed(0)
        try:
            model, batch, items, unit = _build(case, config)
        except ImportError as error:  # the peer needs keras-hub: `pip install keras-hub`
            missing.append(dict(case=case, error=f"{error} (pip install keras-hub)"))
            continue
        _task(case).compile(model, keras.optimizers.Adam(1e-4), config.jit_compile)
        reset_peak_memory()
        clock = _fit_steps(model, batch, 1 + config.warmup)
        runs[case] = dict(
            model=model,
            batch=batch,
            items=items,
            unit=unit,
            first=clock.durations[0],
            memory=peak_memory_bytes(),
            timed=[],
            loss=clock.last_loss,
        )
    for _ in range(config.rounds):
        for run in runs.values():
            clock = _fit_steps(run["model"], run["batch"], config.steps)
            run["timed"] += clock.durations[1:]  # the first batch of a fit call carries its start-up
            run["loss"] = clock.last_loss
    return [_result(case, run, config) for case, run in runs.items()] + missing


def _fit_steps(model, batch, steps):
    clock = _StepClock()
    model.fit(_repeat(batch), steps_per_epoch=steps + 1, epochs=1, verbose=0, callbacks=[clock])
    return clock


def _result(case, run, config):
    model = run["model"]
    result = timing_result(case, run, config, params=_trainable_params(model), flops=_train_flops(case, config, model))
    if case == "vit_deescalate":  # what TokenSimilarityMetric adds at its default frequency
        result["probe_s"] = _probe_seconds(model, run["batch"][0])
        result["metric_overhead"] = result["probe_s"] / (CIFAR_STEPS_PER_EPOCH * result["step_ms"] / 1000)
    return result


def timing_result(case, run, config, params, flops, backend=None):
    """One case's result row from its run record (`batch`, `items`, `unit`, `first`, `timed`, `loss`,
    `memory`) and its train-step FLOPs: the same fields for ours and for a peer."""
    step = float(np.median(run["timed"]))
    result = dict(
        case=case,
        backend=backend or keras.backend.backend(),
        device=accelerator_name(keras.backend.backend()),
        dtype=config.dtype,
        params=params,
        batch=int(run["batch"][0].shape[0]),
        step_ms=1000 * step,
        timed_steps=len(run["timed"]),
        compile_s=max(0.0, run["first"] - step),
        throughput=run["items"] / step,
        unit=run["unit"],
        loss=run["loss"],
        train_tflops=flops / step / 1e12,
        peak_memory_gb=run["memory"] / 2**30,
    )
    if config.peak_tflops:
        result["mfu"] = result["train_tflops"] / config.peak_tflops
    return result


class _StepClock(keras.callbacks.Callback):
    """Wall time of every train batch, the loss read back so no step ends before its work does."""

    def __init__(self):
        super().__init__()
        self.durations, self.last_loss = [], None

    def on_train_begin(self, logs=None):
        self.durations, self.last_loss = [], None
        self._last = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.last_loss = float(logs["loss"])  # a host read: waits for the step's device work
        now = time.perf_counter()
        self.durations.append(now - self._last)
        self._last = now


def _repeat(batch):
    while True:
        yield batch


def _build(case, config):
    """(model, one batch (x, y), items per step, unit) for `case`."""
    rng = np.random.default_rng(0)
    if case.startswith("txl"):
        model = _transformer_xl(case.split("_")[1], config)
        vocab = model.get_config()["vocab_size"]
        ids = rng.integers(0, vocab, (config.txl_batch, config.txl_segment + 1)).astype("int32")
        return model, (ids[:, :-1], ids[:, 1:]), config.txl_batch * config.txl_segment, "tokens/s"
    images = rng.normal(size=(config.vit_batch, 32, 32, 3)).astype("float32")
    labels = rng.integers(0, 10, config.vit_batch).astype("int32")
    if case.startswith("peer"):
        model = peer_vit(config.vit_depth, normalize_first=case == "peer_pre")
    else:
        from keras_tse import zoo

        model = zoo.vit(depth=config.vit_depth, norm=case.split("_")[1])
    return model, (images, labels), config.vit_batch, "images/s"


def _transformer_xl(norm, config):
    from keras_tse.zoo import from_preset

    preset = "transformer_xl8_small" if config.txl_small else f"transformer_xl60_wt103_{norm}"
    return from_preset(
        preset,
        depth=config.txl_depth,
        norm=norm,
        batch_size=config.txl_batch,
        segment_len=config.txl_segment,
        mem_len=config.txl_segment,
    )


def peer_vit(depth, normalize_first=False, hidden_dim=192, ffn_dim=384, num_heads=8, num_classes=10):
    """Our ViT's embedding and head around a stack of KerasHub `TransformerEncoder` blocks (the peer)."""
    import keras_hub

    from keras_tse.layers import PatchEmbedding

    images = keras.Input((32, 32, 3), name="images")
    x = PatchEmbedding(32, 4, hidden_dim, name="patch_embedding")(images)
    for i in range(depth):
        x = keras_hub.layers.TransformerEncoder(
            ffn_dim, num_heads, layer_norm_epsilon=1e-5, normalize_first=normalize_first, name=f"block_{i:02d}"
        )(x)
    x = keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")(x)
    logits = keras.layers.Dense(num_classes, name="head")(x[:, 0])
    return keras.Model(images, logits, name=f"keras_hub_vit{depth}_{'pre' if normalize_first else 'post'}")


def _task(case):
    from keras_tse.training.tasks import IMAGE_CLASSIFICATION, LANGUAGE_MODELLING

    return LANGUAGE_MODELLING if case.startswith("txl") else IMAGE_CLASSIFICATION


def _probe_seconds(model, images):
    """Seconds of one TokenSimilarityMetric measurement on (up to) 64 probe images (after a compiling one)."""
    from keras_tse.analysis.similarity import block_outputs_model, measure_blocks

    probe = block_outputs_model(model)
    measure_blocks(probe, images[:64])  # compiles
    start = time.perf_counter()
    measure_blocks(probe, images[:64])
    return time.perf_counter() - start


def _train_flops(case, config, model):
    """Matrix-multiply FLOPs of one train step: 3 x forward (see the module docstring)."""
    if case.startswith("txl"):
        c = model.get_config()
        return 3 * txl_forward_flops(
            c["depth"],
            c["batch_size"],
            c["segment_len"],
            c["mem_len"],
            c["hidden_dim"],
            c["num_heads"] * c["head_dim"],
            c["ffn_dim"],
            c["vocab_size"],
        )
    return 3 * vit_forward_flops(model, config.vit_batch)


def vit_forward_flops(model, batch):
    """Forward matmul FLOPs of a ViT laid out as `zoo.vit` lays it out (the peer too): patch conv, 4
    projections, 2 attention products, FFN, head. The sizes are read from the model's layers."""
    embedding = model.get_layer("patch_embedding").get_config()
    hidden, patch = embedding["hidden_dim"], embedding["patch_size"]
    patches = (embedding["image_size"] // patch) ** 2
    tokens = patches + int(embedding["use_class_token"])
    blocks = [layer.get_config() for layer in model.layers if layer.name.startswith("block_")]
    ffn = blocks[0].get("ffn_dim", blocks[0].get("intermediate_dim"))  # ours, KerasHub's TransformerEncoder
    channels, classes = model.inputs[0].shape[-1], model.get_layer("head").units
    return vit_matmul_flops(batch, len(blocks), patches, tokens, hidden, ffn, patch, channels, classes)


def vit_matmul_flops(batch, depth, patches, tokens, hidden, ffn, patch, channels, classes):
    """`vit_forward_flops` from the sizes (the timm peer's count); `tokens` counts a class token."""
    per_token_block = 2 * (4 * hidden * hidden + 2 * hidden * ffn) + 2 * 2 * tokens * hidden
    patch_conv = 2 * patches * patch * patch * channels * hidden
    head = 2 * hidden * classes
    return batch * (depth * tokens * per_token_block + patch_conv + head)


def txl_forward_flops(depth, batch, segment, memory, hidden, inner, ffn, vocab):
    """Forward matmul FLOPs of Transformer-XL: qkv/output/FFN per token, content and position scores
    and the weighted sum over `segment + memory` keys, the position projection per segment, and the
    tied output layer over the whole vocabulary (the adaptive softmax computes every cluster's
    logits)."""
    keys = segment + memory
    per_token_block = 2 * (4 * hidden * inner + 2 * hidden * ffn) + 3 * 2 * keys * inner
    position_projection = 2 * keys * hidden * inner
    return depth * (batch * segment * per_token_block + position_projection) + batch * segment * 2 * hidden * vocab


def _trainable_params(model):
    return int(sum(np.prod(v.shape) for v in model.trainable_variables))


def reset_peak_memory():
    """Start a new peak where the backend allows it (PyTorch on a GPU)."""
    if keras.backend.backend() == "torch":
        torch = importlib.import_module("torch")
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()


def peak_memory_bytes():
    """The allocator's peak on a GPU, else this process's peak resident set (see the docstring)."""
    backend = keras.backend.backend()
    if backend == "torch":
        torch = importlib.import_module("torch")
        if torch.cuda.is_available():
            return torch.cuda.max_memory_allocated()
    elif backend == "jax":
        device = importlib.import_module("jax").local_devices()[0]
        stats = device.memory_stats() if device.platform != "cpu" else None
        if stats and "peak_bytes_in_use" in stats:
            return stats["peak_bytes_in_use"]
    elif backend == "tensorflow":
        tf = importlib.import_module("tensorflow")
        if tf.config.list_logical_devices("GPU"):
            return tf.config.experimental.get_memory_info("GPU:0")["peak"]
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


# --- the parent: run every case, print the table and the ratios ---------------------------------


def run_bench(config, out=None, log=print):
    """Run the cases of `config` in child processes; returns the list of result dicts.

    By default one child per model family (the ViT cases, whose ratios the speed card bounds, time in
    turns in one process; measured on the 2-core CPU, the same case in two fresh processes differed
    by up to 8% in median step time while its steps within one process spread by under 5%). With
    `isolate`, one child per case: each peak memory is then that case's alone (JAX reports a peak
    over the life of the process). The timm and torch.nn cases are a family of their own (plain PyTorch).
    """
    families = [[c for c in config.cases if c in family] for family in (VIT_CASES, PLAIN_TORCH_CASES, TXL_CASES)]
    groups = [[c] for c in config.cases] if config.isolate else [f for f in families if f]
    deadline = time.monotonic() + config.budget_s if config.budget_s else None
    results = []
    for group in groups:
        log(f"  {', '.join(group)} ...")
        results += _run_child(group, config, deadline)
    for line in format_results(results, config):
        log(line)
    if out:
        run_files.write_json(out, {"config": dataclasses.asdict(config), "results": results}, indent=1)
        log(f"wrote {out}")
    return results


def _run_child(cases, config, deadline=None):
    """Results of `cases` from a child process; a child over the time budget is stopped (one line each)."""
    timeout = None if deadline is None else deadline - time.monotonic()
    if timeout is not None and timeout <= 0:
        return [dict(case=case, error=f"not run: the time budget of {config.budget_s:g} s was spent") for case in cases]
    plain_torch = cases[0] in PLAIN_TORCH_CASES
    module = "keras_tse.training.timm_peer" if plain_torch else "keras_tse.training.benchmark"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    if plain_torch:  # plain PyTorch: Keras (imported for the settings) must not load another framework beside it
        env["KERAS_BACKEND"] = "torch"
    try:
        process = subprocess.run(
            [sys.executable, "-m", module, ",".join(cases), json.dumps(dataclasses.asdict(config))],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return [dict(case=case, error=f"stopped: over the time budget of {config.budget_s:g} s") for case in cases]
    lines = [line for line in process.stdout.splitlines() if line.startswith("[")]
    if process.returncode or not lines:
        error = (process.stderr.strip().splitlines() or ["no output"])[-1]
        return [dict(case=case, error=error) for case in cases]
    return json.loads(lines[-1])


def ratios(results, field="step_ms"):
    """Name -> ratio of `field` (the step time; or `compile_s`) of the pairs the speed card reports, for
    those present in `results`."""
    step = {r["case"]: r[field] for r in results if field in r}
    return {name: step[a] / step[b] for name, (a, b) in RATIOS.items() if a in step and step.get(b)}


# The speed card's ratios, name -> (case, the case it is divided by): ours against each peer's case of the
# same layout, then each model's other layouts against its post-norm.
_PEER_LABELS = {"keras_hub": "peer", "timm": "timm", "torch": "torch.nn"}


def _layout(case):
    return case.partition("_")[2]  # "peer_pre" -> "pre"


RATIOS = {
    f"ours/{_PEER_LABELS[peer]} {_layout(case)}-norm (vit_{_layout(case)} / {case})": (f"vit_{_layout(case)}", case)
    for peer, cases in PEERS.items()
    for case in cases
}
RATIOS.update(
    (f"{model} {_layout(case)} / post", (case, f"{model.lower()}_post"))
    for model, family in (("ViT", VIT_CASES), ("TXL", TXL_CASES))
    for case in sorted(c for c in family if c.startswith(model.lower()) and _layout(c) != "post")
)


BACKEND_NAMES = {"jax": "JAX", "tensorflow": "TensorFlow", "torch": "PyTorch (eager)"}


def markdown_table(results_by_backend):
    """The README's table: one row per backend from its `--out` JSON results (throughput, ratios)."""
    lines = [
        "| backend | ViT post | ViT pre | ViT deescalate | KerasHub post | KerasHub pre | ours/peer post "
        "| ours/peer pre | deesc./post | TXL post / pre / deesc. (tokens/s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for backend, results in results_by_backend.items():
        rate = {r["case"]: r["throughput"] for r in results if "throughput" in r}
        ratio = ratios(results)
        images = " | ".join(
            f"{rate[c]:.0f}" for c in ("vit_post", "vit_pre", "vit_deescalate", "peer_post", "peer_pre")
        )
        steps = " | ".join(
            f"{ratio[n]:.3f}"
            for n in (
                "ours/peer post-norm (vit_post / peer_post)",
                "ours/peer pre-norm (vit_pre / peer_pre)",
                "ViT deescalate / post",
            )
        )
        tokens = " / ".join(f"{rate[c]:,.0f}" for c in ("txl_post", "txl_pre", "txl_deescalate"))
        lines.append(f"| {BACKEND_NAMES.get(backend, backend)} | {images} | {steps} | {tokens} |")
    return "\n".join(lines)


def cases_table(results):
    """One row per case of one `--out` JSON (any peers, any device), then its step-time ratios."""
    lines = [
        "| case | framework | device | dtype | params | batch | step ms | throughput | compile s | peak GiB |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['case']} | failed: {r['error']} | | | | | | | | |")
            continue
        framework = r["backend"] if r["case"] in PLAIN_TORCH_CASES else f"Keras on {r['backend']}"
        lines.append(
            f"| {r['case']} | {framework} | {r['device']} | {r['dtype']} | {r['params']:,} | {r['batch']} "
            f"| {r['step_ms']:.1f} | {r['throughput']:,.0f} {r['unit']} | {r['compile_s']:.1f} "
            f"| {r['peak_memory_gb']:.2f} |"
        )
    ratio = ratios(results)
    if ratio:
        lines += [
            "",
            "Step-time ratios (below 1: the first is faster): "
            + "; ".join(f"{name} {value:.3f}" for name, value in ratio.items())
            + ".",
        ]
    compiled = {name: value for name, value in ratios(results, "compile_s").items() if name.startswith("ours/")}
    if any(r.get("compile_s", 0) >= 1 for r in results):  # eager runs' "compile" is start-up noise
        lines.append(
            "Compile-time ratios: " + "; ".join(f"{name} {value:.1f}x" for name, value in compiled.items()) + "."
        )
    return "\n".join(lines)


def format_results(results, config=None):
    first = next((r for r in results if "device" in r), None)
    lines = []
    if first:
        lines.append(
            f"{time.strftime('%Y-%m-%d')}, backend {first['backend']}, {first['device']}, dtype {first['dtype']}, "
            f"jit_compile={config.jit_compile if config else 'auto'}, median of {first.get('timed_steps')} "
            f"timed steps per case after warm-up, in turns"
        )
    header = (
        f"{'case':<15}{'params':>13}{'batch':>6}{'step ms':>10}{'throughput':>20}{'compile s':>11}"
        f"{'TFLOP/s':>9}{'MFU':>7}{'peak GiB':>10}"
    )
    lines.append(header)
    for r in results:
        if "error" in r:
            lines.append(f"{r['case']:<15} failed: {r['error']}")
            continue
        mfu = f"{r['mfu']:.1%}" if "mfu" in r else "-"
        lines.append(
            f"{r['case']:<15}{r['params']:>13,}{r['batch']:>6}{r['step_ms']:>10.1f}"
            f"{r['throughput']:>11,.0f} {r['unit']:<8}{r['compile_s']:>11.1f}{r['train_tflops']:>9.3f}"
            f"{mfu:>7}{r['peak_memory_gb']:>10.2f}"
        )
    lines.append("")
    for name, value in ratios(results).items():
        lines.append(f"step-time ratio {name}: {value:.3f}")
    for r in results:
        if "metric_overhead" in r:
            lines.append(
                f"TokenSimilarityMetric at its default frequency (one probe, {r['probe_s']:.2f} s, per "
                f"{CIFAR_STEPS_PER_EPOCH}-step epoch): {r['metric_overhead']:.2%} of step time"
            )
    return lines


def _child(argv):
    cases, settings = argv
    config = BenchConfig(**{**json.loads(settings), "cases": tuple(cases.split(","))})
    print(json.dumps(run_cases(config.cases, config)), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1:])
