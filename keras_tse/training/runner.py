"""Training one model variant into a run folder, the way every recipe and the demo do it.

A run folder holds `config.json`, `history.csv` (CSVLogger: loss, accuracy, val_*, and the last
block's similarity `tsim_last`, `tcos_last`), `similarity.csv` (every block at every measurement),
`checkpoints/{best,last}.keras`, `plots/` and, once finished, `summary.json`. While training,
`backup/` (`RunBackup`) lets the same command resume from the last finished epoch after an
interruption, killed at any moment: every file is written whole (`keras_tse.run_files`) and the CSVs
are trimmed to the restored epoch. A NaN or infinite loss stops the run (`StopOnNonFinite`:
`stopped.json`, the last finite checkpoint kept). A finished folder is not trained again.
"""

import dataclasses
import json
import math
import os
import shutil
import time

import keras

from keras_tse import run_files, run_lock
from keras_tse._checks import TrainingStopped
from keras_tse.callbacks import (
    RunBackup,
    RunCheckpoints,
    StopOnInterrupt,
    StopOnNonFinite,
    TokenSimilarityMetric,
)
from keras_tse.run_files import RunFolderMismatch, flatten, read_history
from keras_tse.training import block_compile, optimizers
from keras_tse.training.configs import defaults_of, recorded
from keras_tse.training.tasks import IMAGE_CLASSIFICATION, VALIDATED_IMAGE_CLASSIFICATION


def backend_settings(jit_compile="auto"):
    """What a run records of the process it trained in: the backend, the global dtype policy, and how
    the train step compiles under `jit_compile` there (`block_compile.compiled_as`)."""
    return {
        "backend": keras.backend.backend(),
        "dtype_policy": keras.config.dtype_policy().name,
        "compiled": block_compile.compiled_as(jit_compile),
    }


def make_optimizer(config, steps_per_epoch, model=None):
    """AdamW with the multi-step decay of Sec. 3.3 by default, boundaries in batches (`optimizers`)."""
    return optimizers.make_optimizer(config, config.epochs * steps_per_epoch, model)


def fit_variant(
    model, train, test, run_dir, config, probe_inputs, steps_per_epoch, extra_config=None, before=None,
    validation=None, **options,
):  # fmt: skip
    """Train classifier `model` on `train` into `run_dir`; return its summary. Each epoch is scored on
    `validation`, which chooses the best checkpoint, and the test split `test` once, at the end; without a
    `validation` (the demo, a run made before the split existed), `test` is scored each epoch.

    Resumes from `run_dir/backup` if an earlier run was interrupted, and returns the stored summary
    without training if `run_dir/summary.json` exists. With `checkpoints=False` (short runs such as
    the demo, where writing three files per epoch would double the time) nothing is backed up during
    training and only `checkpoints/last.keras` is written, at the end. `options`: `train_in_folder`'s
    (`checkpoints`, `verbose`, `checked`).
    """
    optimizer = make_optimizer(config, steps_per_epoch, model)
    mixed = bool(config.mixup or config.cutmix)
    IMAGE_CLASSIFICATION.compile(
        model, optimizer, config.jit_compile, soft_targets=mixed, label_smoothing=config.label_smoothing
    )
    # shuffle=False: the pipeline shuffles.
    scored = test if validation is None else validation
    fit_kwargs = dict(x=train, validation_data=scored, epochs=config.epochs, shuffle=False)
    task = IMAGE_CLASSIFICATION if validation is None else VALIDATED_IMAGE_CLASSIFICATION

    def summarize_with_test(history, similarity, seconds):
        summary = summarize(history, similarity, seconds, task.summary)
        if validation is not None:  # once, at the end: chosen nothing
            scores = model.evaluate(test, verbose=0)
            summary.update({"test_loss": float(scores[0]), "test_accuracy": float(scores[1])})
        # what chose best.keras (`run_files.chosen_checkpoint`): a model chosen on the test split is no model to ship
        return {**summary, "best_chosen_on": "test" if validation is None else "validation"}

    callbacks = optimizers.ema_callbacks(config)
    return train_run(
        model, run_dir, config, extra_config, fit_kwargs, probe_inputs, summarize_with_test, before,
        extra_callbacks=callbacks, **options,
    )  # fmt: skip


def _epoch_order(train):
    """A callback handing each epoch's number to a pipeline that orders its batches by it (`set_epoch`), before
    the epoch's pass over it begins: a resumed run then draws the epoch's own batches."""
    if not hasattr(train, "set_epoch"):
        return []
    return [keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs=None: train.set_epoch(epoch))]


