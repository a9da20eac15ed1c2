"""`keras-tse demo`: the paper's claim on real data, offline, on a CPU, in minutes.

A deep ViT on scikit-learn's 8x8 handwritten digits (1,438 training and 359 test images, shipped
inside scikit-learn) in the paper's three variants: post-norm (Algorithm 1), pre-norm (eq. 19) and
post-norm with de-escalation at each block output (eq. 21, tau = 1). It prints the token similarity
after each block at initialisation, trains each variant with the same settings, and prints the
final training loss and test accuracy it measured, with the Figure-6-style loss curves and the
per-block similarity plots written under `out`.
"""

import dataclasses
import os
import shutil
import time

import keras

from keras_tse import data
from keras_tse.similarity import token_similarity_profile
from keras_tse.training import TrainConfig, fit_variant, plot_losses, read_history, summary_line
from keras_tse.zoo import from_preset

NORMS = ("post", "pre", "deescalate")


@dataclasses.dataclass
class DemoConfig:
    preset: str = "vit24_digits"  # depth 24, hidden 64, 4 heads, FFN 128, 2x2 patches (17 tokens)
    depth: int = 24
    epochs: int = 20
    batch_size: int = 64
    learning_rate: float = 3e-4  # one rate for all three variants: the comparison is like for like
    seed: int = 0
    probe_size: int = 64


def run_demo(out="runs/demo", config=None, verbose=0):
    """Train the three variants into `out/<norm>/`; returns {norm: summary}.

    `verbose` is `fit`'s: 0 (default) prints one line per variant, 1 or 2 `fit`'s progress too.
    """
    config = config or DemoConfig()
    start = time.perf_counter()
    (x_train, y_train), (x_test, y_test) = data.load_digits(seed=config.seed)
    # NumPy batches whether or not TensorFlow is installed: the same numbers on every install.
    train = data.image_dataset(x_train, y_train, config.batch_size, shuffle=True, seed=config.seed, pipeline="numpy")
    test = data.image_dataset(x_test, y_test, config.batch_size, pipeline="numpy")
    probe = x_test[: config.probe_size]
    train_config = TrainConfig(epochs=config.epochs, batch_size=config.batch_size,
                               learning_rate=config.learning_rate)
    steps = -(-len(y_train) // config.batch_size)

    profiles, summaries, histories = {}, {}, {}
    for norm in NORMS:
        keras.utils.set_random_seed(config.seed)
        model = from_preset(config.preset, norm=norm, depth=config.depth, name=f"digits_vit{config.depth}_{norm}")
        profiles[norm] = token_similarity_profile(model, probe)
        print(f"{norm}: {model.name}, {model.count_params():,} parameters, {config.epochs} epochs ...", flush=True)
        run_dir = os.path.join(out, norm)
        shutil.rmtree(run_dir, ignore_errors=True)  # the demo always measures afresh
        summaries[norm] = fit_variant(model, train, test, run_dir, train_config, probe, steps,
                                      extra_config={"demo": dataclasses.asdict(config),
                                                    "backend": keras.backend.backend()},
                                      checkpoints=False, verbose=verbose)
        histories[norm] = read_history(os.path.join(run_dir, "history.csv"))
    plot_losses(histories, os.path.join(out, "plots", "loss_curves.png"),
                f"{config.depth}-block ViT on 8x8 digits (keras-tse demo)")
    print(report(profiles, summaries, config, time.perf_counter() - start))
    return summaries


def report(profiles, summaries, config, seconds):
    depth = len(next(iter(profiles.values())))
    shown = sorted({0, 1, 3, 7, depth // 2, depth - 1} & set(range(depth)))
    lines = [
        "",
        f"Token similarity after each block at initialisation (Definition 1; mean over {config.probe_size} "
        f"test digits):",
        "block  " + "  ".join(f"{n:>10}" for n in NORMS),
    ]
    for b in shown:
        lines.append(f"{b + 1:>5}  " + "  ".join(f"{profiles[n][b]:10.4f}" for n in NORMS))
    lines += [
        "",
        f"After {config.epochs} epochs (AdamW, lr {config.learning_rate:g}, batch {config.batch_size}, "
        f"seed {config.seed}, backend {keras.backend.backend()}):",
        f"{'variant':>11}  {'train loss':>10}  {'test loss':>9}  {'test acc':>8}",
    ]
    for norm in NORMS:
        s = summaries[norm]
        lines.append(f"{norm:>11}  {s['train_loss']:10.4f}  {s['test_loss']:9.4f}  {s['test_accuracy']:8.2%}")
    lines += ["", *(summary_line(n, summaries[n]) for n in NORMS), f"\n{seconds:.0f} s in all"]
    return "\n".join(lines)
