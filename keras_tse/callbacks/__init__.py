"""Callbacks used during `fit`: token similarity, attention diagnostics, Transformer-XL's memory reset."""

from keras_tse.callbacks.attention_diagnostics import AttentionDiagnostics
from keras_tse.callbacks.reset_memory import ResetMemory, reset_memory
from keras_tse.callbacks.token_similarity_metric import TokenSimilarityMetric

__all__ = ["AttentionDiagnostics", "ResetMemory", "TokenSimilarityMetric", "reset_memory"]
