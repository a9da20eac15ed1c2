"""`.keras` files saved before the layout move (issue 17) load on every backend and predict as then."""

import os

import keras
import numpy as np
import pytest

import keras_tse  # noqa: F401  (registers the serializable classes)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
NAMES = ("vit_deescalate", "transformer_xl_deescalate")


@pytest.mark.parametrize("name", NAMES)
def test_fixture_loads_and_predicts_as_when_saved(name):
    model = keras.saving.load_model(os.path.join(HERE, f"{name}.keras"))
    saved = np.load(os.path.join(HERE, f"{name}.npz"))
    assert float(np.abs(saved["expected"]).max()) > 0.1  # a real output, not zeros
    np.testing.assert_allclose(
        np.asarray(model.predict(saved["inputs"], verbose=0)), saved["expected"], rtol=1e-4, atol=1e-4
    )
