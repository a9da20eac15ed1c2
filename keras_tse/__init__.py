"""keras_tse: deep post-norm Transformers that train (Yu & Zhang's token similarity escalation)."""

from keras_tse import callbacks, data, layers, losses, similarity, spectral, zoo

__version__ = "0.1.0"

__all__ = ["callbacks", "data", "layers", "losses", "similarity", "spectral", "zoo", "__version__"]
