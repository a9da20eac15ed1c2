"""Training a model into a run folder: a run described once (`Plan`, `plans.py`) and run by the one trainer
(`train`, `trainer.py`), image classification's and language modelling's kinds of run (`image_runs`,
`text_runs`); the one runner (`train_in_folder`), the two tasks it trains
for (`tasks`: image classification and language modelling, each owning its loss, metrics, summary
and the one `compile`), and their data feeds, a classifier's (`fit_variant`, Fig. 6) and a language
model's (`fit_language_model`, Fig. 7: the Transformer-XL or the GPT decoder), with the scale
options, the run-folder check and the curves of a study.

Built on the library (`keras_tse.layers`, `zoo`, `callbacks`, `run_files`); imports nothing from
`keras_tse.cli`.

Names load on first use (`keras_tse._lazy`): importing the package imports no Keras.
"""

from keras_tse._lazy import lazy_exports

_EXPORTS = {
    "keras_tse.run_files": ("RunFolderMismatch", "read_history", "read_steps"),
    "keras_tse.training.configs": ("LMTrainConfig", "SCHEDULES", "TrainConfig", "defaults_of", "recorded"),
    "keras_tse.training.language_model": ("evaluate_stream", "fit_language_model"),
    "keras_tse.training.plans": ("Plan", "RunKind", "Settings", "Variant"),
    "keras_tse.training.plots": ("plot_losses", "plot_training_loss"),
    "keras_tse.training.runner": ("as_started", "check_run_folder", "fit_variant", "train_in_folder"),
    "keras_tse.training.tasks": ("IMAGE_CLASSIFICATION", "LANGUAGE_MODELLING", "TASKS", "Task"),
    "keras_tse.training.trainer": ("train",),
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = __dir__()
