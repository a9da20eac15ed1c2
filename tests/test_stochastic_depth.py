"""Stochastic depth (`StochasticDepth`, `drop_path` of a block, `drop_path_rate` of a model): whole
examples' branches dropped while training, rescaled to keep the expectation, the identity at inference."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_tse import zoo
from keras_tse.layers import StochasticDepth, TransformerBlock
from tests.helpers import tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def test_each_example_is_kept_whole_and_rescaled_or_dropped_whole():
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(4000, 3, 5)).astype("float32")
    layer = StochasticDepth(0.25, seed=1)
    y = ops.convert_to_numpy(layer(x, training=True))
    kept = np.all(np.isclose(y, x / 0.75, atol=1e-5), axis=(1, 2))
    dropped = np.all(y == 0.0, axis=(1, 2))
    assert np.all(kept | dropped)  # per example, never per element
    assert abs(dropped.mean() - 0.25) < 0.03, dropped.mean()  # 4,000 draws: sd 0.007
    np.testing.assert_array_equal(ops.convert_to_numpy(layer(x, training=False)), x)
    np.testing.assert_array_equal(ops.convert_to_numpy(StochasticDepth(0.0)(x, training=True)), x)


def test_a_pre_norm_block_whose_branches_are_dropped_passes_its_input_on():
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(1).normal(size=(64, 5, 8)).astype("float32")
    block = TransformerBlock(2, 16, norm="pre", drop_path=0.5)
    plain = TransformerBlock(2, 16, norm="pre")
    block.build(x.shape), plain.build(x.shape)
    plain.set_weights(block.get_weights())
    np.testing.assert_allclose(ops.convert_to_numpy(block(x)), ops.convert_to_numpy(plain(x)), atol=1e-6)
    y = ops.convert_to_numpy(block(x, training=True))
    unchanged = np.all(y == x, axis=(1, 2))  # both branches dropped: Z = X exactly (eq. 19)
    assert 0 < unchanged.sum() < 64, unchanged.sum()  # about a quarter of the examples


def test_models_take_one_rate_linear_in_depth_and_keep_it_through_save_and_load(tmp_path):
    model = tiny_vit(depth=3, drop_path_rate=0.2)
    assert [model.get_layer(f"block_{i:02d}").drop_path for i in range(3)] == [0.0, 0.1, 0.2]
    path = str(tmp_path / "vit.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_layer("block_02").drop_path == 0.2
    x = np.random.default_rng(2).normal(size=(2, *model.input.shape[1:])).astype("float32")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    gpt = zoo.gpt(depth=2, vocab_size=30, hidden_dim=8, num_heads=2, ffn_dim=16, segment_len=4, drop_path_rate=0.3)
    assert gpt.get_layer("block_01").drop_path == pytest.approx(0.3)


def test_bad_rates_and_a_scanned_stack_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"`rate` must be a number in \[0, 1\). Received: rate=1.0"):
        StochasticDepth(1.0)
    with pytest.raises(ValueError, match=r"Received: drop_path_rate=0.1 \(each block drops at its own rate\)"):
        tiny_vit(depth=2, scan=True, drop_path_rate=0.1)
