"""Training a model into a run folder: the one runner (`train_in_folder`) and its two configurations,
a classifier (`fit_variant`, Fig. 6) and a Transformer-XL language model (`fit_language_model`,
Fig. 7), with the scale options, the run-folder check and the curves of a study.

Built on the library (`keras_tse.layers`, `zoo`, `callbacks`, `run_files`); imports nothing from
`keras_tse.experiments`.
"""

from keras_tse.run_files import read_history, read_steps
from keras_tse.training.language_model import LMTrainConfig, evaluate_stream, fit_language_model
from keras_tse.training.plots import plot_losses, plot_training_loss
from keras_tse.training.runner import RunFolderMismatch, TrainConfig, check_run_folder, fit_variant, train_in_folder

__all__ = [
    "LMTrainConfig",
    "RunFolderMismatch",
    "TrainConfig",
    "check_run_folder",
    "evaluate_stream",
    "fit_language_model",
    "fit_variant",
    "plot_losses",
    "plot_training_loss",
    "read_history",
    "read_steps",
    "train_in_folder",
]
