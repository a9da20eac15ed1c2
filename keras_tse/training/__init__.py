"""Training a model into a run folder: the one runner (`train_in_folder`) and its two configurations,
a classifier (`fit_variant`, Fig. 6) and a Transformer-XL language model (`fit_language_model`,
Fig. 7), with the scale options, the run-folder check and the curves of a study.

Built on the library (`keras_tse.layers`, `zoo`, `callbacks`, `run_files`); imports nothing from
`keras_tse.experiments`.

Names load on first use (`keras_tse._lazy`): importing the package imports no Keras.
"""

from keras_tse._lazy import lazy_exports

_EXPORTS = {
    "LMTrainConfig": "keras_tse.training.configs",
    "RunFolderMismatch": "keras_tse.run_files",
    "TrainConfig": "keras_tse.training.configs",
    "check_run_folder": "keras_tse.training.runner",
    "evaluate_stream": "keras_tse.training.language_model",
    "fit_language_model": "keras_tse.training.language_model",
    "fit_variant": "keras_tse.training.runner",
    "plot_losses": "keras_tse.training.plots",
    "plot_training_loss": "keras_tse.training.plots",
    "read_history": "keras_tse.run_files",
    "read_steps": "keras_tse.run_files",
    "train_in_folder": "keras_tse.training.runner",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
