"""`keras-tse sweep`: a resumable grid over depth x norm x tau x learning rate x seed (the depth study).

Every cell trains one ViT (`zoo.vit`, the class-token model) for a fixed number of steps on an
offline dataset (scikit-learn's 8x8 digits: 1,437 training and 360 validation images, 4x4 patches
of 2x2 pixels) and writes one row to `sweep.csv` as soon as it finishes:

- `final_loss` (mean training loss over the last 10% of steps), `best_loss` (lowest mean over any
  window of 10 steps), `val_accuracy` after the last step;
- `diverged` (a non-finite loss; training stops there), `steps_to_threshold` (first step whose
  10-step mean is at most `loss_threshold`, empty if never);
- `tsim_init`, `tsim_end` (token similarity after each block, Definition 1, on 64 validation
  images, at initialisation and at the end) and `grad_init` (norm of the loss gradient w.r.t. each
  block's weights on the first batch), each as `;`-separated values, first block first;
- `wall_s`, the cell's wall time (build, measurements and training).

Each cell trains through the runner (`keras_tse.training.runner.train_in_folder`), the loop every
recipe uses, in its own run folder `cells/<cell>/` (config, history, per-block similarity, the last
checkpoint, the summary with the cell's measures). The grid is a study of the lab's engine
(`study_of`: an arm is a depth, norm, tau, initializer and the training settings; every seed runs at
every learning rate), so a rerun of the same command skips every cell already in `sweep.csv`, drops a
row a kill cut short, and takes a finished cell folder's stored measures: an interrupted sweep loses at
most the cell it was in. `plots/` gets the final loss against depth per norm (mean over seeds, bars from the lowest
to the highest seed) and a depth x norm heatmap, one panel per learning rate.
"""

import dataclasses
import functools
import os
import time

import keras
import numpy as np

from keras_tse import _checks, data, run_files, zoo
from keras_tse.analysis.gradients import block_gradient_norms
from keras_tse.layers import initializers
from keras_tse.layouts import get_layout, layout_names
from keras_tse.norms import BASELINE_NORMS, PAPER_NORMS
from keras_tse.training.runner import train_in_folder
from keras_tse.training.tasks import IMAGE_CLASSIFICATION
from recipes.lab import engine
from recipes.lab.engine import read_rows  # noqa: F401  (the cards read sweep.csv through it)

KEY = ("depth", "norm", "tau", "initializer", "learning_rate", "seed", "steps", "batch_size", "hidden_dim")


@dataclasses.dataclass
class SweepConfig:
    """The grid and the per-cell training; the defaults are the committed CPU study (zoo/depth_study.md)."""

    # The committed grid: depths where post-norm trains (12), is marginal and fails (24, 48).
    depths: tuple = (12, 24, 48)
    norms: tuple = PAPER_NORMS
    # De-escalation strengths (eq. 21); the other norms have no tau. 1 is the paper's setting (Sec. 3.3);
    # 0.5 sits just above the 0.4 at which the paper's Fig. 5 sees TSE eliminated at init.
    taus: tuple = (1.0, 0.5)
    # "torch": the code the paper's experiments ran on (vit-pytorch); "glorot": Keras' default, the
    # init of the first study. keras_tse.layers.initializers defines both.
    initializers: tuple = ("torch", "glorot")
    learning_rates: tuple = (1e-3, 3e-4, 1e-4)
    seeds: tuple = (0, 1, 2)
    steps: int = 300  # ~13 epochs of the 1,437 digits at batch 64
    batch_size: int = 64
    hidden_dim: int = 32
    num_heads: int = 4
    ffn_dim: int = 64
    weight_decay: float = 0.05
    loss_threshold: float = 0.5  # chance is ln 10 = 2.30
    probe_size: int = 64
    dataset: str = "digits"  # an image set of the data registry (keras_tse.data.list_datasets("images"))

    @classmethod
    def quick(cls, **overrides):
        """Seconds per cell on a CPU: for CI and the resume test."""
        grid = dict(depths=(2, 4), norms=("post", "deescalate", "rezero"), taus=(1.0,), initializers=("torch",))
        grid.update(learning_rates=(1e-3,), seeds=(0,))
        settings = dict(steps=12, batch_size=32, hidden_dim=16, num_heads=2, ffn_dim=32, probe_size=16)
        return cls(**{**grid, **settings, **overrides})

    def __post_init__(self):
        self.norms = _checks.subset_of("norms", self.norms, layout_names())
        _checks.one_of("dataset", self.dataset, data.list_datasets("images", own=False))
        _checks.config_fields(
            self, positive_ints=("steps", "batch_size", "hidden_dim", "num_heads", "ffn_dim", "probe_size")
        )
        if not self.depths:
            raise ValueError(f"`depths` must be positive integers, at least one. Received: depths={self.depths!r}")
        self.depths = tuple(_checks.positive_int("depths", d) for d in self.depths)
        for name in self.initializers:
            initializers.check(name)
        if any(not 0.0 <= t <= 1.0 for t in self.taus):
            raise ValueError(f"Every tau must be in [0, 1]. Received: taus={self.taus!r}")


