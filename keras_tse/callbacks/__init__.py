"""Callbacks used during `fit`: token similarity, attention diagnostics, Transformer-XL's memory reset, and
the run-folder mechanics that survive a kill (atomic checkpoints, backups, a stop on a non-finite loss)."""

from keras_tse.callbacks.attention_diagnostics import AttentionDiagnostics
from keras_tse.callbacks.reset_memory import ResetMemory, reset_memory
from keras_tse.callbacks.run_backup import RunBackup
from keras_tse.callbacks.run_checkpoints import RunCheckpoints
from keras_tse.callbacks.stop_on_interrupt import StopOnInterrupt
from keras_tse.callbacks.stop_on_non_finite import StopOnNonFinite
from keras_tse.callbacks.token_similarity_metric import TokenSimilarityMetric

__all__ = [
    "AttentionDiagnostics",
    "ResetMemory",
    "RunBackup",
    "RunCheckpoints",
    "StopOnInterrupt",
    "StopOnNonFinite",
    "TokenSimilarityMetric",
    "reset_memory",
]
