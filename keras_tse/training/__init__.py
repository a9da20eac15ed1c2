"""Training a model into a run folder: the one runner (`train_in_folder`), the two tasks it trains
for (`tasks`: image classification and language modelling, each owning its loss, metrics, summary
and the one `compile`), and their data feeds, a classifier's (`fit_variant`, Fig. 6) and a language
model's (`fit_language_model`, Fig. 7: the Transformer-XL or the GPT decoder), with the scale
options, the run-folder check and the curves of a study.

Built on the library (`keras_tse.layers`, `zoo`, `callbacks`, `run_files`); imports nothing from
`keras_tse.experiments`.

Names load on first use (`keras_tse._lazy`): importing the package imports no Keras.
"""

from keras_tse._lazy import lazy_exports

_EXPORTS = {
    "IMAGE_CLASSIFICATION": "keras_tse.training.tasks",
    "LANGUAGE_MODELLING": "keras_tse.training.tasks",
    "TASKS": "keras_tse.training.tasks",
    "Task": "keras_tse.training.tasks",
    "LMTrainConfig": "keras_tse.training.configs",
    "RunFolderMismatch": "keras_tse.run_files",
    "SCHEDULES": "keras_tse.training.configs",
    "TrainConfig": "keras_tse.training.configs",
    "as_started": "keras_tse.training.runner",
    "check_run_folder": "keras_tse.training.runner",
    "defaults_of": "keras_tse.training.configs",
    "evaluate_stream": "keras_tse.training.language_model",
    "fit_language_model": "keras_tse.training.language_model",
    "fit_variant": "keras_tse.training.runner",
    "plot_losses": "keras_tse.training.plots",
    "plot_training_loss": "keras_tse.training.plots",
    "read_history": "keras_tse.run_files",
    "recorded": "keras_tse.training.configs",
    "read_steps": "keras_tse.run_files",
    "train_in_folder": "keras_tse.training.runner",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