def arm_cells(config):
    """Each arm of the grid (a depth, norm, tau, initializer and the training settings; tau only varies for
    `deescalate`) as a dict of those key fields; the learning rates and seeds are the plan's."""
    for depth in config.depths:
        for norm in config.norms:
            for tau in config.taus if norm == "deescalate" else (None,):
                for initializer in config.initializers:
                    yield dict(
                        depth=depth,
                        norm=norm,
                        tau="" if tau is None else float(tau),
                        initializer=initializer,
                        steps=config.steps,
                        batch_size=config.batch_size,
                        hidden_dim=config.hidden_dim,
                    )


def cells(config):
    """Every cell of the grid as a dict of the key fields, seed by seed (the order the engine runs them)."""
    for seed in config.seeds:
        for arm in arm_cells(config):
            for learning_rate in config.learning_rates:
                yield {**arm, "learning_rate": float(learning_rate), "seed": seed}


def cell_key(cell):
    """A cell's identity in `sweep.csv` (a cell's dict or a row): its key fields as text."""
    return tuple(str(cell[k]) for k in KEY)


def arm_name(cell):
    """An arm's name from its key fields (a cell's dict or a row of `sweep.csv`)."""
    tau = f"_tau{float(cell['tau']):g}" if cell["tau"] != "" else ""
    return (
        f"depth{int(cell['depth'])}_{cell['norm']}{tau}_{cell['initializer']}_steps{int(cell['steps'])}"
        f"_batch{int(cell['batch_size'])}_hidden{int(cell['hidden_dim'])}"
    )


def study_of(config, out):
    """The grid of `config` as a study of the lab's engine: every seed at every learning rate of every arm,
    one row of `out/sweep.csv` a cell, each cell's run folder under `out/cells/`. The engine schedules the
    cells (seed by seed: a sweep stopped part-way holds whole grids for its first seeds), resumes a killed
    sweep from its rows and drops a row a kill cut short (its cell runs again)."""
    arms = {arm_name(cell): cell for cell in arm_cells(config)}
    plan = engine.Plan(arms=tuple(arms), grid=tuple(map(float, config.learning_rates)), seeds=tuple(config.seeds),
                       bracket=False, every_rate=True)  # fmt: skip
    images = functools.cache(lambda: _images(config.dataset))

    def run_one(runs, arm, learning_rate, seed):
        cell = {**arms[arm], "learning_rate": float(learning_rate), "seed": seed}
        return {**cell, **run_cell(cell, config, images(), cell_folder(runs, cell))}

    return engine.Study(
        name="sweep",
        title="depth x norm x tau x initializer x learning rate x seed on a ViT",
        parts={"all": (plan, "the grid")},
        run_cell=run_one,
        results=os.path.join(out, "sweep.csv"),
        fields=(*KEY, *MEASURES),
        card=None,
        arm_of=arm_name,
    )


def run_sweep(config, out, log=print):
    """Run every cell of `config` not yet in `out/sweep.csv` (the lab's engine, one cell at a time, in this
    process); returns all rows of the file."""
    study = study_of(config, out)
    engine.heal(study.results, study.fields)  # a row cut short by a kill is dropped and its cell run again
    total = len(study.arms()) * len(config.learning_rates) * len(config.seeds)
    todo = len(study.pending(study.arms()))
    log(f"{total} cells, skipping {total - todo} finished, {todo} to run -> {study.results}")
    engine.run(study, study.arms(), out, log=log)
    rows = study.read_rows()
    plot_sweep(rows, os.path.join(out, "plots"))
    return rows


