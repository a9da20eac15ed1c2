"""`keras_tse.spectral`, the public name kept since before issue 17: the module lives in
`keras_tse.analysis.spectral`; this one re-exports its public functions."""

from keras_tse.analysis.spectral import *  # noqa: F403
from keras_tse.analysis.spectral import __all__  # noqa: F401
