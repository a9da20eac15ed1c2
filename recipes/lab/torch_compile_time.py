"""Where does `jit_compile=True` spend its time on the PyTorch backend, whole model or block by block?

Keras's `model.compile(jit_compile=True)` on the PyTorch backend wraps its train step in
`torch.compile` (mode `whole_model` here): on a CPU a zoo ViT-12 of width 32 then needs minutes for
two epochs of two batches that run in about a second eagerly. keras_tse's `jit_compile=True`
compiles each block instead, one compiled function shared by the blocks (`blocks`,
`keras_tse.compile_blocks`). This measures each mode in a fresh process with the persistent
compile cache off: the fit, wall time to the end of every batch, and, from dynamo's own records
(`torch._dynamo.utils.compile_times`, `counters`), how many frames dynamo compiled, how long it spent
tracing Python bytecode, how long inductor spent generating code, and whether dynamo reached its
recompile limit; then the median of ten more steps, compiled by then.

    KERAS_BACKEND=torch python -m recipes.lab.torch_compile_time --out zoo/figures/torch_compile.json
    KERAS_BACKEND=torch python -m recipes.lab.torch_compile_time --modes eager,blocks --depth 48 \
        --out zoo/figures/torch_block_compile_48.json

The model and data are the depth study's cell shape (8x8x1 images, 2x2 patches, width 32, 4 heads,
FFN 64, post-norm); the numbers are random, since only the time is measured.
"""

import argparse
import logging
import os
import sys
import time

import numpy as np

from recipes.lab import fresh_processes

MODES = ("eager", "blocks", "whole_model")  # Keras's jit_compile: "auto", then keras_tse's True and "whole_model"


def dynamo_record():
    """Dynamo's own timings (what `torch._dynamo.utils.compile_times` prints) and event counters."""
    import torch

    times = torch._dynamo.utils.compilation_time_metrics  # phase -> one duration per compile
    counters = torch._dynamo.utils.counters
    return {
        "frames_compiled": len(times.get("_compile.compile_inner", [])),
        "dynamo_total_s": sum(times.get("_compile.compile_inner", [])),
        "bytecode_tracing_s": sum(times.get("bytecode_tracing", [])),
        "inductor_codegen_s": sum(times.get("compile_fx_inner", [])),
        "graph_breaks": int(sum(counters["graph_break"].values())),
        "counters": {k: dict(v) for k, v in counters.items() if k in ("frames", "stats")},
    }


class LimitWarnings(logging.Handler):
    """Counts dynamo's "hit config.recompile_limit" warnings (it keeps no counter of them)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record):
        self.count += "hit config." in record.getMessage()


def measure(mode, depth, epochs, batches, timed_steps=10):
    import keras

    import keras_tse
    from keras_tse import zoo
    from keras_tse.training.compile_cache import use_compile_cache

    use_compile_cache("off")  # the compile itself is what is measured: inductor starts from an empty cache
    keras.utils.set_random_seed(0)
    model = zoo.vit(
        depth=depth, norm="post", image_size=8, patch_size=2, channels=1, hidden_dim=32, ffn_dim=64, num_heads=4
    )
    model.compile(
        keras.optimizers.AdamW(1e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=mode == "whole_model",
    )
    if mode == "blocks":
        keras_tse.compile_blocks(model)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64 * batches, 8, 8, 1)).astype("float32")
    y = np.arange(64 * batches) % 10
    ends, limits = [], LimitWarnings()
    logging.getLogger("torch._dynamo.convert_frame").addHandler(limits)

    class BatchEnds(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ends.append(time.perf_counter() - start)

    start = time.perf_counter()
    history = model.fit(x, y, batch_size=64, epochs=epochs, shuffle=False, verbose=0, callbacks=[BatchEnds()])
    result = {"fit_s": time.perf_counter() - start, "batch_ends_s": ends, "loss": history.history["loss"]}
    # then the step itself, compiled by now: one more epoch of `timed_steps` batches, each timed
    ends, start = [], time.perf_counter()
    more = np.tile(x[:64], (timed_steps, 1, 1, 1)), np.tile(y[:64], timed_steps)
    model.fit(*more, batch_size=64, epochs=1, shuffle=False, verbose=0, callbacks=[BatchEnds()])
    result["later_step_s"] = float(np.median(np.diff([0.0, *ends])))
    if mode == "eager":
        return result
    return {**result, **dynamo_record(), "recompile_limit_warnings": limits.count}


def run(args):
    import keras

    if keras.backend.backend() != "torch":
        raise SystemExit(
            f"This measures torch.compile: run it with KERAS_BACKEND=torch (got {keras.backend.backend()!r})."
        )
    argv = ["--depth", str(args.depth), "--epochs", str(args.epochs), "--batches", str(args.batches)]
    results = fresh_processes.measure_apart(os.path.abspath(__file__), args.modes, argv)
    import torch

    settings = {k: getattr(args, k) for k in ("depth", "epochs", "batches")}
    versions = {"keras": keras.__version__, "torch": torch.__version__}
    return {"settings": settings, "backend": keras.backend.backend(), **versions, **results}


def markdown_table(result):
    s = result["settings"]
    steps = s["epochs"] * s["batches"]
    modes = [mode for mode in MODES if mode in result]
    lines = [
        f"| ViT-{s['depth']}, width 32, {s['epochs']} epochs x {s['batches']} batches of 64 | fit (s) "
        "| first step (s) | later step, median (s) | loss, last epoch |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode in modes:
        r = result[mode]
        first, later = r["batch_ends_s"][0], r["later_step_s"]
        lines.append(f"| {mode} | {r['fit_s']:.1f} | {first:.2f} | {later:.3f} | {r['loss'][-1]:.4f} |")
    eager = result["eager"]
    for mode in modes[1:]:
        r = result[mode]
        lines.append(
            f"\n`{mode}`, {steps} steps: dynamo compiled {r['frames_compiled']} frames in "
            f"{r['dynamo_total_s']:.1f} s, of which tracing Python bytecode took "
            f"{r['bytecode_tracing_s']:.1f} s and inductor's code generation "
            f"{r['inductor_codegen_s']:.1f} s; {r['graph_breaks']} graph breaks, "
            f"{r['recompile_limit_warnings']} recompile-limit warnings. "
            f"The fit took {r['fit_s'] / eager['fit_s']:.0f}x the eager one; a later step "
            f"takes {r['later_step_s'] / eager['later_step_s']:.2f}x an eager one."
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--modes",
        type=lambda text: tuple(text.split(",")),
        default=MODES,
        help=f"comma-separated, of {', '.join(MODES)} (default: all)",
    )
    parser.add_argument("--depth", type=int, default=12, help="blocks (default 12)")
    parser.add_argument("--epochs", type=int, default=2, help="epochs (default 2)")
    parser.add_argument("--batches", type=int, default=2, help="batches of 64 per epoch (default 2)")

    def measure_mode(mode, args):
        return measure(mode, args.depth, args.epochs, args.batches)

    return fresh_processes.main(parser, MODES, measure_mode, run, markdown_table, argv)


if __name__ == "__main__":
    sys.exit(main())