def _images(name):
    """(x, y, x_val, y_val) of a registered image set, normalised as its spec says."""
    spec = data.get_dataset(name)
    (x, y), (x_val, y_val) = spec.load_data()
    scale = spec.normalization()
    return data.normalized(x, **scale), y, data.normalized(x_val, **scale), y_val


def cell_folder(out, cell):
    """The run folder of `cell` under the sweep's `out`: every key field in its name."""
    tau = f"_tau{cell['tau']}" if cell["tau"] != "" else ""
    name = (
        f"depth{cell['depth']}_{cell['norm']}{tau}_{cell['initializer']}_lr{cell['learning_rate']:g}_seed{cell['seed']}"
        f"_steps{cell['steps']}_batch{cell['batch_size']}_hidden{cell['hidden_dim']}"
    )
    return os.path.join(out, "cells", name)


MEASURES = ("final_loss", "best_loss", "val_accuracy", "diverged", "steps_to_threshold")
MEASURES += ("tsim_init", "tsim_end", "grad_init", "wall_s")


def run_cell(cell, config, data, run_dir):
    """Build, measure, train and measure again one cell, in the run folder `run_dir` (the runner's:
    config, history, similarity, the last checkpoint, the summary); returns its measured columns.
    A finished folder returns its stored measures without training again."""
    start = time.perf_counter()
    x, y, x_val, y_val = data
    keras.utils.set_random_seed(cell["seed"])
    model = _cell_model(cell, config)
    names = [f"block_{i:02d}" for i in range(cell["depth"])]
    probe = x_val[: config.probe_size]
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    grad_init = block_gradient_norms(model, x[: config.batch_size], y[: config.batch_size], loss, names)
    IMAGE_CLASSIFICATION.compile(model, keras.optimizers.AdamW(cell["learning_rate"], weight_decay=config.weight_decay))
    recorder = _BatchLosses()

    def measures(history, similarity, seconds):
        losses = np.array(recorder.losses)
        diverged = not np.all(np.isfinite(losses)) or len(losses) < config.steps
        tsim_init, tsim_end = run_files.similarity_start_end(similarity.csv_path)
        return dict(
            final_loss=float(np.mean(losses[-max(1, len(losses) // 10) :])) if not diverged else float("nan"),
            best_loss=_best_window(losses),
            val_accuracy=float("nan") if diverged else float(history["val_accuracy"][-1]),
            diverged=int(diverged),
            steps_to_threshold=_steps_to(losses, config.loss_threshold),
            tsim_init=_joined(tsim_init),
            tsim_end=_joined(np.full(cell["depth"], np.nan) if diverged else tsim_end),
            grad_init=_joined(grad_init),
            wall_s=round(time.perf_counter() - start, 2),
        )

    summary = train_in_folder(
        model,
        run_dir,
        {"model": model.name, "cell": cell, "sweep": _cell_settings(config)},
        dict(
            x=_batches(x, y, config.batch_size, cell["seed"]),
            steps_per_epoch=config.steps,
            epochs=1,
            validation_data=(x_val, y_val),
        ),
        probe,
        measures,
        checkpoints=False,  # one epoch: nothing to resume inside a cell; last.keras is kept
        extra_callbacks=(recorder,),
        verbose=0,
    )
    return {k: summary[k] for k in MEASURES}


def _cell_model(cell, config):
    spec = data.get_dataset(config.dataset)
    return zoo.vit(
        depth=cell["depth"],
        norm=cell["norm"],
        tau=1.0 if cell["tau"] == "" else cell["tau"],
        image_size=spec.image_size,
        patch_size=spec.image_size // 4,  # 16 patches whatever the size: 2x2 on the 8x8 digits
        channels=spec.channels,
        num_classes=spec.classes,
        hidden_dim=config.hidden_dim,
        ffn_dim=config.ffn_dim,
        num_heads=config.num_heads,
        initializer=cell["initializer"],
    )


def _cell_settings(config):
    """The settings of a cell's training that its key does not hold."""
    names = ("num_heads", "ffn_dim", "weight_decay", "loss_threshold", "probe_size")
    settings = {name: getattr(config, name) for name in names}
    return settings if config.dataset == "digits" else {**settings, "dataset": config.dataset}


class _BatchLosses(keras.callbacks.Callback):
    """Each batch's own loss: `fit` logs the running mean m_i, so loss_i = i m_i - (i - 1) m_(i-1)."""

    def __init__(self):
        super().__init__()
        self.losses, self._previous = [], 0.0

    def on_train_batch_end(self, batch, logs=None):
        mean = float(logs["loss"])
        self.losses.append((batch + 1) * mean - batch * self._previous)
        self._previous = mean


def _batches(x, y, batch_size, seed):
    """Endless shuffled batches, a new permutation per pass (seeded)."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(y))
        for i in range(0, len(order) - batch_size + 1, batch_size):
            idx = order[i : i + batch_size]
            yield x[idx], y[idx]


def _windows(losses, width=10):
    if len(losses) < width:
        return np.array([np.mean(losses)]) if len(losses) else np.array([])
    return np.convolve(losses, np.ones(width) / width, mode="valid")


def _best_window(losses):
    finite = _windows(losses[np.isfinite(losses)] if len(losses) else losses)
    return float(np.min(finite)) if len(finite) else float("nan")


def _steps_to(losses, threshold, width=10):
    means = _windows(losses, width)
    hits = np.nonzero(means <= threshold)[0]
    return "" if not len(hits) else int(hits[0] + min(width, len(losses)))


def _joined(values):
    return ";".join(f"{float(v):.5g}" for v in np.asarray(values))


# --- reading the results -------------------------------------------------------------------------


def group_stats(rows, column="final_loss"):
    """(norm, depth, lr, tau, initializer) -> dict(mean, std, min, max, n, diverged) of `column` over seeds."""
    groups = {}
    for row in rows:
        key = (row["norm"], int(row["depth"]), float(row["learning_rate"]), row["tau"], row["initializer"])
        groups.setdefault(key, []).append(row)
    stats = {}
    for key, members in groups.items():
        values = np.array([float(r[column]) for r in members])
        finite = values[np.isfinite(values)]
        stats[key] = dict(
            mean=float(finite.mean()) if len(finite) else float("nan"),
            std=float(finite.std()) if len(finite) else float("nan"),
            min=float(finite.min()) if len(finite) else float("nan"),
            max=float(finite.max()) if len(finite) else float("nan"),
            n=len(members),
            diverged=sum(int(r["diverged"]) for r in members),
        )
    return stats


def cell_label(norm, tau, initializer=None):
    """`post`, `deescalate (tau 0.5)`, with `, torch init` when given: the row and curve name of an arm."""
    label = norm if tau in ("", None) else f"{norm} (tau {float(tau):g})"
    return label if initializer is None else f"{label}, {initializer} init"


def arms_of(rows):
    """The (norm, tau, initializer) arms present in `rows`: layouts' order, larger tau first, torch first."""
    arms = {(row["norm"], row["tau"], row["initializer"]) for row in rows}
    schemes = initializers.INITIALIZERS
    return sorted(
        arms,
        key=lambda a: (
            layout_names().index(a[0]),
            -float(a[1]) if a[1] not in ("", None) else 0.0,
            schemes.index(a[2]),
        ),
    )


def markdown_table(rows):
    """Final loss and validation accuracy, mean +- std over seeds (and the seed range), per cell."""
    loss, accuracy = group_stats(rows, "final_loss"), group_stats(rows, "val_accuracy")
    lines = [
        "| norm | init | depth | lr | final loss, mean ± std (min-max) | val acc, mean ± std | seeds | diverged |",
        "|---|---|---:|---:|---|---|---:|---:|",
    ]
    arms = arms_of(rows)
    for key in sorted(loss, key=lambda k: (arms.index((k[0], k[3], k[4])), k[1], -k[2])):
        norm, depth, lr, tau, initializer = key
        losses, accuracies = loss[key], accuracy[key]
        lines.append(
            f"| {cell_label(norm, tau)} | {initializer} | {depth} | {lr:g} "
            f"| {losses['mean']:.3f} ± {losses['std']:.3f} ({losses['min']:.3f}-{losses['max']:.3f})"
            f" | {accuracies['mean']:.3f} ± {accuracies['std']:.3f} | {losses['n']} | {losses['diverged']} |"
        )
    return "\n".join(lines)


# The arms of the committed grid, in table order (norm, tau).
STUDY_ARMS = tuple((norm, "") for norm in PAPER_NORMS if not get_layout(norm).deescalates) + tuple(
    ("deescalate", tau) for tau in ("1.0", "0.5")
)


def best_over_learning_rates(rows):
    """(norm, tau, initializer, depth) -> (seed-mean final loss, lr, seeds) at the lr with the lowest mean."""
    best = {}
    for (norm, depth, lr, tau, initializer), stat in group_stats(rows).items():
        key = (norm, tau, initializer, depth)
        if np.isfinite(stat["mean"]) and (key not in best or stat["mean"] < best[key][0]):
            best[key] = (stat["mean"], lr, stat["n"])
    return best


# The published depth methods the study compares de-escalation with.
PUBLISHED_ARMS = tuple((norm, "") for norm in BASELINE_NORMS)


def best_lr_table(rows, arms=None):
    """Per init and depth, each arm's seed-mean final loss at its best learning rate (the lr in brackets).

    `arms`: (norm, tau) columns; default the study's ("not run" where `rows` lacks one) and the
    published methods that `rows` holds."""
    best = best_over_learning_rates(rows)
    if arms is None:
        arms = list(STUDY_ARMS) + [a for a in PUBLISHED_ARMS if any(k[:2] == a for k in best)]
    schemes = [s for s in initializers.INITIALIZERS if any(k[2] == s for k in best)]
    lines = [
        "| init | depth | " + " | ".join(cell_label(n, t) for n, t in arms) + " |",
        "|---|---:|" + "---:|" * len(arms),
    ]
    for scheme in schemes:
        for depth in sorted({k[3] for k in best if k[2] == scheme}):
            cells = []
            for norm, tau in arms:
                entry = best.get((norm, tau, scheme, depth))
                cells.append("not run" if entry is None else f"{entry[0]:.3f} ({entry[1]:g}, n={entry[2]})")
            lines.append(f"| {scheme} | {depth} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def verdicts(rows, threshold=0.5):
    """One sentence per (init, depth): does post-norm's seed mean reach the loss threshold, does
    de-escalation's where post-norm's does not?

    An arm *reaches the threshold* when its seed-mean final loss at its best learning rate is at most
    `threshold` (the sweep's loss threshold; chance is ln 10 = 2.30): a statement about means, not a
    verdict of the rule (`verdicts`).
    """
    best = best_over_learning_rates(rows)
    lines = []
    for scheme in [s for s in initializers.INITIALIZERS if any(k[2] == s for k in best)]:
        for depth in sorted({k[3] for k in best if k[2] == scheme}):
            post = best.get(("post", "", scheme, depth))
            taus = [
                (t, best[("deescalate", t, scheme, depth)])
                for _, t in STUDY_ARMS[2:]
                if ("deescalate", t, scheme, depth) in best
            ]
            if post is None or not taus:
                continue
            trained = [f"tau {float(t):g}" for t, e in taus if e[0] <= threshold]
            detail = "; ".join(f"tau {float(t):g} {e[0]:.3f} at lr {e[1]:g} (n={e[2]})" for t, e in taus)
            if post[0] <= threshold:
                verdict = "post-norm's mean reaches the threshold, " + (
                    f"and so does de-escalation's ({', '.join(trained)})" if trained else "de-escalation's does not"
                )
            elif trained:
                verdict = (
                    f"de-escalation's mean reaches the threshold where post-norm's does not ({', '.join(trained)})"
                )
            else:
                verdict = "neither post-norm's nor de-escalation's mean reaches the threshold"
            pre = best.get(("pre", "", scheme, depth))
            pre_detail = "" if pre is None else f"; pre {pre[0]:.3f} at lr {pre[1]:g} (n={pre[2]})"
            lines.append(
                f"- depth {depth}, {scheme} init: {verdict}. Post {post[0]:.3f} at lr {post[1]:g} "
                f"(n={post[2]}); {detail}{pre_detail}."
            )
    return "\n".join(lines)


def cell_rows(rows, arm, depth, learning_rate):
    """Every seed's row in the cell of `arm` = (norm, tau, initializer) at `depth` and `learning_rate`."""
    return [
        row
        for row in rows
        if (row["norm"], row["tau"], row["initializer"]) == arm
        and int(row["depth"]) == depth
        and float(row["learning_rate"]) == learning_rate
    ]


def rates_chosen_by_seed(rows, seed):
    """(norm, tau, initializer, depth) -> the learning rate of `seed`'s lowest finite final loss: the rate
    a selection seed chose, so that the verdicts use the other seeds only."""
    chosen = {}
    for row in rows:
        loss = float(row["final_loss"])
        if int(row["seed"]) != seed or not np.isfinite(loss):
            continue
        key = (row["norm"], row["tau"], row["initializer"], int(row["depth"]))
        if key not in chosen or loss < chosen[key][0]:
            chosen[key] = (loss, float(row["learning_rate"]))
    return {key: rate for key, (_, rate) in chosen.items()}


def orderings(rows):
    """One line per (init, depth): every arm at its best learning rate, lowest seed-mean final loss
    first. An ordering of means, not a verdict: the card states its verdicts in words, each checked
    by the verdict rule (`recipes.lab.verdict_claims`), its claims one family."""
    best = best_over_learning_rates(rows)
    lines = []
    for scheme in [s for s in initializers.INITIALIZERS if any(k[2] == s for k in best)]:
        for depth in sorted({k[3] for k in best if k[2] == scheme}):
            arms = sorted((v, cell_label(k[0], k[1]), k[0]) for k, v in best.items() if k[2:] == (scheme, depth))
            order = " < ".join(f"{label} {v[0]:.3f} ({v[1]:g})" for v, label, _ in arms)
            lines.append(f"- depth {depth}, {scheme} init: {order}.")
    return "\n".join(lines)


def plot_sweep(rows, out):
    """final_loss_vs_depth.png and heatmap.png (one panel per learning rate) into `out`."""
    if not rows:
        return
    stats = group_stats(rows)
    lrs = sorted({k[2] for k in stats}, reverse=True)
    arms = arms_of(rows)
    depths = sorted({k[1] for k in stats})
    fig, axes = run_files.new_figure((5.5 * len(lrs), 4), len(lrs))
    for ax, lr in zip(axes, lrs):
        for norm, tau, initializer in arms:
            ks = sorted(
                (k for k in stats if (k[0], k[3], k[4]) == (norm, tau, initializer) and k[2] == lr), key=lambda k: k[1]
            )
            mean = np.array([stats[k]["mean"] for k in ks])
            low, high = mean - [stats[k]["min"] for k in ks], np.array([stats[k]["max"] for k in ks]) - mean
            ax.errorbar(
                [k[1] for k in ks],
                mean,
                yerr=[low, high],
                marker="o",
                capsize=3,
                label=cell_label(norm, tau, initializer),
            )
        ax.set_xscale("log", base=2)
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("depth (blocks)")
        ax.set_ylabel("final training loss")
        ax.set_title(f"lr {lr:g}: mean over seeds, bars = seed range")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    run_files.save_figure(fig, os.path.join(out, "final_loss_vs_depth.png"), dpi=120)

    fig, axes = run_files.new_figure((5.5 * len(lrs), 1.2 + 0.4 * len(arms)), len(lrs))
    for ax, lr in zip(axes, lrs):
        grid = np.full((len(arms), len(depths)), np.nan)
        for i, (norm, tau, initializer) in enumerate(arms):  # one row per tau and init: no best-of selection
            for j, depth in enumerate(depths):
                grid[i, j] = stats.get((norm, depth, lr, tau, initializer), {"mean": np.nan})["mean"]
        image = ax.imshow(grid, cmap="viridis_r", aspect="auto")
        for i in range(len(arms)):
            for j in range(len(depths)):
                ax.text(
                    j,
                    i,
                    f"{grid[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if grid[i, j] > np.nanmean(grid) else "black",
                )
        ax.set_xticks(range(len(depths)), [str(d) for d in depths])
        ax.set_yticks(range(len(arms)), [cell_label(*arm) for arm in arms])
        ax.set_xlabel("depth")
        ax.set_title(f"final training loss, lr {lr:g}")
        fig.colorbar(image, ax=ax)
    run_files.save_figure(fig, os.path.join(out, "heatmap.png"), dpi=120)
