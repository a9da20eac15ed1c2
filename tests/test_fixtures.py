"""`.keras` files saved before a refactor (the layout move; the Transformer-XL block rebuilt on the shared
block bodies; KerasHub's families given de-escalated classes of their own) load on every backend and predict
as then: every norm of both families, a de-escalated KerasHub BERT masked-word model and GPT-2 causal LM."""

import os

import keras
import numpy as np
import pytest

import keras_tse  # noqa: F401  (registers the serializable classes)

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
VIT_NORMS = ("deescalate", "post", "pre", "deepnorm", "rezero", "layerscale")
NAMES = (
    tuple(f"vit_{norm}" for norm in VIT_NORMS)
    + tuple(f"transformer_xl_{norm}" for norm in (*VIT_NORMS, "deescalate_leaky_global"))
    + ("kerashub_bert_masked_lm", "kerashub_gpt2_causal_lm")
)


def test_every_fixture_file_is_checked():
    assert sorted(f[: -len(".keras")] for f in os.listdir(HERE) if f.endswith(".keras")) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_fixture_loads_and_predicts_as_when_saved(name):
    model = keras.saving.load_model(os.path.join(HERE, f"{name}.keras"))
    saved = np.load(os.path.join(HERE, f"{name}.npz"))
    assert float(np.abs(saved["expected"]).max()) > 0.1  # a real output, not zeros
    named = {key[len("inputs.") :]: saved[key] for key in saved.files if key.startswith("inputs.")}
    inputs = named or saved["inputs"]  # a model of named inputs (KerasHub's) has them saved one by one
    np.testing.assert_allclose(np.asarray(model.predict(inputs, verbose=0)), saved["expected"], rtol=1e-4, atol=1e-4)
