"""`keras_tse.similarity`, the public name kept since before issue 17: the module lives in
`keras_tse.analysis.similarity`; this one re-exports its public functions."""

from keras_tse.analysis.similarity import *  # noqa: F403
from keras_tse.analysis.similarity import __all__  # noqa: F401
