"""`keras-tse demo`: the paper's claim on real data, offline, on a CPU, in minutes.

A deep ViT on scikit-learn's 8x8 handwritten digits (1,438 training and 359 test images, shipped
inside keras_tse) in the paper's three variants: post-norm (Algorithm 1), pre-norm (eq. 19) and
post-norm with de-escalation at each block output (eq. 21, tau = 1). It prints the token similarity
after each block at initialisation, trains each variant with the same settings, and prints the
final training loss and test accuracy it measured, with the Figure-6-style loss curves and the
per-block similarity plots written under `out`.
"""

import dataclasses
import json
import os
import time

import keras
import numpy as np

from keras_tse import _checks, data, run_files
from keras_tse.analysis.similarity import token_similarity_profile
from keras_tse.norms import PAPER_NORMS
from keras_tse.training import TrainConfig, fit_variant, plot_losses, read_history
from keras_tse.training.runner import stopped_line
from keras_tse.zoo import from_preset

NORMS = PAPER_NORMS  # the demo compares the paper's three


@dataclasses.dataclass
class DemoConfig:
    preset: str = "vit24_digits"  # depth 24, hidden 64, 4 heads, FFN 128, 2x2 patches (17 tokens), torch init
    depth: int = 24
    epochs: int = 10
    batch_size: int = 64
    learning_rate: float = 3e-4  # one rate for all three variants: the comparison is like for like
    # Three training seeds (init and data order): the headline is a mean and a range, which one draw cannot
    # flip. The train/test split is the same for every run (split_seed).
    seeds: tuple = (0, 1, 2)
    split_seed: int = 0
    probe_size: int = 64

    @classmethod
    def quick(cls, **overrides):
        """The first run: every variant once (seed 0), 12 blocks for 3 epochs, the same data.

        Half the depth halves the compile time, most of a short run on a CPU (measured on 2 cores, JAX:
        82 s against 148 s at depth 24); post-norm's similarity after the last block at init is
        already 0.72, and the order of the three is the full demo's.
        """
        return cls(**{"depth": 12, "epochs": 3, "seeds": (0,), **overrides})

    def __post_init__(self):
        for name in ("depth", "epochs", "batch_size", "probe_size"):
            setattr(self, name, _checks.positive_int(name, getattr(self, name)))
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"`seeds` must be distinct integers, at least one. Received: seeds={self.seeds!r}")


