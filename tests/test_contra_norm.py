"""`keras_tse.layers.ContraNorm`: the formula by hand in NumPy with every option of the authors' forward
(PKU-ML/ContraNorm's `ContraNorm` module), eq. (21)'s de-escalation as the temperature grows, its learned scale and
its `.keras` round trip, on every backend; `norm="contranorm"`, the layout that places it at a block's
`deescalate_at`: where it acts, its refusals, a ViT's `.keras` round trip, the language model's refusal."""

import keras
import numpy as np
import pytest

from keras_tse import zoo
from keras_tse.layers import ContraNorm, DeEscalation, TransformerBlock
from tests.helpers import randomise_weights, tiny_transformer_xl

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _layer_norm(x, epsilon=1e-6):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + epsilon)


def _softmax(z, axis):
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _by_hand(x, s=0.1, t=1.0, dual_norm=False, pre_norm=False, identity=False, scale=None, gamma=1.0, beta=0.0):
    """The authors' forward in float64: unit rows, their softmax similarities (row-, or row- and column-normalised),
    the step away from them, then LayerNorm (`gamma`, `beta` its own); `scale`, a per-channel learned scale where
    given."""
    unit = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    base = unit if pre_norm else x
    similarity = unit @ unit.transpose(0, 2, 1) / t
    weights = _softmax(similarity, -1) + (_softmax(similarity, -2) if dual_norm else 0)
    negatives = weights @ base
    step = s if scale is None else scale
    stepped = (step if scale is not None else 1 + s) * base - step * negatives if identity else base - step * negatives
    return _layer_norm(stepped) * gamma + beta


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


def test_a_padding_mask_leaves_the_padding_out_of_each_softmax():
    """A sequence padded from 5 to 7 tokens and its mask give its real tokens what the 5 tokens alone give (every
    option on, the column softmax too); without the mask the padding pushes them (the outputs differ)."""
    layer = ContraNorm(scale=0.5, temperature=0.7, dual_norm=True)
    padded = np.concatenate([X, np.random.default_rng(3).normal(size=(2, 2, 6))], axis=1).astype("float32")
    mask = np.arange(7)[None, :].repeat(2, 0) < 5
    alone = keras.ops.convert_to_numpy(layer(X.astype("float32")))
    masked = keras.ops.convert_to_numpy(layer(padded, mask=mask))
    np.testing.assert_allclose(masked[:, :5], alone, atol=1e-5)
    np.testing.assert_allclose(alone, _by_hand(X, s=0.5, t=0.7, dual_norm=True), atol=1e-5)
    assert np.abs(keras.ops.convert_to_numpy(layer(padded))[:, :5] - alone).max() > 1e-3
    with pytest.raises(ValueError, match=r"expects a mask of shape \[batch, tokens\]"):
        layer(padded, mask=mask[:, :5])


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


VIT = dict(image_size=8, patch_size=4, hidden_dim=16, num_heads=2, ffn_dim=32, num_classes=3, channels=1)


