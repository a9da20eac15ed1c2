"""keras_tse: deep post-norm Transformers that train (Yu & Zhang's token similarity escalation)."""

from keras_tse import callbacks, layers, losses, similarity, zoo

__version__ = "0.1.0"

__all__ = ["callbacks", "layers", "losses", "similarity", "zoo", "__version__"]
