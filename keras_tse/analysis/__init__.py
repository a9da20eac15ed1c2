"""What the paper measures: token similarity (Sec. 2.2), the attention's spectral quantities
(Secs. 2.3-2.5), per-block gradient norms, and a probe of a saved model's blocks."""

from keras_tse.analysis import diagnostics, gradients, probe, similarity, spectral

__all__ = ["diagnostics", "gradients", "probe", "similarity", "spectral"]