@pytest.mark.parametrize("place, step", [("output", "y4"), ("pre_ffn", "y2")])
def test_the_contranorm_layout_applies_contranorm_at_the_blocks_deescalation_place(place, step):
    """`norm="contranorm"`: Algorithm 1 with ContraNorm(s, t) on what eq. (21) would read at `deescalate_at` (the
    block output `y4`, or the FFN input `y2`), every weight random, against the NumPy forward of the block's own
    step (at most 2e-5 apart); nothing else of the block changes (its steps before that place are the post-norm
    block's on the same weights)."""
    tokens = keras.ops.convert_to_tensor(np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32"))
    options = dict(contranorm_scale=0.3, contranorm_temperature=0.7)
    block = TransformerBlock(2, 16, norm="contranorm", deescalate_at=place, **options)
    block.build(tokens.shape)
    randomise_weights(block)
    names = ("y2", "y4", "ffn_input", "outputs")
    steps = {k: keras.ops.convert_to_numpy(v) for k, v in block.steps(tokens).items() if k in names}
    placed = block.placed
    assert isinstance(placed, ContraNorm) and (placed.scale, placed.temperature) == (0.3, 0.7)
    gamma, beta = (keras.ops.convert_to_numpy(w) for w in (placed.norm.gamma, placed.norm.beta))
    expected = _by_hand(steps[step].astype("float64"), 0.3, 0.7, gamma=gamma, beta=beta)
    np.testing.assert_allclose(steps["outputs" if place == "output" else "ffn_input"], expected, atol=2e-5)
    post = TransformerBlock(2, 16, norm="post")
    post.build(tokens.shape)
    post.set_weights(block.get_weights()[: len(post.weights)])  # the placed ContraNorm's weights come last
    assert keras.ops.convert_to_numpy(post.steps(tokens)["y2"]) == pytest.approx(steps["y2"], abs=1e-6)


def test_causal_blocks_and_padding_masks_refuse_contranorm_in_one_line():
    """Its softmax reads every token: the GPT, Transformer-XL and a causal block refuse the layout, a padding mask
    is refused by the block, each naming the value."""
    refusal = r"norm='contranorm' reads every position, later ones included, which a causal block may not"
    for build in (lambda: TransformerBlock(2, 16, norm="contranorm", causal=True),
                  lambda: zoo.gpt(depth=1, vocab_size=10, segment_len=4, hidden_dim=8, num_heads=2, ffn_dim=16,
                                  norm="contranorm"),
                  lambda: tiny_transformer_xl(norm="contranorm")):  # fmt: skip
        with pytest.raises(ValueError, match=refusal):
            build()
    block = TransformerBlock(2, 16, norm="contranorm")
    with pytest.raises(ValueError, match="norm='contranorm' reads every token and takes no padding mask"):
        block(np.zeros((1, 3, 8), "float32"), mask=np.array([[True, True, False]]))
    with pytest.raises(ValueError, match="`contranorm_temperature` must be a positive number. Received: "):
        TransformerBlock(2, 16, norm="contranorm", contranorm_temperature=0)
    with pytest.raises(ValueError, match=r"tau set\(s\) de-escalation \(eq. 21\), which norm='contranorm' does not"):
        zoo.vit(depth=1, norm="contranorm", tau=0.5, **VIT)


def test_a_contranorm_vit_saves_and_loads_with_its_options_and_mean_pools_after_it(tmp_path):
    """Every block places ContraNorm, the last one too under mean pooling (it ends in a LayerNorm, so the mean of
    its tokens is no zero vector, unlike eq. (21) at tau 1); the `.keras` file gives the same logits."""
    images = np.random.default_rng(2).uniform(0, 255, (2, 8, 8, 1)).astype("float32")
    model = zoo.vit(depth=2, norm="contranorm", pool="mean", layout_options={"contranorm_scale": 0.4}, **VIT)
    assert [model.get_layer(f"block_{i:02d}").placed.scale for i in range(2)] == [0.4, 0.4]
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    assert again.get_layer("block_01").layout_options == {"contranorm_scale": 0.4, "contranorm_temperature": 1.0}
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(images)), keras.ops.convert_to_numpy(model(images)),
                               atol=1e-6)  # fmt: skip


@pytest.mark.one_backend
def test_keras_tse_train_lm_refuses_contranorm_in_one_line(tmp_path, capsys):
    """`keras-tse train lm --norm contranorm`: one line and exit 2 before any data is read or folder made (the ViT
    trains from the command line: tests/test_layouts.py)."""
    from keras_tse.cli import main as cli

    assert cli.main(["train", "lm", "--smoke", "--norm", "contranorm", "--out", str(tmp_path / "lm")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--norm: received contranorm; expected a layout a causal block takes: post," in err
    assert not (tmp_path / "lm").exists()
