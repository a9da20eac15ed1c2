"""The one trainer: a `Plan` (`plans.py`) run in one order, the same for images and text.

The order: the run folder claimed for the plan's settings (one writer, another run's folder refused); each
variant's settings compared with what its folder holds, before any data is read; the data read once; each
variant built and trained from the same seed, its folder's remaining settings compared as it opens; one plot
of every variant's curves.
"""

import os

from keras_tse import data, run_files
from keras_tse.training import runner
from keras_tse.training.configs import defaults_of


def train(plan):
    """Train every variant of `plan`; returns {variant: summary}."""
    import keras  # Keras and its backend are configured by the plan (`scale.configure`)

    spec, settings = plan.spec, plan.settings
    files = plan.survey.files if plan.survey else None
    contents = (lambda: data.contents(settings.data_dir, files)) if spec.own else None
    writes = (*plan.kind.variant_names(), "plots")
    run_files.claim_folder(plan.out, plan.kind.name, plan.manifest, writes, "*/config.json", data_contents=contents)
    before = plan.kind.before(settings)
    for variant in plan.variants:  # a folder of other settings stops us before the data
        defaults = defaults_of(variant.config, before)
        runner.check_run_folder(os.path.join(plan.out, variant.folder), variant.known, partial=True, defaults=defaults)

    tensorflow = any(getattr(variant.config, "data_pipeline", None) == "tf" for variant in plan.variants)
    with data.tensorflow_unseen_by_keras(needed=tensorflow):
        keras.utils.set_random_seed(settings.seed)  # before the pipelines: augmentation's and shuffling's draws
        prepared = plan.kind.prepare(plan)
        summaries = {}
        for variant in plan.variants:
            keras.utils.set_random_seed(settings.seed)  # every variant from the same initial draw
            summaries[variant.norm] = plan.kind.fit(plan, variant, prepared)
        plan.kind.finish(plan, summaries)
    return summaries