def train_run(model, run_dir, config, extra_config, fit_kwargs, probe_inputs, summarize, before=None, **options):
    """`train_in_folder` for a run of training settings `config` (a `TrainConfig` or `LMConfig`): the folder's
    record is the model's name, `config` and `extra_config`; a setting an older folder lacks ran at its field's
    default or what `before` says (`configs.defaults_of`); the similarity probe runs at `config`'s frequency."""
    record, defaults = run_config(model.name, config, extra_config), defaults_of(config, before)
    every = config.similarity_every_n_batches
    return train_in_folder(
        model,
        run_dir,
        record,
        fit_kwargs,
        probe_inputs,
        summarize,
        similarity_every=every,
        defaults=defaults,
        **options,
    )


def train_in_folder(
    model,
    run_dir,
    run_config,
    fit_kwargs,
    probe_inputs,
    summarize,
    similarity_every=None,
    checkpoints=True,
    extra_callbacks=(),
    verbose="auto",
    probe_warmup=None,
    defaults=None,
    checked=None,
):
    """`model.fit(**fit_kwargs)` (compiled by the caller) with the run-folder mechanics every recipe shares.

    `summarize(history, similarity_callback, seconds)` makes the summary stored as `summary.json`. A pipeline
    `fit_kwargs["x"]` that orders its batches by the epoch (`set_epoch`) is told each epoch's number as it begins.
    `extra_callbacks` run after TokenSimilarityMetric and before CSVLogger, so the logs they add
    reach `history.csv`. `defaults`: what an older run folder that lacks a setting ran with
    (`check_run_folder`); `checked`: the settings already compared with the folder (the trainer's check
    before any data), not compared again.
    """
    with run_lock.holding(run_dir, "run folder"):  # one writer: a second process training into it is refused
        summary_path = os.path.join(run_dir, "summary.json")
        if _open_run_folder(run_dir, run_config, defaults, checked) == "finished":
            with open(summary_path) as f:
                return json.load(f)
        for sub in ("checkpoints", "plots"):
            os.makedirs(os.path.join(run_dir, sub), exist_ok=True)

        history_path = os.path.join(run_dir, "history.csv")
        last_path = os.path.join(run_dir, "checkpoints", "last.keras")
        similarity = TokenSimilarityMetric(
            probe_inputs,
            every_n_batches=similarity_every,
            csv_path=os.path.join(run_dir, "similarity.csv"),
            plot_dir=os.path.join(run_dir, "plots"),
            warmup_inputs=probe_warmup,
        )
        stop = StopOnNonFinite(run_dir)
        if checkpoints:
            backup = RunBackup(os.path.join(run_dir, "backup"), run_dir)
            first, last = [backup], [backup.saver()]  # restore before all, back up after all (see RunBackup)
        else:  # no backup to resume from: an unfinished earlier run's logs would only mislead
            first, last = [], []
            for stale in (history_path, similarity.csv_path):
                if os.path.exists(stale):
                    os.remove(stale)
        callbacks = [
            *first,
            *_epoch_order(fit_kwargs["x"]),
            StopOnInterrupt(),  # a Ctrl-C stops at a batch end, where every saved file is whole
            stop,
            similarity,  # before CSVLogger: it adds its columns to the epoch logs
            *extra_callbacks,
            keras.callbacks.CSVLogger(history_path, append=True),
            RunCheckpoints(
                last_path,
                os.path.join(run_dir, "checkpoints", "best.keras") if checkpoints else None,
                history_path=history_path,
            ),
            *last,
        ]
        start = time.perf_counter()
        model.fit(**fit_kwargs, callbacks=callbacks, verbose=verbose)
        history = read_history(history_path)
        if stop.stopped:  # no finished run's numbers: the epochs it finished are in history.csv
            summary = {"epochs": sum(math.isfinite(loss) for loss in history.get("loss", []))}
        elif not history.get("loss"):  # interrupted inside the first epoch: no epoch to summarise
            summary = {"epochs": 0}
        else:
            summary = summarize(history, similarity, time.perf_counter() - start)
        taus = learned_taus(model)
        summary = {"model": model.name, **summary, **({"learned_tau": taus} if taus else {})}
        # what a stopped run's folder holds to go on from: an epoch's checkpoint, or none (stopped in the first)
        summary.update({"stopped": stop.stopped, "kept_checkpoint": os.path.exists(last_path)} if stop.stopped else {})
        run_files.write_json(summary_path, summary)
        if checkpoints:
            shutil.rmtree(os.path.join(run_dir, "backup"), ignore_errors=True)  # finished: nothing to resume
        return summary


