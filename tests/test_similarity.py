import itertools

import numpy as np
import pytest
from keras import ops

from keras_tse.analysis.similarity import (
    cosine_similarity,
    escalation_rate,
    token_diversity,
    token_similarity,
    token_similarity_profile,
)
from tests import reference

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

MEASURES = [token_similarity, token_diversity, cosine_similarity]


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _value(t):
    return ops.convert_to_numpy(t)


def test_identical_tokens_have_similarity_one():
    v = _x((5, 1))
    x = np.ones((7, 1)) @ v.T  # X = 1 v^T: every row the same
    assert _value(token_similarity(x)) == pytest.approx(1.0, abs=1e-6)
    assert _value(token_diversity(x)) == pytest.approx(0.0, abs=1e-6)
    assert _value(cosine_similarity(x)) == pytest.approx(1.0, abs=1e-6)


def test_centred_tokens_have_similarity_zero():
    x = _x((6, 4))
    x -= x.mean(0)
    assert _value(token_similarity(x)) == pytest.approx(0.0, abs=1e-6)


def test_golden_two_tokens():
    # X = [[1, 0], [0, 1]]: mean (1/2, 1/2), ||Pi_1 X||^2 = 2 * 1/2 = 1, ||X||^2 = 2 -> 1/2; cos = 0
    x = np.eye(2)
    assert _value(token_similarity(x)) == pytest.approx(0.5)
    assert _value(cosine_similarity(x)) == pytest.approx(0.0, abs=1e-7)


def test_similarity_matches_the_projector_definition():
    x = _x((9, 5)) + 0.7
    assert _value(token_similarity(x)) == pytest.approx(reference.token_similarity(x), rel=1e-5)


def test_similarity_plus_diversity_is_one():
    x = _x((4, 9, 5)) + np.array([0.0, 0.5, 2.0, -3.0])[:, None, None]
    np.testing.assert_allclose(_value(token_similarity(x)) + _value(token_diversity(x)), 1.0, atol=1e-6)


def test_cosine_similarity_matches_eq1_pair_sum():
    x = _x((6, 3)) + 0.5
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    pairs = [unit[i] @ unit[j] for i, j in itertools.combinations(range(6), 2)]
    assert _value(cosine_similarity(x)) == pytest.approx(np.mean(pairs), abs=1e-6)


def test_escalation_rate_is_proposition_3():
    rng = np.random.default_rng(5)
    for _ in range(5):
        x, y = rng.standard_normal((2, 8, 4)) + rng.standard_normal((2, 1, 4))
        pi1 = np.ones((8, 8)) / 8
        pi2 = np.eye(8) - pi1
        xi1 = np.linalg.norm(pi1 @ y) ** 2 / np.linalg.norm(pi1 @ x) ** 2  # eq. (7)
        xi2 = np.linalg.norm(pi2 @ y) ** 2 / np.linalg.norm(pi2 @ x) ** 2
        identity = 1 + (xi1 / xi2 - 1) * reference.token_similarity(x)  # eq. (6)
        assert _value(escalation_rate(x, y)) == pytest.approx(identity, rel=1e-5)


@pytest.mark.parametrize("measure", MEASURES)
def test_batch_gives_one_value_per_example(measure):
    x = _x((3, 5, 4)) + 1.0
    batched = _value(measure(x))
    assert batched.shape == (3,)
    np.testing.assert_allclose(batched, [_value(measure(x[i])) for i in range(3)], rtol=1e-5)
    assert _value(measure(x[0])).shape == ()


@pytest.mark.parametrize("measure", MEASURES)
def test_backend_tensor_input_in_half_precision(measure):
    x = _x((5, 4)) + 1.0
    got = measure(ops.convert_to_tensor(x.astype("float16")))
    assert _value(got) == pytest.approx(_value(measure(x)), rel=1e-2)


@pytest.mark.parametrize("measure", MEASURES)
def test_all_zero_input_is_rejected(measure):
    with pytest.raises(ValueError, match="zero"):
        measure(np.zeros((4, 3)))


def test_zero_token_is_rejected_by_cosine():
    x = _x((4, 3))
    x[2] = 0.0
    with pytest.raises(ValueError, match="all zeros"):
        cosine_similarity(x)


@pytest.mark.parametrize("measure", MEASURES)
def test_wrong_rank_is_rejected(measure):
    with pytest.raises(ValueError, match=r"Received: x.shape=\(4,\)"):
        measure(np.ones(4))


def test_escalation_rate_needs_matching_shapes():
    with pytest.raises(ValueError, match=r"x.shape=\(4, 3\), y.shape=\(5, 3\)"):
        escalation_rate(_x((4, 3)), _x((5, 3)))


