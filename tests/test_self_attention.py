import keras
import numpy as np
import pytest
from keras import ops
from keras.src.testing import TestCase

from keras_tse.layers import SelfAttention
from tests import reference
from tests.helpers import randomise_weights

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


class SelfAttentionLayerTest(TestCase):
    def test_layer_harness(self):
        self.run_layer_test(
            SelfAttention,
            init_kwargs={"num_heads": 2, "attention_dropout": 0.1, "causal": True},
            input_shape=(2, 5, 8),
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=5,  # q, k, v kernels; output kernel and bias
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=1,  # the attention dropout
            supports_masking=True,
        )


def _x(shape=(3, 6, 8), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _mask():
    return np.arange(6)[None, :] < np.array([6, 4, 2])[:, None]


def _weights(layer):
    return [
        ops.convert_to_numpy(w).astype("float64")
        for w in (
            layer.query_dense.kernel,
            layer.key_dense.kernel,
            layer.value_dense.kernel,
            layer.output_dense.kernel,
            layer.output_dense.bias,
        )
    ]


@pytest.mark.usefixtures("float32_matmuls")  # a float32 reference: TF32 on a GPU misses its tolerance
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_both_paths_match_numpy_eq2(causal, masked):
    x, mask = _x(), (_mask() if masked else None)
    layer = SelfAttention(num_heads=2, causal=causal)
    layer.build(x.shape)
    randomise_weights(layer)
    want, want_p = reference.self_attention(x.astype("float64"), *_weights(layer), 2, causal=causal, mask=mask)
    fused = ops.convert_to_numpy(layer(x, mask=mask))
    probed, p = layer(x, mask=mask, return_attention_scores=True)
    np.testing.assert_allclose(fused, want, atol=2e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(probed), want, atol=2e-5)
    np.testing.assert_allclose(ops.convert_to_numpy(p), want_p, atol=2e-6)


def test_attention_matrices_are_row_stochastic_and_respect_masks():
    x, mask = _x(), _mask()
    _, p = SelfAttention(num_heads=4, head_dim=3, causal=True)(x, mask=mask, return_attention_scores=True)
    p = ops.convert_to_numpy(p)
    assert p.shape == (3, 4, 6, 6)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-6)  # eq. (2): P 1 = 1
    upper = np.triu(np.ones((6, 6), bool), k=1)
    assert np.all(p[..., upper] == 0.0)  # causal: no weight on later keys
    # keys beyond a sequence's real length get no weight (their query rows still see real keys)
    assert np.all(p[1, :, :, 4:] == 0.0) and np.all(p[2, :, :, 2:] == 0.0)


def test_explicit_head_dim_sets_inner_width():
    layer = SelfAttention(num_heads=10, head_dim=41)
    layer.build((2, 5, 410))
    assert tuple(layer.query_dense.kernel.shape) == (410, 410)
    assert tuple(layer.output_dense.kernel.shape) == (410, 410)


def test_hidden_size_that_does_not_divide_is_rejected():
    with pytest.raises(ValueError, match=r"choose num_heads in \[1, 2, 5, 10\].*hidden=10, num_heads=3"):
        SelfAttention(num_heads=3)(_x((1, 4, 10)))


@pytest.mark.parametrize(
    "kwargs, received",
    [({"num_heads": 0}, "num_heads=0"), ({"num_heads": 2, "attention_dropout": 1.0}, "attention_dropout=1.0")],
)
def test_bad_arguments_are_rejected(kwargs, received):
    with pytest.raises(ValueError, match=received):
        SelfAttention(**kwargs)


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch.compile is PyTorch's")
def test_attention_compiles_as_one_graph_under_torch_compile():
    """`fullgraph=True` fails on any graph break. Keras' flash-kernel check (a C++ `SDPAParams`) used to
    break the graph in every block, and dynamo then recompiled per block until its recompile limit."""
    import torch

    layer = SelfAttention(num_heads=2)
    x = ops.convert_to_tensor(_x())
    eager = layer(x)
    compiled = torch.compile(lambda inputs: layer(inputs), fullgraph=True)(x)
    np.testing.assert_allclose(ops.convert_to_numpy(compiled), ops.convert_to_numpy(eager), atol=1e-5)


@pytest.mark.parametrize("tokens", [65, 64])
def test_jax_asks_for_cudnn_attention_only_where_its_gradient_takes_the_length(tokens, monkeypatch):
    """cuDNN's attention gradient refuses an odd sequence length (a ViT's 65 tokens), which Keras' JAX check,
    asked for inference, lets through: inside `scan` training then stopped on a GPU. Odd lengths go to
    XLA's attention from the start; PyTorch always skips Keras' check (its graph breaks under
    torch.compile); TensorFlow keeps Keras' choice."""
    from keras_tse.layers import _fused_attention

    asked = {}

    def record(query, key, value, **kwargs):
        asked.update(kwargs)
        return value

    monkeypatch.setattr(_fused_attention.ops, "dot_product_attention", record)
    x = ops.zeros((2, tokens, 4, 8))
    _fused_attention.fused_attention(x, x, x)
    expected = {"torch": False, "jax": None if tokens % 2 == 0 else False, "tensorflow": None}
    assert asked.get("flash_attention") is expected[keras.backend.backend()]