def learned_taus(model):
    """Each learned tau of eq. (21) in `model`, block by block (a scanned model stacks them in one weight);
    [] where tau is fixed. DeEscalation names its weight "tau", clipped into [0, 1] after every step."""
    weights = [w for w in model.weights if w.name.endswith("tau")]  # "tau", or the scan's "block_00_..._tau"
    return [round(float(v), 5) for w in weights for v in keras.ops.convert_to_numpy(keras.ops.reshape(w, (-1,)))]


def run_config(model_name, config, extra_config):
    return json.loads(json.dumps({"model": model_name, "train": recorded(config), **(extra_config or {})}))


# Settings that change neither the model nor the data: a folder made under one resumes under another
# (the checkpoints load on any backend, and N processes feed one process's batches). Keys as `flatten` names them.
INCIDENTAL = (
    "backend",
    "data_parallel",
    "processes",
    "train.jit_compile",
    "compiled",
    "overrides.remat",
    "resumed_with",
)


# What a run folder holds once a run has begun in it (besides config.json).
RUN_FILES = ("history.csv", "similarity.csv", "steps.csv", "summary.json", "checkpoints", "backup", "stopped.json")


def as_started(run_dir, config, given=(), before=None):
    """`config` with what the run in `run_dir` was started with, for each field whose default has changed
    since (`metadata["before"]`, e.g. the weight-decay rule, or `before`'s value for it where that depends
    on the run) and that the command did not set (`given`): an older run resumes as it began, not under
    today's default."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        return config
    with open(path) as f:
        stored = json.load(f).get("train", {})
    fields = [f for f in dataclasses.fields(config) if "before" in f.metadata and f.name not in given]
    before = before or {}
    return dataclasses.replace(
        config, **{f.name: stored.get(f.name, before.get(f.name, f.metadata["before"])) for f in fields}
    )


def check_run_folder(run_dir, run_config, partial=False, defaults=None, checked=None):
    """What `run_dir` holds for `run_config`: "new", "resume" or "finished"; a `RunFolderMismatch` if
    it holds another run. `partial`: `run_config` has only the settings known so far (a recipe checks
    before it loads any data); the keys it lacks are not compared. `defaults`: what a stored config
    that lacks a setting ran with (`configs.defaults_of`: a field added since that run). `checked`: settings
    compared already (an earlier, partial check), so each setting is compared once."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        found = sorted(name for name in RUN_FILES if os.path.exists(os.path.join(run_dir, name)))
        if found:  # someone's run whose settings cannot be checked: never train over it
            raise RunFolderMismatch(
                f"{run_dir}: received a folder holding a run's files ({', '.join(found)}) but no config.json; "
                f"expected its config.json, to compare its settings (pass another output folder, or move "
                f"{run_dir} away to start over)"
            )
        return "new"
    with open(path) as f:
        stored = {**flatten(json.loads(json.dumps(defaults or {}))), **flatten(json.load(f))}
    given = flatten(json.loads(json.dumps(run_config)))  # as it would be stored: tuples become lists
    keys = given if partial else {**stored, **given}
    done = flatten(json.loads(json.dumps(checked))) if checked else {}
    differ = [k for k in keys if k not in done and k not in INCIDENTAL and k.split(".")[0] not in INCIDENTAL]
    differ = [k for k in differ if stored.get(k, "(absent)") != given.get(k, "(absent)")]
    finished = os.path.exists(os.path.join(run_dir, "summary.json"))
    if finished and len(differ) == 1 and differ[0] in LENGTHS:
        raise RunFolderMismatch(_longer_message(run_dir, differ[0], given[differ[0]], stored[differ[0]], stored))
    if differ:
        key = differ[0]
        more = f" (and {', '.join(differ[1:])})" if len(differ) > 1 else ""
        now, then = given.get(key, "(absent)"), stored.get(key, "(absent)")
        raise RunFolderMismatch(
            f"{run_dir}: received {key} {now!r}{more}; expected {then!r}, "
            f"the setting of the run it holds (pass another output folder, or delete {run_dir} to start over; "
            f"settings that change neither model nor data, such as the backend, may differ)"
        )
    return "finished" if finished else "resume"


# The settings that say how long a run trains (an image run's epochs, a language model's steps).
LENGTHS = ("train.epochs", "train.steps")


def _longer_message(run_dir, key, asked, ran, stored):
    """A finished run asked to train longer: why it cannot go on in its folder (its schedule was laid over
    the length it ran), and the two ways on."""
    schedule = stored.get("train.schedule", "step")
    laid = "" if schedule == "constant" else f"its {schedule} learning-rate schedule was laid over those {ran}, so "
    checkpoint = os.path.join(run_dir, "checkpoints", "last.keras")
    return (
        f"{run_dir}: received {key} {asked!r}; expected {ran!r}: a finished run of {ran} {key.split('.')[1]}, "
        f"and {laid}more cannot continue it. Train longer as a new run in another folder (another --out), or go on "
        f"from its weights in Python: keras.saving.load_model({checkpoint!r})"
    )


