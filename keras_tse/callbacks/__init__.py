"""Callbacks that watch token similarity (and later attention diagnostics) during `fit`."""

from keras_tse.callbacks.token_similarity_metric import TokenSimilarityMetric

__all__ = ["TokenSimilarityMetric"]
