"""Callbacks used during `fit`: token similarity tracking and Transformer-XL's memory reset."""

from keras_tse.callbacks.reset_memory import ResetMemory, reset_memory
from keras_tse.callbacks.token_similarity_metric import TokenSimilarityMetric

__all__ = ["ResetMemory", "TokenSimilarityMetric", "reset_memory"]