def _open_run_folder(run_dir, run_config, defaults=None, checked=None):
    """Check the folder, say what happens to it, and record a resume under other incidental settings."""
    state = check_run_folder(run_dir, run_config, defaults=defaults, checked=checked)
    if state == "new":
        run_files.write_json(os.path.join(run_dir, "config.json"), run_config)
        return state
    with open(os.path.join(run_dir, "config.json")) as f:
        stored = json.load(f)
    before = flatten(stored)
    changed = {k: v for k, v in flatten(run_config).items() if k in INCIDENTAL and before.get(k) != v}
    if state == "finished":
        print(f"{run_dir}: finished, skipping (its summary.json is kept)", flush=True)
    elif changed:
        print(f"{run_dir}: resuming a run begun with other incidental settings; now {changed}", flush=True)
        stored["resumed_with"] = [*stored.get("resumed_with", []), changed]
        run_files.write_json(os.path.join(run_dir, "config.json"), stored)
    return state


def summarize(history, similarity, seconds, fields):
    """The summary of a finished run: epochs, final training loss, the last block's token similarity
    at the run's first measurement and at its end, time and the probe's overhead, then `fields`."""
    start, end = (per_block[-1] for per_block in run_files.similarity_start_end(similarity.csv_path))
    summary = {
        "epochs": len(history["loss"]),
        "train_loss": history["loss"][-1],
        "last_block_similarity_start": start,
        "last_block_similarity_end": end,
        "seconds_this_session": seconds,
        "similarity_overhead": similarity.overhead,
    }
    for key, (column, which) in fields.items():
        summary[key] = history[column][-1] if which == "last" else which(history[column])
    return summary


def stopped_line(summary):
    """A stopped run's summary in words: where its loss became non-finite."""
    stop = summary["stopped"]
    kept = "its folder keeps the last finite checkpoint" if summary.get("kept_checkpoint", True) else "no checkpoint"
    return (
        f"stopped: the training loss is {stop['loss']} at epoch {stop['epoch']}, batch {stop['batch']} "
        f"(after {summary['epochs']} finished epoch(s); {kept})"
    )


def finish_recipe(summaries, line, out, variants, log_file, plot, title):
    """A recipe's end: one plot of every variant folder under `out` holding `log_file`, whichever call
    trained it (variants run as separate jobs share one plot), drawn by `plot(folders, path, title)`;
    then `line(variant, summary)` per variant this call trained (a stopped one: where it stopped), and where
    the folders and curves are. Variants that stopped on a non-finite loss end it as `TrainingStopped`."""
    folders = {v: os.path.join(out, v) for v in variants if os.path.exists(os.path.join(out, v, log_file))}
    curves = os.path.join(out, "plots", "loss_curves.png")
    plot(folders, curves, title)
    print()
    for variant, summary in summaries.items():
        print(f"{variant:>11}: {stopped_line(summary)}" if "stopped" in summary else line(variant, summary))
    trained = ", ".join(os.path.join(out, variant) for variant in summaries)
    print(f"\nrun folders: {trained}; the curves of {', '.join(folders)}: {curves} (+ .csv)")
    stopped = {variant: summary for variant, summary in summaries.items() if "stopped" in summary}
    if stopped:
        raise TrainingStopped("; ".join(f"{variant} {stopped_line(summary)}" for variant, summary in stopped.items()))


def summary_line(variant, s):
    scored = (
        f"valid acc {s['valid_accuracy']:.2%} (best {s['best_valid_accuracy']:.2%}), test loss "
        f"{s['test_loss']:.4f}, test acc {s['test_accuracy']:.2%} (once, at the end)"
        if "valid_accuracy" in s
        else f"test loss {s['test_loss']:.4f}, test acc {s['test_accuracy']:.2%} (best {s['best_test_accuracy']:.2%})"
    )
    return (
        f"{variant:>11}: {s['epochs']} epochs, train loss {s['train_loss']:.4f}, {scored}, "
        f"t_sim last block {s['last_block_similarity_start']:.3f} -> {s['last_block_similarity_end']:.3f}"
        + (f", similarity overhead {s['similarity_overhead']:.1%}" if s["similarity_overhead"] is not None else "")
        + (f", learned tau {min(s['learned_tau']):.3f}-{max(s['learned_tau']):.3f}" if "learned_tau" in s else "")
    )