def run_demo(out="runs/demo", config=None, verbose=2):
    """Train the three variants, once per seed, into `out/<norm>/seed_<s>/`; returns the results dict.

    `out` must be new, empty, or a demo folder of the same settings (`run_files.claim_folder`): a
    finished run there is read back, not trained again, and nothing of anyone else's is touched.

    The results (every run's numbers and the settings) also go to `out/demo.json`, from which
    `markdown_table` prints the README's table. `verbose` is `fit`'s: 2 (default) adds fit's line
    per epoch to the one line per run, 1 its progress bar, 0 nothing more.
    """
    config = config or DemoConfig()
    # `out` is the user's until proven ours; a rerun of these settings (and backend: demo.json reports
    # it) reads the finished runs back, a rerun of others is refused naming the setting
    settings = {**dataclasses.asdict(config), "backend": keras.backend.backend()}
    run_files.claim_folder(
        out, "demo", settings, writes=(*NORMS, "plots", "demo.json"), marker="demo.json", settings_before=_settings_in
    )
    start = time.perf_counter()
    digits = data.get_dataset("digits")
    (x_train, y_train), (x_test, y_test) = digits.load_data(seed=config.split_seed)
    scale = digits.normalization()
    test = data.image_dataset(x_test, y_test, config.batch_size, pipeline="numpy", **scale)
    probe = data.normalized(x_test[: config.probe_size], **scale)
    # every weight decayed: the rule of the runs behind the committed demo.json, so the command reproduces them
    train_config = TrainConfig(
        epochs=config.epochs,
        batch_size=config.batch_size,
        learning_rate=config.learning_rate,
        weight_decay_rule="all",
    )
    steps = -(-len(y_train) // config.batch_size)

    runs, histories = {norm: [] for norm in NORMS}, {norm: [] for norm in NORMS}
    for norm in NORMS:
        for seed in config.seeds:
            keras.utils.set_random_seed(seed)  # init, and any Keras-side randomness
            # NumPy batches whether or not TensorFlow is installed, a fresh stream per run: every
            # variant sees the same order for a seed.
            train = data.image_dataset(
                x_train, y_train, config.batch_size, shuffle=True, seed=seed, pipeline="numpy", **scale
            )
            model = from_preset(config.preset, norm=norm, depth=config.depth, name=f"digits_vit{config.depth}_{norm}")
            profile = token_similarity_profile(model, probe)
            print(
                f"{norm} seed {seed}: {model.count_params():,} parameters, {config.epochs} epoch"
                f"{'s' if config.epochs > 1 else ''} ...",
                flush=True,
            )
            run_dir = os.path.join(out, norm, f"seed_{seed}")
            summary = fit_variant(
                model,
                train,
                test,
                run_dir,
                train_config,
                probe,
                steps,
                extra_config={"demo": dataclasses.asdict(config), "seed": seed, "backend": keras.backend.backend()},
                checkpoints=False,
                verbose=verbose,
            )
            if "stopped" in summary:  # no finished numbers for the table: one line, exit status 3
                raise _checks.TrainingStopped(f"{norm} seed {seed} {stopped_line(summary)}")
            runs[norm].append(
                {
                    "seed": seed,
                    "tsim_init": [round(float(v), 6) for v in profile],
                    **{k: summary[k] for k in RESULT_KEYS},
                }
            )
            histories[norm].append(read_history(os.path.join(run_dir, "history.csv")))
    results = {
        "config": dataclasses.asdict(config),
        "backend": keras.backend.backend(),
        "keras": keras.__version__,
        "runs": runs,
    }
    write_json(os.path.join(out, "demo.json"), results)
    plot_losses(
        histories,
        os.path.join(out, "plots", "loss_curves.png"),
        f"{config.depth}-block ViT on 8x8 digits (keras-tse demo; {len(config.seeds)} seeds: mean, band = range)",
    )
    print(report(results))
    print(
        f"\n{time.perf_counter() - start:.0f} s in all; runs under {out}/, results in {out}/demo.json, "
        f"curves in {out}/plots/loss_curves.png"
    )
    return results


RESULT_KEYS = ("train_loss", "test_loss", "test_accuracy")


def _settings_in(out):
    """The settings of the demo whose results `out/demo.json` holds (a folder made before manifests)."""
    with open(os.path.join(out, "demo.json")) as f:
        results = json.load(f)
    return {**results.get("config", {}), "backend": results.get("backend")}


def spread(values):
    """(mean, min, max) of a list of numbers."""
    values = np.asarray(values, dtype="float64")
    return float(values.mean()), float(values.min()), float(values.max())


def report(results):
    """The demo's printout: similarity at init per block, and each variant's mean and range over seeds."""
    config = results["config"]
    return "\n".join(
        [
            "",
            f"Token similarity after each block at initialisation (Definition 1; {config['probe_size']} test digits, "
            f"mean over {len(config['seeds'])} seed{'s' if len(config['seeds']) > 1 else ''}):",
            similarity_table(results),
            "",
            f"After {config['epochs']} epochs (AdamW, lr {config['learning_rate']:g}, "
            f"batch {config['batch_size']}, seeds "
            f"{', '.join(map(str, config['seeds']))}, backend {results['backend']}): mean [min, max] over seeds",
            markdown_table(results),
        ]
    )


def similarity_table(results):
    """t_sim after blocks 1, 2, 4, 8, depth/2 and depth at initialisation, seed mean, per variant."""
    runs = results["runs"]
    depth = len(runs[NORMS[0]][0]["tsim_init"])
    shown = sorted({0, 1, 3, 7, depth // 2 - 1, depth - 1} & set(range(depth)))
    lines = ["| block | " + " | ".join(NORMS) + " |", "|---:|" + "---:|" * len(NORMS)]
    for b in shown:
        means = (spread([r["tsim_init"][b] for r in runs[n]])[0] for n in NORMS)
        lines.append(f"| {b + 1} | " + " | ".join(f"{m:.4f}" for m in means) + " |")
    return "\n".join(lines)


def markdown_table(results):
    """The README's demo table: per variant, t_sim after the last block at init and the mean [range] of each result."""
    runs = results["runs"]
    lines = [
        "| variant | t_sim after the last block at init | train loss | test loss | test accuracy |",
        "|---|---:|---:|---:|---:|",
    ]
    for norm in NORMS:
        tsim = spread([r["tsim_init"][-1] for r in runs[norm]])[0]
        cells = []
        for key in RESULT_KEYS:
            mean, low, high = spread([r[key] for r in runs[norm]])
            scale, unit = (100, "%") if key == "test_accuracy" else (1, "")
            digits = 2 if unit else 4
            cells.append(f"{mean * scale:.{digits}f}{unit} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]")
        lines.append(f"| {norm} | {tsim:.4f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path, payload):
    """Written whole (keras_tse.run_files): never half a file."""
    run_files.write_json(path, payload, indent=1)
