"""The training curves of a run folder or a study: Fig. 6 (classification) and Fig. 7 (language model).

Each variant is one curve; given several seeds of a variant, the curve is their mean and the band
their range (min to max). Drawn on a `Figure` object (`run_files.new_figure`), never through pyplot's
global state, and written whole.
"""

import os

import numpy as np

from keras_tse import run_files
from keras_tse.run_files import read_history, read_steps


def _band(ax, x, curves, label, **style):
    """One variant on `ax`: the mean of `curves` (one row per seed, cut to the shortest) and their range."""
    length = min(len(curve) for curve in curves)
    curves = np.array([curve[:length] for curve in curves], "float64")
    (line,) = ax.plot(x[:length], curves.mean(axis=0), label=label, **style)
    if len(curves) > 1:
        ax.fill_between(x[:length], curves.min(axis=0), curves.max(axis=0), color=line.get_color(), alpha=0.2)


def _write_curves(path, columns, rows):
    """The plotted numbers beside the figure (`loss_curves.png` -> `loss_curves.csv`), one row per point."""
    run_files.write_csv(os.path.splitext(path)[0] + ".csv", columns, rows)


def _seeds(runs):
    return runs if isinstance(runs, list) else [runs]


def plot_losses(histories, path, title):
    """Fig. 6: train and test loss per epoch. `histories`: variant -> history (or a list, one per seed)."""
    fig, axes = run_files.new_figure((10, 4), 2)
    rows = []
    for variant, runs in histories.items():
        runs = _seeds(runs)
        for ax, column in zip(axes, ("loss", "val_loss")):
            longest = max(len(run[column]) for run in runs)
            _band(ax, np.arange(1, longest + 1), [run[column] for run in runs], variant)
            for seed, run in enumerate(runs):
                rows += [
                    dict(variant=variant, run=seed, curve=column, epoch=e + 1, value=v)
                    for e, v in enumerate(run[column])
                ]
    for ax, split in zip(axes, ("train", "test")):
        ax.set(xlabel="epoch", ylabel=f"{split} loss", title=f"{split} loss")
        ax.legend()
    fig.suptitle(title)
    run_files.save_figure(fig, path)
    _write_curves(path, ("variant", "run", "curve", "epoch", "value"), rows)


def plot_training_loss(run_dirs, path, title):
    """Fig. 7: training loss against step (`steps.csv`) and validation perplexity per evaluation.
    `run_dirs`: variant -> run folder (or a list of them, one per seed)."""
    fig, axes = run_files.new_figure((11, 4), 2)
    rows = []
    for variant, dirs in run_dirs.items():
        dirs = _seeds(dirs)
        curves = [read_steps(os.path.join(d, "steps.csv")) for d in dirs]
        for seed, (steps, losses) in enumerate(curves):
            rows += [dict(variant=variant, run=seed, curve="loss", step=int(s), value=v) for s, v in zip(steps, losses)]
        steps = min((s for s, _ in curves), key=len)
        _band(axes[0], steps, [losses for _, losses in curves], variant)
        histories = [read_history(os.path.join(d, "history.csv")) for d in dirs]
        valid = [h["val_perplexity"] for h in histories if "val_perplexity" in h]
        if valid:
            _band(axes[1], np.arange(1, max(map(len, valid)) + 1), valid, variant, marker="o")
    axes[0].set(xlabel="step", ylabel="training loss (nats per token)", title="training loss")
    axes[1].set(xlabel="evaluation", ylabel="validation perplexity (with memory)", title="validation perplexity")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.legend()
    fig.suptitle(title)
    run_files.save_figure(fig, path)
    _write_curves(path, ("variant", "run", "curve", "step", "value"), rows)
