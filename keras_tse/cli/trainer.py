"""One training path for every task (`keras-tse train`): a task module supplies what differs, this runs
the rest in one order, the same for images (`train_vit`) and text (`train_lm`).

The order: every flag checked before any data is read; the run folder claimed for these settings (one
writer, another run's folder refused); each variant's settings compared with what its folder holds; the
data read once; each variant built and trained from the same seed; one plot of every variant's curves.

What a task module holds besides its flags (`parse_args`):

- `TASK`: the name a run folder's manifest records (`run_files.claim_folder`);
- `check_args(args)`: one line per bad input, before anything is read;
- `own_data(args)` and `data_files(args)`: whether the data is the user's, and its files (None: the file
  itself), whose fingerprint joins the run's settings;
- `shared(args)`: the manifest's settings besides the data set, the data, smoke and the seed;
- `variant_names()`: the subfolders a run of the task may write;
- `train_config(args, jit_compile)`: the task's settings (`training.configs`) with the flags';
- `variant_settings(args, norm, config)`: the variant's plan, (preset, builder overrides, its settings as
  its run began, its run's record known before any data);
- `known(args, plan)`: the record compared with a folder before the data is read, and
  `before(args)`: what a folder made before a setting existed ran with (`training.defaults_of`);
- `prepare(args, plans, config)`: the data, read and checked, as `fit` takes it;
- `fit(args, norm, plan, prepared)`: one variant built and trained into its folder; its summary;
- `finish(args, summaries)`: the plot and the lines that end the run.
"""

import os

from keras_tse import data, run_files, training
from keras_tse.cli import flags


def train(task, args):
    """Train the variants `args.norm` of `task` (a task module, above); returns {variant: summary}."""
    task.check_args(args)  # before any data is read or model built: a bad input answers at once
    files = task.data_files(args) if task.own_data(args) else None
    args.fingerprint = data.fingerprint(args.data_dir, files) if task.own_data(args) else None
    shared = {"dataset": args.dataset, "data": args.fingerprint, "smoke": args.smoke, "seed": args.seed}

    import keras  # here, not at the top: Keras and its backend load after the flags are read

    data.tensorflow_if_installed()  # before Keras' seeding imports it: TF_CPP_MIN_LOG_LEVEL then silences it
    jit_compile = training.scale.configure(**flags.scale_settings(args))  # joins the other processes, if any
    args.out = training.scale.writer_folder(args.out)  # one writer when several processes train together
    contents = (lambda: data.contents(args.data_dir, files)) if task.own_data(args) else None
    writes = (*task.variant_names(), "plots")
    run_files.claim_folder(
        args.out, task.TASK, {**shared, **task.shared(args)}, writes, "*/config.json", data_contents=contents
    )
    config = task.train_config(args, jit_compile)
    plans = {norm: task.variant_settings(args, norm, config) for norm in args.norm}
    for norm, plan in plans.items():  # a folder of other settings stops us before the data
        defaults = training.defaults_of(plan[2], task.before(args))
        training.check_run_folder(os.path.join(args.out, norm), task.known(args, plan), partial=True, defaults=defaults)

    keras.utils.set_random_seed(args.seed)  # before the pipelines: augmentation's and shuffling's random ops
    prepared = task.prepare(args, plans, config)
    summaries = {}
    for norm, plan in plans.items():
        keras.utils.set_random_seed(args.seed)  # every variant from the same initial draw
        summaries[norm] = task.fit(args, norm, plan, prepared)
    task.finish(args, summaries)
    return summaries
