"""`keras_tse.layers.ContraNorm`: the formula by hand in NumPy with every option of the authors' forward
(PKU-ML/ContraNorm's `ContraNorm` module), eq. (21)'s de-escalation as the temperature grows, its learned scale and
its `.keras` round trip, on every backend."""

import keras
import numpy as np
import pytest

from keras_tse.layers import ContraNorm, DeEscalation

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _layer_norm(x, epsilon=1e-6):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon)


def _softmax(z, axis):
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _by_hand(x, s=0.1, t=1.0, dual_norm=False, pre_norm=False, identity=False, scale=None):
    """The authors' forward in float64: unit rows, their softmax similarities (row-, or row- and column-normalised),
    the step away from them, then LayerNorm; `scale`, a per-channel learned scale where given."""
    unit = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    base = unit if pre_norm else x
    similarity = unit @ unit.transpose(0, 2, 1) / t
    weights = _softmax(similarity, -1) + (_softmax(similarity, -2) if dual_norm else 0)
    negatives = weights @ base
    step = s if scale is None else scale
    stepped = (step if scale is not None else 1 + s) * base - step * negatives if identity else base - step * negatives
    return _layer_norm(stepped)


X = np.random.default_rng(0).normal(size=(2, 5, 6))


@pytest.mark.parametrize(
    "options",
    [{}, {"scale": 0.5, "temperature": 0.3}, {"dual_norm": True}, {"pre_norm": True}, {"identity": True},
     {"scale": 0.0}],
)  # fmt: skip
def test_contranorm_is_the_authors_forward_by_hand(options):
    """Each option against the NumPy computation, in float32: at most 2e-5 apart (measured on a 2-core CPU: 2.4e-7 JAX,
    3.4e-7 PyTorch, 2.8e-7 TensorFlow)."""
    got = keras.ops.convert_to_numpy(ContraNorm(**options)(X.astype("float32")))
    s, t = options.get("scale", 0.1), options.get("temperature", 1.0)
    flags = {k: v for k, v in options.items() if k in ("dual_norm", "pre_norm", "identity")}
    np.testing.assert_allclose(got, _by_hand(X, s, t, **flags), atol=2e-5)


def test_a_large_temperature_makes_it_eq_21_before_a_layer_norm():
    """As t grows the softmax weights become 1/n: ContraNorm(s, t=1e9) is DeEscalation(tau=s) then LayerNorm."""
    x = X.astype("float32")
    contranorm = keras.ops.convert_to_numpy(ContraNorm(scale=0.7, temperature=1e9)(x))
    deescalated = keras.ops.convert_to_numpy(DeEscalation(tau=0.7)(x))
    np.testing.assert_allclose(contranorm, _layer_norm(deescalated.astype("float64")), atol=2e-5)
    assert not np.allclose(contranorm, keras.ops.convert_to_numpy(ContraNorm(scale=0.7)(x)), atol=1e-3)


def test_a_learned_scale_is_one_weight_a_channel_and_saves_with_the_layer(tmp_path):
    """`learnable`: a `[channels]` weight starting at s (log s with `positive`), the step taken with it; the layer
    in a model round-trips through a `.keras` file with its options and weights."""
    layer = ContraNorm(scale=0.2, learnable=True, positive=True, identity=True, name="contranorm")
    inputs = keras.Input((5, 6))
    model = keras.Model(inputs, layer(inputs))
    assert [tuple(w.shape) for w in layer.trainable_weights] == [(6,), (6,), (6,)]  # the scale, LN's gamma and beta
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.scale_weight), np.log(0.2), rtol=1e-6)
    per_channel = np.linspace(0.1, 0.6, 6)
    layer.scale_weight.assign(np.log(per_channel).astype("float32"))
    got = keras.ops.convert_to_numpy(model(X.astype("float32")))
    np.testing.assert_allclose(got, _by_hand(X, identity=True, scale=per_channel), atol=2e-5)
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(X.astype("float32"))), got, atol=1e-6)
    assert again.get_layer("contranorm").get_config()["positive"] is True


@pytest.mark.parametrize(
    "kwargs, message",
    [({"scale": -0.1}, r"`scale` must be a number >= 0. Received: scale=-0.1"),
     ({"temperature": 0}, r"`temperature` must be a positive number. Received: temperature=0"),
     ({"scale": 0, "learnable": True, "positive": True}, r"`positive` learns log\(scale\)")],
)  # fmt: skip
def test_a_bad_option_is_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ContraNorm(**kwargs)
