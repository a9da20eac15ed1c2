import keras
import numpy as np
import pytest
from keras import ops
from keras.src.testing import TestCase

from keras_tse.layers import DeEscalation
from tests import reference

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


class DeEscalationLayerTest(TestCase):
    def test_layer_harness_fixed_tau(self):
        self.run_layer_test(
            DeEscalation,
            init_kwargs={"tau": 0.3},
            input_shape=(2, 5, 4),
            expected_output_shape=(2, 5, 4),
            expected_num_trainable_weights=0,
            expected_num_non_trainable_weights=0,
            supports_masking=True,
        )

    def test_layer_harness_trainable_causal(self):
        self.run_layer_test(
            DeEscalation,
            init_kwargs={"tau": 0.5, "trainable_tau": True, "causal": True},
            input_shape=(2, 5, 4),
            expected_output_shape=(2, 5, 4),
            expected_num_trainable_weights=1,
            expected_num_non_trainable_weights=0,
            supports_masking=True,
        )


def _random(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _mask():
    # ragged real lengths 5, 3, 1 out of 5 tokens
    return np.arange(5)[None, :] < np.array([5, 3, 1])[:, None]


@pytest.mark.parametrize("tau", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_numpy_reference_of_eq21(tau, masked, causal):
    x = _random((3, 5, 4))
    mask = _mask() if masked else None
    got = DeEscalation(tau=tau, causal=causal)(x, mask=mask)
    want = reference.deescalate(x, tau, mask=mask, causal=causal)
    np.testing.assert_allclose(ops.convert_to_numpy(got), want, atol=1e-5)


def test_tau_one_centres_every_feature():
    y = ops.convert_to_numpy(DeEscalation(tau=1.0)(_random((2, 7, 3))))
    np.testing.assert_allclose(y.mean(axis=1), 0.0, atol=1e-6)


def test_golden_two_tokens():
    # X = [[1], [3]]: mean 2, so Y = X - 0.5 * 2 = [[0], [2]]
    y = DeEscalation(tau=0.5)(np.array([[[1.0], [3.0]]], "float32"))
    np.testing.assert_allclose(ops.convert_to_numpy(y), [[[0.0], [2.0]]])


def test_causal_has_no_future_leakage():
    layer = DeEscalation(tau=1.0, causal=True)
    x = _random((1, 8, 4))
    base = ops.convert_to_numpy(layer(x))
    for t in range(7):
        moved = x.copy()
        moved[:, t + 1 :] += 10.0 * _random((1, 7 - t, 4), seed=t + 1)
        out = ops.convert_to_numpy(layer(moved))
        np.testing.assert_allclose(out[:, : t + 1], base[:, : t + 1], atol=1e-6)
        assert not np.allclose(out[:, t + 1], base[:, t + 1])


def test_padding_does_not_move_real_tokens():
    layer = DeEscalation(tau=1.0)
    x, mask = _random((3, 5, 4)), _mask()
    base = ops.convert_to_numpy(layer(x, mask=mask))
    noisy = np.where(mask[..., None], x, 100.0).astype("float32")
    out = ops.convert_to_numpy(layer(noisy, mask=mask))
    np.testing.assert_allclose(out[mask], base[mask], atol=1e-5)


def _tau_model(tau):
    inputs = keras.Input((6, 3))
    layer = DeEscalation(tau=tau, trainable_tau=True)
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model, layer


def test_trainable_tau_moves_under_fit_towards_target():
    x = _random((64, 6, 3)) + 2.0  # token mean ~2: dL/dtau = -2 (0.8 - tau) m^2, a strong gradient
    target = reference.deescalate(x, 0.8).astype("float32")
    model, layer = _tau_model(0.2)
    model.fit(x, target, epochs=30, batch_size=16, verbose=0)
    assert abs(float(ops.convert_to_numpy(layer.tau_weight)) - 0.8) < 0.02


def test_trainable_tau_is_kept_in_unit_interval():
    x = _random((64, 6, 3)) + 2.0
    target = reference.deescalate(x, 1.5).astype("float32")  # pulls tau above 1
    model, layer = _tau_model(0.9)
    model.fit(x, target, epochs=10, batch_size=16, verbose=0)
    assert float(ops.convert_to_numpy(layer.tau_weight)) == 1.0


def test_trainable_tau_can_start_at_one_and_move_down():
    x = _random((64, 6, 3)) + 2.0
    target = reference.deescalate(x, 0.5).astype("float32")
    model, layer = _tau_model(1.0)
    model.fit(x, target, epochs=5, batch_size=16, verbose=0)
    assert float(ops.convert_to_numpy(layer.tau_weight)) < 0.9


@pytest.mark.parametrize("tau", [1.5, -0.1, "1", None])
def test_tau_outside_unit_interval_is_rejected(tau):
    with pytest.raises(ValueError, match=f"Received: tau={tau!r}"):
        DeEscalation(tau=tau)


def test_rank_two_input_is_rejected():
    with pytest.raises(ValueError, match=r"Received: inputs.shape=\(5, 4\)"):
        DeEscalation()(_random((5, 4)))


def test_mask_of_wrong_shape_is_rejected():
    with pytest.raises(ValueError, match=r"Received: mask.shape=\(3, 4\)"):
        DeEscalation()(_random((3, 5, 4)), mask=np.ones((3, 4), bool))
    with pytest.raises(ValueError, match=r"Received: mask.shape=\(3, 5, 1\)"):
        DeEscalation()(_random((3, 5, 4)), mask=np.ones((3, 5, 1), bool))


def test_config_round_trip():
    layer = DeEscalation(tau=0.25, trainable_tau=True, causal=True, name="d")
    clone = DeEscalation.from_config(layer.get_config())
    assert (clone.tau, clone.trainable_tau, clone.causal, clone.name) == (0.25, True, True, "d")


def test_causal_mean_is_accurate_in_bfloat16():
    # 4096 tokens: a running sum kept in bfloat16 (8 bits of mantissa) stalls near 2^11, far off
    x = _random((1, 4096, 4)) + 3.0
    layer = DeEscalation(tau=1.0, causal=True, dtype="mixed_bfloat16")
    got = ops.convert_to_numpy(ops.cast(layer(x), "float32"))
    want = reference.deescalate(x, 1.0, causal=True)
    assert layer.compute_dtype == "bfloat16"
    np.testing.assert_allclose(got, want, atol=0.05)


def test_a_context_of_one_token_is_left_unchanged():
    # Causal position 0, and a padded sequence with one real token: no common component to remove.
    x = np.random.default_rng(3).standard_normal((2, 4, 3)).astype("float32")
    causal = keras.ops.convert_to_numpy(DeEscalation(tau=1.0, causal=True)(x))
    np.testing.assert_allclose(causal[:, 0], x[:, 0], atol=1e-7)
    assert np.abs(causal[:, 1] - x[:, 1]).max() > 1e-3  # from position 1 on, it de-escalates
    mask = np.array([[True, False, False, False], [True, True, False, False]])
    masked = keras.ops.convert_to_numpy(DeEscalation(tau=1.0)(x, mask=mask))
    np.testing.assert_allclose(masked[0], x[0], atol=1e-7)
    np.testing.assert_allclose(masked[1, :2].mean(axis=0), 0.0, atol=1e-6)


@pytest.mark.parametrize("filled", [0, 1, 3])
def test_causal_memory_equals_the_running_mean_over_memory_then_segment(filled):
    """`memory=` (Transformer-XL's context) is the causal mean over the filled memory rows and positions
    <= t: the same as de-escalating memory + segment joined, with the unfilled rows masked out."""
    rng = np.random.default_rng(5)
    memory, x = rng.standard_normal((2, 3, 4)).astype("float32"), rng.standard_normal((2, 5, 4)).astype("float32")
    slots = np.arange(3) >= 3 - filled  # memory fills from the end
    layer = DeEscalation(tau=0.7, causal=True)
    got = keras.ops.convert_to_numpy(layer(x, memory=memory, memory_mask=slots))
    joined_mask = np.broadcast_to(np.concatenate([slots, np.ones(5, bool)])[None], (2, 8))
    joined = keras.ops.convert_to_numpy(layer(np.concatenate([memory, x], axis=1), mask=joined_mask))[:, 3:]
    np.testing.assert_allclose(got, joined, atol=1e-6)
    with pytest.raises(ValueError, match="Received: causal=False"):
        DeEscalation()(x, memory=memory)
