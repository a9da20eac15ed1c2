"""keras_tse: deep post-norm Transformers that train (Yu & Zhang's token similarity escalation)."""

from keras_tse import layers, similarity

__version__ = "0.1.0"

__all__ = ["layers", "similarity", "__version__"]
