"""`keras_tse.deescalate`: the paper's fix on a KerasHub model, every weight kept, saved and loaded."""

import numpy as np
import pytest

import keras_tse
from keras_tse.analysis.similarity import token_similarity_profile

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _bert():
    keras_hub = pytest.importorskip("keras_hub")
    import keras

    keras.utils.set_random_seed(0)
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=50, num_layers=3, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    ids = np.random.default_rng(0).integers(1, 50, (2, 8)).astype("int32")
    mask = np.ones((2, 8), "int32")
    mask[1, 6:] = 0  # the second sequence padded: its mean runs over its six real tokens
    return bert, {"token_ids": ids, "segment_ids": np.zeros((2, 8), "int32"), "padding_mask": mask}


def test_a_deescalated_bert_keeps_every_weight_and_centres_each_blocks_output(tmp_path):
    """Eq. (21) with tau = 1 after each encoder block: the last block's token similarity at initialisation is
    about 0 (the BERT's own is not); the copy shares every weight of the original, bit for bit; it saves to
    `.keras` and loads with the same outputs."""
    import keras

    bert, inputs = _bert()
    fixed = keras_tse.deescalate(bert)
    assert [w.path for w in fixed.weights] == [w.path for w in bert.weights]
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(fixed.weights, bert.weights))
    whole = {**inputs, "padding_mask": np.ones((2, 8), "int32")}  # the measure reads every token
    assert token_similarity_profile(bert, whole)[-1] > 0.05
    assert abs(token_similarity_profile(fixed, whole)[-1]) < 1e-5
    sequence = keras.ops.convert_to_numpy(fixed(inputs)["sequence_output"])
    real = sequence[1, :6]
    np.testing.assert_allclose(real.mean(axis=0), 0.0, atol=1e-5)  # its real tokens centred, the padding not counted
    fixed.save(tmp_path / "bert.keras")
    loaded = keras.saving.load_model(tmp_path / "bert.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(inputs)["sequence_output"]), sequence, atol=1e-6)


def test_a_model_without_known_blocks_or_with_causal_ones_is_one_line():
    import keras

    keras_hub = pytest.importorskip("keras_hub")
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="plain")
    with pytest.raises(ValueError, match="model 'plain' has none"):
        keras_tse.deescalate(plain)
    gpt2 = keras_hub.models.GPT2Backbone(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    with pytest.raises(ValueError, match=r"causal blocks \['transformer_layer_0', 'transformer_layer_1'\]"):
        keras_tse.deescalate(gpt2)
    with pytest.raises(ValueError, match="`tau` must be"):
        keras_tse.deescalate(_bert()[0], tau=1.5)