def test_works_inside_a_compiled_predict():
    # model.predict compiles (jax.jit / tf.function): the eager zero-check must step aside there
    import keras

    inputs = keras.Input((5, 4))
    model = keras.Model(inputs, keras.layers.Lambda(token_similarity)(inputs))
    x = _x((3, 5, 4)).astype("float32") + 1.0
    np.testing.assert_allclose(model.predict(x, verbose=0), _value(token_similarity(x)), rtol=1e-5)


def _keras_hub_models():
    keras_hub = pytest.importorskip("keras_hub")
    import keras

    keras.utils.set_random_seed(0)
    sizes = dict(vocabulary_size=50, num_layers=3, num_heads=2, hidden_dim=8, intermediate_dim=16)
    bert = keras_hub.models.BertBackbone(**sizes, max_sequence_length=8)
    gpt2 = keras_hub.models.GPT2Backbone(**sizes, max_sequence_length=8)
    ids = np.random.default_rng(0).integers(1, 50, (2, 8)).astype("int32")
    inputs = {"token_ids": ids, "padding_mask": np.ones((2, 8), "int32")}
    return bert, gpt2, {**inputs, "segment_ids": np.zeros((2, 8), "int32")}, inputs


def test_token_similarity_profile_finds_a_keras_hub_models_blocks_without_a_layer_list():
    """KerasHub's BERT (`TransformerEncoder`) and GPT-2 (`TransformerDecoder`): one value a block, found by
    kind, the values of naming the layers by hand; a model with no known block is one line naming the kinds."""
    import keras

    bert, gpt2, bert_inputs, gpt2_inputs = _keras_hub_models()
    names = [f"transformer_layer_{i}" for i in range(3)]
    for model, inputs in ((bert, bert_inputs), (gpt2, gpt2_inputs)):
        found = token_similarity_profile(model, inputs)
        assert found.shape == (3,)
        np.testing.assert_allclose(found, token_similarity_profile(model, inputs, layers=names), rtol=1e-6)
    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="No Transformer blocks of a known kind .*TransformerEncoder"):
        token_similarity_profile(plain, np.zeros((1, 4)))


def test_token_similarity_profile_finds_the_blocks_of_a_kerashub_task_inside_its_backbone():
    """A KerasHub task holds its backbone as one layer: `BertMaskedLM`'s profile is its backbone's, block for
    block, and `TokenSimilarityMetric` measures it while `fit` trains the task, with no layer list."""
    import keras

    keras_hub = pytest.importorskip("keras_hub")
    from keras_tse.callbacks import TokenSimilarityMetric

    bert, _, inputs, _ = _keras_hub_models()
    task = keras_hub.models.BertMaskedLM(backbone=bert, preprocessor=None)
    x = {**inputs, "mask_positions": np.array([[1, 3], [0, 5]], "int32")}
    expected = token_similarity_profile(bert, inputs)
    np.testing.assert_allclose(token_similarity_profile(task, x), expected, rtol=1e-6)
    metric = TokenSimilarityMetric(x, logs="all")
    task.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    task.fit(x, np.array([[4, 7], [9, 2]], "int32"), epochs=1, verbose=0, callbacks=[metric])
    measured = [metric.records[0][f"tsim_{i}"] for i in range(3)]  # at train begin; a rate of 0 changes nothing
    np.testing.assert_allclose(measured, expected, rtol=1e-5)


def test_forward_intermediates_of_a_kerashub_bert_keeps_its_outputs_and_gives_one_tensor_a_block():
    """BERT's output is a dict (sequence and pooled): it comes back whole, as the model gives it, and the blocks
    after it, one each; the last block's output is BERT's `sequence_output` (post-norm: nothing after it)."""
    import keras

    from keras_tse import zoo

    bert, _, inputs, _ = _keras_hub_models()
    output, blocks = zoo.forward_intermediates(bert, inputs)
    expected = bert(inputs)
    assert sorted(output) == sorted(expected) == ["pooled_output", "sequence_output"]
    for name in expected:
        np.testing.assert_allclose(_value(output[name]), _value(expected[name]), rtol=1e-5, atol=1e-6)
    assert [tuple(b.shape) for b in blocks] == [(2, 8, 8)] * 3
    np.testing.assert_allclose(_value(blocks[-1]), _value(expected["sequence_output"]), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        [np.mean(_value(token_similarity(keras.ops.convert_to_numpy(b)))) for b in blocks],  # a batch's mean
        token_similarity_profile(bert, inputs),
        rtol=1e-5,
    )
