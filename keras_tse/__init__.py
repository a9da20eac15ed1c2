"""keras_tse: deep post-norm Transformers that train (Yu & Zhang's token similarity escalation).

The library: `layers`, `zoo`, `callbacks`, `data`, `losses`, `analysis` (similarity, spectral
quantities, gradients, the probe) and `run_files`. Training (`keras_tse.training`) and the
experiments behind the `keras-tse` command (`keras_tse.experiments`) build on it and are imported
only by whoever uses them: `import keras_tse` loads neither (tests/test_layout.py).
"""

from keras_tse import analysis, callbacks, data, layers, losses, similarity, spectral, zoo

__version__ = "0.1.0"

__all__ = ["analysis", "callbacks", "data", "layers", "losses", "similarity", "spectral", "zoo", "__version__"]
