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


def _same_values_own_variables(copy, original):
    """Whether `copy` holds `original`'s weights, value for value in order, in variables of its own."""
    import keras

    pairs = zip(copy.weights, original.weights, strict=True)
    same = all(np.array_equal(*map(keras.ops.convert_to_numpy, pair)) for pair in pairs)
    return same and not {id(w) for w in copy.weights} & {id(w) for w in original.weights}


def test_a_deescalated_bert_keeps_every_weight_and_centres_each_blocks_output(tmp_path):
    """Eq. (21) with tau = 1 after each encoder block: the last block's token similarity at initialisation is
    about 0 (the BERT's own is not); the copy holds every weight of the original, bit for bit; it saves to
    `.keras` and loads with the same outputs."""
    import keras

    bert, inputs = _bert()
    fixed = keras_tse.deescalate(bert)
    assert [w.path for w in fixed.weights] == [w.path for w in bert.weights]
    assert _same_values_own_variables(fixed, bert)
    whole = {**inputs, "padding_mask": np.ones((2, 8), "int32")}  # the measure reads every token
    assert token_similarity_profile(bert, whole)[-1] > 0.05
    assert abs(token_similarity_profile(fixed, whole)[-1]) < 1e-5
    sequence = keras.ops.convert_to_numpy(fixed(inputs)["sequence_output"])
    real = sequence[1, :6]
    np.testing.assert_allclose(real.mean(axis=0), 0.0, atol=1e-5)  # its real tokens centred, the padding not counted
    fixed.save(tmp_path / "bert.keras")
    loaded = keras.saving.load_model(tmp_path / "bert.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(inputs)["sequence_output"]), sequence, atol=1e-6)


def _contranorm(x, mask, s, t, gamma, beta):
    """ContraNorm in float64 over the real tokens of each row (`mask`), LayerNorm epsilon 1e-6."""
    unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
    logits = np.where(mask[:, None, :], unit @ unit.transpose(0, 2, 1) / t, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    stepped = x - s * (weights / weights.sum(-1, keepdims=True)) @ x
    centred = stepped - stepped.mean(-1, keepdims=True)
    return centred / np.sqrt(stepped.var(-1, keepdims=True) + 1e-6) * gamma + beta


def test_contranorm_on_a_kerashub_bert_and_vit_keeps_every_weight_and_follows_each_block(tmp_path):
    """`deescalate(model, norm="contranorm")`: each encoder block of a BERT (one sequence padded) and of a ViT
    (its blocks inside `ViTEncoder`'s loop) held by a `ContraNormBlock`; the original's weights bit for bit in
    variables of their own, ContraNorm's LayerNorm added a block; the BERT's output is the embeddings through each
    block then ContraNorm over the real tokens, by hand; the similarity profile finds the three blocks of each, and
    both save and load with the same outputs. A decoder refuses it (its softmax reads later tokens)."""
    import keras
    import keras_hub

    bert, inputs = _bert()
    options = {"contranorm_scale": 0.5, "contranorm_temperature": 0.8}
    fixed = keras_tse.deescalate(bert, norm="contranorm", layout_options=options)
    assert fixed.name == f"{bert.name}_contranorm" and isinstance(fixed, keras_hub.models.Backbone)
    assert [type(layer).__name__ for layer in fixed.transformer_layers] == ["ContraNormBlock"] * 3
    kept = {w.path: keras.ops.convert_to_numpy(w) for w in fixed.weights}
    assert all(np.array_equal(kept[w.path], keras.ops.convert_to_numpy(w)) for w in bert.weights)
    assert not {id(w) for w in fixed.weights} & {id(w) for w in bert.weights}
    assert sorted(set(kept) - {w.path for w in bert.weights}) == sorted(
        f"transformer_layer_{i}_contranorm/contra_norm/layernorm/{n}" for i in range(3) for n in ("gamma", "beta")
    )
    x = keras.ops.convert_to_numpy(keras.Model(bert.inputs, bert.get_layer("embeddings_dropout").output)(inputs))
    real = inputs["padding_mask"].astype(bool)
    for block in fixed.transformer_layers:
        y = keras.ops.convert_to_numpy(block.block(x, padding_mask=inputs["padding_mask"])).astype("float64")
        norm = {w.name: keras.ops.convert_to_numpy(w) for w in block.contra_norm.weights}
        x = _contranorm(y, real, 0.5, 0.8, norm["gamma"], norm["beta"]).astype("float32")
    sequence = keras.ops.convert_to_numpy(fixed(inputs)["sequence_output"])
    np.testing.assert_allclose(sequence[real], x[real], atol=2e-4)  # padding's rows: whatever the block leaves there
    whole = {**inputs, "padding_mask": np.ones((2, 8), "int32")}
    assert len(token_similarity_profile(fixed, whole)) == 3
    fixed.save(tmp_path / "bert.keras")
    loaded = keras.saving.load_model(tmp_path / "bert.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(inputs)["sequence_output"]), sequence, atol=1e-6)

    keras.utils.set_random_seed(0)
    vit = keras_hub.models.ViTBackbone(
        image_shape=(16, 16, 3), patch_size=4, num_layers=3, num_heads=2, hidden_dim=16, mlp_dim=32
    )
    images = np.random.default_rng(0).random((2, 16, 16, 3)).astype("float32")
    contra = keras_tse.deescalate(vit, norm="contranorm")
    assert [type(layer).__name__ for layer in contra.layers].count("ContraNormBlock") == 3
    own = {w.path: keras.ops.convert_to_numpy(w) for w in contra.weights}
    assert all(np.array_equal(own[w.path], keras.ops.convert_to_numpy(w)) for w in vit.weights)
    assert len(token_similarity_profile(contra, images)) == 3
    outputs = keras.ops.convert_to_numpy(contra(images))
    assert np.abs(outputs - keras.ops.convert_to_numpy(vit(images))).max() > 1e-3
    contra.save(tmp_path / "vit.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras.saving.load_model(tmp_path / "vit.keras")(images)),
                               outputs, atol=1e-5)  # fmt: skip
    gpt2 = keras_hub.models.GPT2Backbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    with pytest.raises(ValueError, match=r"norm='contranorm'\)` rewrites bidirectional blocks; a causal decoder"):
        keras_tse.deescalate(gpt2, norm="contranorm")
    with pytest.raises(ValueError, match=r"'contranorm', 'centred_attention'\). Received: norm='pre'"):
        keras_tse.deescalate(bert, norm="pre")


def test_centred_multi_head_attention_subtracts_each_querys_uniform_mean_of_the_values():
    """`(P - U) V`: the centred layer's output is Keras's `MultiHeadAttention` on the same weights less, per query,
    the mean of the projected values over the keys its mask allows, through the output kernel (by hand, in
    float64); the causal mask's `U` runs over positions <= t; with every token alike the output is the bias."""
    import keras

    from keras_tse.layers import CentredMultiHeadAttention

    x = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
    mask = np.ones((2, 5, 5), bool)
    mask[1, :, 3:] = False  # the second sequence's last two keys are padding
    plain = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    centred = CentredMultiHeadAttention(num_heads=2, key_dim=4)
    plain(x, x)
    centred(x, x)
    centred.set_weights([np.random.default_rng(i).normal(size=w.shape) for i, w in enumerate(plain.get_weights())])
    plain.set_weights(centred.get_weights())
    w = {v.path.split("/", 1)[1]: keras.ops.convert_to_numpy(v).astype("float64") for v in centred.weights}
    values = np.einsum("bsd,dnh->bsnh", x, w["value/kernel"]) + w["value/bias"]
    for allowed, causal in ((mask, False), (np.tril(np.ones((5, 5), bool))[None].repeat(2, 0), True)):
        u = allowed / allowed.sum(-1, keepdims=True)
        mean = np.einsum("bts,bsnh->btnh", u, values)
        shift = np.einsum("btnh,nhd->btd", mean, w["attention_output/kernel"])
        kwargs = {"use_causal_mask": True} if causal else {"attention_mask": allowed}
        got = keras.ops.convert_to_numpy(centred(x, x, **kwargs))
        np.testing.assert_allclose(got, keras.ops.convert_to_numpy(plain(x, x, **kwargs)) - shift, atol=2e-5)
    alike = np.repeat(x[:, :1], 5, axis=1)
    bias = np.broadcast_to(w["attention_output/bias"], alike.shape)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(centred(alike, alike)), bias, atol=2e-5)


def test_centred_attention_on_a_kerashub_bert_and_vit_keeps_every_weight_and_saves():
    """`deescalate(model, norm="centred_attention")`: each encoder block of a BERT and of a ViT held by a
    `CentredAttentionBlock`, its attention layer then a `CentredMultiHeadAttention`; every weight the original's,
    bit for bit, no weight added; the outputs differ from the original's, the profile finds three blocks, and
    both reload from `.keras` with the same outputs (the class taken again). DeBERTa's attention is refused."""
    import tempfile

    import keras
    import keras_hub

    bert, inputs = _bert()
    fixed = keras_tse.deescalate(bert, norm="centred_attention")
    assert fixed.name == f"{bert.name}_centred_attention"
    assert [type(b).__name__ for b in fixed.transformer_layers] == ["CentredAttentionBlock"] * 3
    assert [type(b.block._self_attention_layer).__name__ for b in fixed.transformer_layers] == [
        "CentredMultiHeadAttention"
    ] * 3
    assert [w.path for w in fixed.weights] == [w.path for w in bert.weights]
    assert _same_values_own_variables(fixed, bert)
    assert type(bert.transformer_layers[0]._self_attention_layer) is keras.layers.MultiHeadAttention
    keras.utils.set_random_seed(0)
    vit = keras_hub.models.ViTBackbone(
        image_shape=(16, 16, 3), patch_size=4, num_layers=3, num_heads=2, hidden_dim=16, mlp_dim=32
    )
    images = np.random.default_rng(0).random((2, 16, 16, 3)).astype("float32")
    centred_vit = keras_tse.deescalate(vit, norm="centred_attention")
    assert _same_values_own_variables(centred_vit, vit)
    with tempfile.TemporaryDirectory() as folder:
        for model, original, x, read in (
            (fixed, bert, inputs, lambda y: y["sequence_output"]),
            (centred_vit, vit, images, lambda y: y),
        ):
            outputs = keras.ops.convert_to_numpy(read(model(x)))
            assert np.abs(outputs - keras.ops.convert_to_numpy(read(original(x)))).max() > 1e-3
            whole = {**x, "padding_mask": np.ones((2, 8), "int32")} if isinstance(x, dict) else x
            assert len(token_similarity_profile(model, whole)) == 3
            model.save(f"{folder}/{model.name}.keras")
            loaded = keras.saving.load_model(f"{folder}/{model.name}.keras")
            np.testing.assert_allclose(keras.ops.convert_to_numpy(read(loaded(x))), outputs, atol=1e-5)
    deberta = keras_hub.models.DebertaV3Backbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    with pytest.raises(ValueError, match=r"centres Keras's `MultiHeadAttention`, which these blocks do not use"):
        keras_tse.deescalate(deberta, norm="centred_attention")


def test_a_deescalated_kerashub_backbone_is_a_backbone_a_task_takes_and_saves_with(tmp_path):
    """The copy of a KerasHub backbone is a KerasHub `Backbone` with the original's attributes (its own layers,
    the blocks among them rewritten): `BertMaskedLM` is built on it and trains a step, which leaves the original's
    weights as they were (the copy's variables are its own), and its `.keras` file loads as the same task with the
    same predictions (the backbone rebuilt from its original's configuration, then its weights)."""
    import keras

    keras_hub = pytest.importorskip("keras_hub")
    bert, inputs = _bert()
    fixed = keras_tse.deescalate(bert)
    assert isinstance(fixed, keras_hub.models.Backbone) and fixed.vocabulary_size == 50 and fixed.hidden_dim == 8
    assert fixed.token_embedding is fixed.get_layer("token_embedding") is not bert.token_embedding
    assert [type(layer).__name__ for layer in fixed.transformer_layers] == ["DeEscalatedBlock"] * 3
    before = [keras.ops.convert_to_numpy(w) for w in bert.weights]
    task = keras_hub.models.BertMaskedLM(backbone=fixed, preprocessor=None)
    x = {**inputs, "mask_positions": np.array([[1, 3], [0, 5]], "int32")}
    task.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    task.train_on_batch(x, np.array([[4, 7], [9, 2]], "int32"))
    assert all(np.array_equal(keras.ops.convert_to_numpy(w), b) for w, b in zip(bert.weights, before, strict=True))
    assert not np.array_equal(keras.ops.convert_to_numpy(fixed.token_embedding.embeddings), before[0])
    predicted = task.predict(x, verbose=0)
    task.save(tmp_path / "task.keras")
    loaded = keras.saving.load_model(tmp_path / "task.keras")
    assert type(loaded.backbone).__name__ == "DeEscalatedBertBackbone"
    np.testing.assert_allclose(loaded.predict(x, verbose=0), predicted, atol=1e-5)


def test_deescalate_of_a_kerashub_task_is_the_same_task_on_the_deescalated_backbone(tmp_path):
    """`deescalate(BertMaskedLM)` is a `BertMaskedLM` (its subclass `DeEscalatedBertMaskedLM`) on a de-escalated
    backbone whose head holds the original head's weights (the task builds its head anew); its last block's
    similarity is ~0 where the original's is not, the original is untouched, and it loads from `.keras` and from
    its KerasHub preset folder as the same task: by `keras_tse.zoo.from_preset` and by KerasHub's own
    `BertMaskedLM.from_preset` and `MaskedLM.from_preset` (which find the task class by the backbone's class),
    while KerasHub's `RobertaMaskedLM.from_preset` finds none; `TextClassifier.from_preset(num_classes=...)` puts a
    new head on the saved de-escalated backbone. A plain functional model holding the backbone as one layer gets
    that layer de-escalated."""
    import keras

    keras_hub = pytest.importorskip("keras_hub")
    bert, inputs = _bert()
    inputs = {**inputs, "padding_mask": np.ones((2, 8), "int32")}  # the measure reads every token
    task = keras_hub.models.BertMaskedLM(backbone=bert, preprocessor=None)
    x = {**inputs, "mask_positions": np.array([[1, 3], [0, 5]], "int32")}
    before = keras.ops.convert_to_numpy(task(x))
    fixed = keras_tse.deescalate(task)
    assert isinstance(fixed, keras_hub.models.BertMaskedLM) and type(fixed).__name__ == "DeEscalatedBertMaskedLM"
    assert type(fixed.backbone).__name__ == "DeEscalatedBertBackbone"
    head, fixed_head = (t.get_layer("mlm_head") for t in (task, fixed))
    assert len(fixed_head.weights) == len(head.weights) > 2
    for original, copy in zip(head.weights, fixed_head.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(copy), keras.ops.convert_to_numpy(original))
    assert token_similarity_profile(task, x)[-1] > 0.05
    assert abs(token_similarity_profile(fixed, x)[-1]) < 1e-5
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(task(x)), before)
    predicted = keras.ops.convert_to_numpy(fixed(x))
    fixed.save(tmp_path / "task.keras")
    loaded = keras.saving.load_model(tmp_path / "task.keras")
    assert type(loaded) is type(fixed)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), predicted, atol=1e-5)
    fixed.save_to_preset(str(tmp_path / "preset"))  # KerasHub's layout: the head's weights in task.weights.h5
    keras.utils.set_random_seed(1)  # a head built anew would not hold the saved values
    hub = keras_hub.models
    for load in (keras_tse.zoo.from_preset, hub.BertMaskedLM.from_preset, hub.MaskedLM.from_preset):
        preset = load(str(tmp_path / "preset"))
        assert type(preset) is type(fixed) and type(preset.backbone) is type(fixed.backbone)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(preset(x)), predicted, atol=1e-5)
    with pytest.raises(ValueError, match="Unable to find a subclass of RobertaMaskedLM"):
        keras_hub.models.RobertaMaskedLM.from_preset(str(tmp_path / "preset"))
    # KerasHub's fine-tuning path: a classifier with a new head on the saved backbone, de-escalated as saved
    tuned = hub.TextClassifier.from_preset(str(tmp_path / "preset"), num_classes=3, preprocessor=None)
    assert type(tuned).__name__ == "DeEscalatedBertTextClassifier"
    assert _same_values_own_variables(tuned.backbone, fixed.backbone)
    assert abs(token_similarity_profile(tuned, inputs)[-1]) < 1e-5
    wrapper = keras.Model(bert.input, bert(bert.input)["sequence_output"])
    assert abs(token_similarity_profile(keras_tse.deescalate(wrapper), inputs)[-1]) < 1e-5


def test_albert_shares_one_block_across_depth_and_is_deescalated_at_every_call():
    """ALBERT calls one `TransformerEncoder` at every depth: its profile has a value per call, and the copy applies
    eq. (21) at each (all ~0), over the same weights (one block's, not one a depth)."""
    import keras_hub

    ids = np.random.default_rng(0).integers(1, 50, (2, 8)).astype("int32")
    inputs = {"token_ids": ids, "segment_ids": np.zeros((2, 8), "int32"), "padding_mask": np.ones((2, 8), "int32")}
    albert = keras_hub.models.AlbertBackbone(
        vocabulary_size=50, num_layers=4, num_heads=2, embedding_dim=8, hidden_dim=8, intermediate_dim=16,
        num_groups=1, num_inner_repetitions=1, max_sequence_length=8,
    )  # fmt: skip
    before = token_similarity_profile(albert, inputs)
    assert len(before) == 4 and before[-1] > 0.05
    fixed = keras_tse.deescalate(albert)
    assert _same_values_own_variables(fixed, albert)  # one block's weights, not one a depth
    profile = token_similarity_profile(fixed, inputs)
    assert len(profile) == 4 and np.abs(profile).max() < 1e-5


def test_deberta_is_deescalated_over_its_real_tokens_and_its_attention_not_misread(tmp_path):
    """DeBERTa's block (`DisentangledAttentionEncoder`, called with relative embeddings and a padding mask) is a
    known kind: the copy keeps every weight, centres each block's real tokens (padding not counted), saves and
    loads; the attention diagnostics, which read eq. (2)'s attention, refuse its disentangled one in one line, and
    the probe leaves their columns empty."""
    import keras
    import keras_hub

    from keras_tse.analysis.diagnostics import block_diagnostics
    from keras_tse.analysis.probe import probe_model

    _, inputs = _bert()
    inputs = {"token_ids": inputs["token_ids"], "padding_mask": inputs["padding_mask"]}
    deberta = keras_hub.models.DebertaV3Backbone(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    fixed = keras_tse.deescalate(deberta)
    assert _same_values_own_variables(fixed, deberta)
    whole = {**inputs, "padding_mask": np.ones((2, 8), "int32")}
    assert token_similarity_profile(deberta, whole)[-1] > 0.05
    assert np.abs(token_similarity_profile(fixed, whole)).max() < 1e-5
    sequence = keras.ops.convert_to_numpy(fixed(inputs))
    np.testing.assert_allclose(sequence[1, :6].mean(axis=0), 0.0, atol=1e-5)  # six real tokens, two padded
    fixed.save(tmp_path / "deberta.keras")
    loaded = keras.saving.load_model(tmp_path / "deberta.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(inputs)), sequence, atol=1e-5)
    with pytest.raises(ValueError, match="disentangled attention adds relative-position terms they do not model"):
        block_diagnostics(deberta, whole)
    rows = probe_model(fixed, whole)  # the similarity columns measured, the attention ones not
    assert [abs(r["t_sim"]) < 1e-5 for r in rows] == [True, True] and all(np.isnan(r["entropy"]) for r in rows)


def test_kerashubs_vit_backbone_is_measured_and_deescalated_block_by_block(tmp_path):
    """KerasHub's `ViTBackbone` runs its blocks in one layer's loop (`ViTEncoder`): the similarity profile still
    gives one value a block, each the token similarity of that block's output computed by hand; `deescalate`
    runs the loop block by block with eq. (21) after each (tau 0: the original's output exactly; tau 1: the last
    block's similarity ~0), every weight the original's in variables of its own, and the copy saves and loads."""
    import keras
    import keras_hub

    from keras_tse.analysis.similarity import token_similarity

    keras.utils.set_random_seed(0)
    vit = keras_hub.models.ViTBackbone(
        image_shape=(16, 16, 3), patch_size=4, num_layers=3, num_heads=2, hidden_dim=16, mlp_dim=32
    )
    images = np.random.default_rng(0).random((2, 16, 16, 3)).astype("float32")
    x, by_hand = vit.get_layer("vit_patching_and_embedding")(images), []
    for block in vit.get_layer("vit_encoder").encoder_layers:
        x = block(x)
        by_hand.append(float(np.mean(keras.ops.convert_to_numpy(token_similarity(x)))))
    np.testing.assert_allclose(token_similarity_profile(vit, images), by_hand, rtol=1e-5)
    assert by_hand[-1] > 0.05
    original = keras.ops.convert_to_numpy(vit(images))
    unchanged = keras_tse.deescalate(vit, tau=0.0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(unchanged(images)), original, atol=1e-6)
    fixed = keras_tse.deescalate(vit)
    assert [type(layer).__name__ for layer in fixed.layers].count("DeEscalatedBlock") == 3
    assert _same_values_own_variables(fixed, vit)
    profile = token_similarity_profile(fixed, images)
    assert len(profile) == 3 and np.abs(profile).max() < 1e-5
    outputs = keras.ops.convert_to_numpy(fixed(images))
    fixed.save(tmp_path / "vit.keras")
    loaded = keras.saving.load_model(tmp_path / "vit.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(images)), outputs, atol=1e-5)


@pytest.mark.one_backend
@pytest.mark.starts_processes
def test_a_deescalated_backbone_saved_as_a_kerashub_preset_loads_in_a_fresh_process(tmp_path):
    """`save_to_preset` writes KerasHub's layout; a new process loads it with KerasHub's `Backbone.from_preset`
    whichever of KerasHub and keras_tse is imported first (KerasHub checks the registered class, made when both
    are imported whole), and with `keras_tse.zoo.from_preset` with nothing but keras_tse imported (KerasHub then
    imported inside the load), all with the saved outputs."""
    import os
    import subprocess
    import sys

    import keras

    bert, inputs = _bert()
    fixed = keras_tse.deescalate(bert)
    fixed.save_to_preset(str(tmp_path / "preset"))
    np.savez(tmp_path / "inputs.npz", **inputs)
    np.save(tmp_path / "expected.npy", keras.ops.convert_to_numpy(fixed(inputs)["sequence_output"]))
    load = """if True:
        import sys
        import numpy as np
        {imports}
        for load in ({loads},):
            model = load(sys.argv[1] + "/preset")
            inputs = dict(np.load(sys.argv[1] + "/inputs.npz"))
            out = keras.ops.convert_to_numpy(model(inputs)["sequence_output"])
            np.testing.assert_allclose(out, np.load(sys.argv[1] + "/expected.npy"), atol=1e-5)
            print(type(model).__name__)
    """
    hub = "lambda path: __import__('keras_hub').models.Backbone.from_preset(path)"
    ways = {  # imports: loads, in order (each a function of the preset's path)
        "import keras\n        import keras_hub\n        import keras_tse": [hub],
        "import keras_tse\n        import keras_hub\n        import keras": [hub],
        "import keras\n        import keras_tse": ["keras_tse.zoo.from_preset", hub],
    }
    for imports, loads in ways.items():
        code = load.format(imports=imports, loads=", ".join(loads))
        run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                             timeout=300, cwd=os.path.dirname(os.path.dirname(keras_tse.__file__)))  # fmt: skip
        assert run.returncode == 0, (imports, run.stderr[-2000:])
        assert run.stdout.strip().splitlines()[-len(loads) :] == ["DeEscalatedBertBackbone"] * len(loads), imports


def _decoder_model(normalize_first):
    """GPT-2 (pre-norm), or a post-norm stack of KerasHub's decoder blocks."""
    import keras

    keras_hub = pytest.importorskip("keras_hub")
    keras.utils.set_random_seed(0)
    if normalize_first:
        return keras_hub.models.GPT2Backbone(
            vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
        )
    tokens = keras.Input((8, 8), name="tokens")
    x = tokens
    for i in range(2):
        x = keras_hub.layers.TransformerDecoder(16, 2, normalize_first=False, name=f"decoder_{i}")(x)
    return keras.Model(tokens, x, name="post_decoder")


def _decoder_inputs(model, change_from=None):
    rng = np.random.default_rng(0)
    if model.name == "post_decoder":
        x = rng.normal(size=(2, 8, 8)).astype("float32")
        if change_from is not None:
            x[:, change_from:] = rng.normal(size=x[:, change_from:].shape)
        return x
    ids = rng.integers(1, 50, (2, 8)).astype("int32")
    if change_from is not None:
        ids[:, change_from:] = 3
    return {"token_ids": ids, "padding_mask": np.ones((2, 8), "int32")}


@pytest.mark.parametrize("normalize_first", [True, False], ids=["gpt2_pre_norm", "post_norm"])
def test_a_deescalated_decoder_keeps_every_weight_reads_no_later_position_and_saves(normalize_first, tmp_path):
    """A KerasHub decoder's running mean before the FFN (eq. 21, causal): its weights copied bit for bit (the
    original model unchanged), tau = 0 the original's outputs, tau = 1 others; no position reads a later one
    (the positions before 5 unchanged when those from 5 on change); `.keras` round trip; fed one position at a
    time from the cache that keeps each position's FFN input beside its keys and values, the whole pass's
    outputs; a cache of keys and values alone is one line."""
    import keras

    model = _decoder_model(normalize_first)
    before = [np.asarray(w).copy() for w in model.weights]
    fixed = keras_tse.deescalate(model)
    assert len(fixed.weights) == len(model.weights)
    assert all(np.array_equal(np.asarray(a), b) for a, b in zip(fixed.weights, before))
    inputs = _decoder_inputs(model)
    own = keras.ops.convert_to_numpy(model(inputs))
    assert all(np.array_equal(np.asarray(a), b) for a, b in zip(model.weights, before))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras_tse.deescalate(model, tau=0.0)(inputs)), own, atol=1e-6)
    out = keras.ops.convert_to_numpy(fixed(inputs))
    assert np.abs(out - own).max() > 0.05
    changed = keras.ops.convert_to_numpy(fixed(_decoder_inputs(model, change_from=5)))
    np.testing.assert_allclose(changed[:, :5], out[:, :5], atol=1e-6)  # no future leakage
    assert np.abs(changed[:, 5:] - out[:, 5:]).max() > 1e-3
    fixed.save(tmp_path / "decoder.keras")
    loaded = keras.saving.load_model(tmp_path / "decoder.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(inputs)), out, atol=1e-5)
    decoder = [layer for layer in fixed.layers if type(layer).__name__ == "DeEscalatedDecoder"][0]
    with pytest.raises(ValueError, match="running mean reads every earlier position's FFN input, which a key/v"):
        decoder(keras.ops.zeros((2, 1, 8)), self_attention_cache=keras.ops.zeros((2, 2, 8, 2, 4)))
    x = keras.random.normal((2, 8, 8), seed=0)  # one position at a time from the cache: the whole pass's outputs
    cache, steps = keras.ops.zeros((2, 3, 8, 2, 4)), []
    for t in range(8):
        y, cache = decoder(x[:, t : t + 1], self_attention_cache=cache, self_attention_cache_update_index=t)
        steps.append(keras.ops.convert_to_numpy(y))
    np.testing.assert_allclose(np.concatenate(steps, 1), keras.ops.convert_to_numpy(decoder(x)), atol=1e-5)


def test_a_model_without_known_blocks_or_with_causal_ones_of_its_own_is_one_line():
    import keras

    from keras_tse import zoo

    plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)], name="plain")
    with pytest.raises(ValueError, match="model 'plain' has none"):
        keras_tse.deescalate(plain)
    gpt = zoo.gpt(depth=2, norm="post", vocab_size=40, segment_len=8, hidden_dim=16, num_heads=2, ffn_dim=32)
    with pytest.raises(ValueError, match=r"is built de-escalated \(`norm='deescalate'`\). Received: causal blocks"):
        keras_tse.deescalate(gpt)
    with pytest.raises(ValueError, match="`tau` must be"):
        keras_tse.deescalate(_bert()[0], tau=1.5)


@pytest.mark.parametrize("family", ["GPT2", "OPT"])
def test_a_deescalated_causal_lm_generates_what_full_passes_of_its_own_model_choose(family, tmp_path):
    """KerasHub's cache keeps no FFN input of earlier positions, which the running mean of eq. (21) reads: the
    de-escalated GPT-2 and OPT causal LMs (subclasses of the task) keep it in their cache. Greedy generation from
    prompts of two lengths equals choosing each next word from a full pass of the copy by hand, differs from the
    original's (weights large enough that eq. (21) changes the choices), and survives a `.keras` and a preset
    folder's round trip."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    sizes = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16)
    backbone = getattr(keras_hub.models, f"{family}Backbone")(**sizes, max_sequence_length=16)
    task = getattr(keras_hub.models, f"{family}CausalLM")(backbone, preprocessor=None)
    rng = np.random.default_rng(1)
    for weight in task.weights:
        weight.assign(rng.normal(0, 0.5, weight.shape).astype(weight.dtype))
    ids, mask = np.zeros((2, 10), "int32"), np.zeros((2, 10), bool)
    ids[:, :6], mask[0, :4], mask[1, :6] = rng.integers(1, 50, (2, 6)), True, True  # prompts of 4 and 6 words
    ids[~mask] = 0

    def greedy_by_hand(model):
        words = ids.copy()
        for t in range(4, 10):
            logits = keras.ops.convert_to_numpy(model({"token_ids": words, "padding_mask": np.ones_like(words)}))
            words[:, t] = np.where(mask[:, t], words[:, t], logits[:, t - 1].argmax(-1))
        return words

    def generated(model):
        model.compile(sampler="greedy")
        return model.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)["token_ids"]

    fixed = keras_tse.deescalate(task)
    assert isinstance(fixed, type(task)) and type(fixed).__name__ == f"DeEscalated{family}CausalLM"
    expected = greedy_by_hand(fixed)
    assert not np.array_equal(expected, greedy_by_hand(task))
    np.testing.assert_array_equal(generated(fixed), expected)
    fixed.save(tmp_path / "lm.keras")
    loaded = keras.saving.load_model(tmp_path / "lm.keras")
    assert type(loaded) is type(fixed)
    np.testing.assert_array_equal(generated(loaded), expected)
    fixed.save_to_preset(str(tmp_path / "preset"))
    for load in (keras_tse.zoo.from_preset, keras_hub.models.CausalLM.from_preset):
        assert type(preset := load(str(tmp_path / "preset"))) is type(fixed)
        np.testing.assert_array_equal(generated(preset), expected)


def test_a_deescalated_gpt2_with_its_preprocessor_writes_the_same_text_after_its_preset_round_trip(tmp_path):
    """A KerasHub task's preset folder (`save_to_preset`) keeps its tokenizer's words as assets beside the task's
    config: `keras_tse.zoo.from_preset` and KerasHub's `GPT2CausalLM.from_preset` give the de-escalated causal LM
    back with them, and it turns a text prompt into the same text."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    vocabulary = {word: i for i, word in enumerate([*"abcdefghijklmnopqrstuvwxyz", "Ġ", "Ġa", "ab", "<|endoftext|>"])}
    tokenizer = keras_hub.models.GPT2Tokenizer(vocabulary=vocabulary, merges=["Ġ a", "a b"])
    sizes = dict(num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=len(vocabulary), **sizes)
    task = keras_hub.models.GPT2CausalLM(backbone, keras_hub.models.GPT2CausalLMPreprocessor(tokenizer, 12))
    fixed = keras_tse.deescalate(task)
    fixed.compile(sampler="greedy")
    text = fixed.generate(["ab c"], max_length=12)
    fixed.save_to_preset(str(tmp_path / "preset"))
    for load in (keras_tse.zoo.from_preset, keras_hub.models.GPT2CausalLM.from_preset):
        loaded = load(str(tmp_path / "preset"))
        loaded.compile(sampler="greedy")
        assert type(loaded) is type(fixed) and loaded.generate(["ab c"], max_length=12) == text


def test_predicting_with_the_copy_leaves_the_original_whole_and_the_other_way_round():
    """The rewritten decoders (GPT-2) and a task's head (BERT's masked-word head) hold copies of the original's
    weights, not its arrays: under JAX a compiled step donates the buffers of its model's variables, and a
    shared one left the other model's weights deleted ("Array has been deleted") at its next call."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    gpt = keras_hub.models.GPT2Backbone(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    bert, inputs = _bert()
    masked = keras_hub.models.BertMaskedLM(bert, preprocessor=None)
    cases = [(gpt, {"token_ids": inputs["token_ids"], "padding_mask": inputs["padding_mask"]})]
    cases += [(masked, {**inputs, "mask_positions": np.array([[1, 3], [0, 5]])})]
    for original, x in cases:
        fixed = keras_tse.deescalate(original)
        before = [keras.tree.flatten(m.predict(x, verbose=0)) for m in (original, fixed)]
        after = [keras.tree.flatten(m.predict(x, verbose=0)) for m in (fixed, original)][::-1]
        for was, now in zip(keras.tree.flatten(before), keras.tree.flatten(after)):
            np.testing.assert_allclose(now, was, atol=1e-6)


def test_bart_whose_blocks_take_their_tokens_by_name_is_measured_and_deescalated_and_whisper_refused():
    """BART calls its decoders with `decoder_sequence=` by name: the profile still gives one value a block
    (encoders, then decoders), tau 0 leaves both outputs as they were (a family outside `keras_hub_families`: the
    plain `DeEscalatedBackbone`), tau 1 centres every encoder block. Whisper's decoder subclasses KerasHub's and
    changes its inside, which the rebuilt decoder would lose: one line."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = {f"{side}_{name}": rng.integers(1, 50, (2, 8)).astype("int32") if name == "token_ids" else np.ones((2, 8))
         for side in ("encoder", "decoder") for name in ("token_ids", "padding_mask")}  # fmt: skip
    bart = keras_hub.models.BartBackbone(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    assert len(token_similarity_profile(bart, x)) == 4 and min(token_similarity_profile(bart, x)) > 0.05
    unchanged = keras_tse.deescalate(bart, tau=0.0)
    assert type(unchanged).__name__ == "DeEscalatedBackbone"
    for name, value in bart(x).items():
        np.testing.assert_allclose(*(keras.ops.convert_to_numpy(v) for v in (unchanged(x)[name], value)), atol=1e-6)
    assert np.abs(token_similarity_profile(keras_tse.deescalate(bart), x)[:2]).max() < 1e-5
    whisper = keras_hub.models.WhisperBackbone(
        vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, num_mels=8,
        max_encoder_sequence_length=16, max_decoder_sequence_length=8,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"a subclass of it .* would lose. Received: blocks \S+ \(WhisperDecoder\)$"):
        keras_tse.deescalate(whisper)


def test_a_model_already_deescalated_is_refused_in_one_line():
    """A second pass would compound tau ((1 - tau)^2 of the mean left, not 1 - tau): a de-escalated KerasHub
    backbone, a task on one, a zoo model built de-escalated (its blocks scanned too) are refused."""
    import keras
    import keras_hub

    from keras_tse import zoo

    twice = r"would apply a fix twice: blocks of model '.*' already carry one \(eq. \(21\), ContraNorm or centred "
    twice += r"attention\); .* Received: "
    twice += "blocks "
    once = keras_tse.deescalate(_bert()[0], tau=0.5)
    with pytest.raises(ValueError, match=twice + r"transformer_layer_0_deescalated \(DeEscalatedBlock\), "):
        keras_tse.deescalate(once, tau=0.5)
    tokens = keras.Input((4, 8))  # one plain block, then one de-escalated: the refusal names the latter alone
    plain = keras_hub.layers.TransformerEncoder(16, 2, name="plain")
    fixed = keras_tse.layers.DeEscalatedBlock(keras_hub.layers.TransformerEncoder(16, 2), name="fixed")
    with pytest.raises(ValueError, match=twice + r"fixed \(DeEscalatedBlock\)$"):
        keras_tse.deescalate(keras.Model(tokens, fixed(plain(tokens))))
    with pytest.raises(ValueError, match=twice):
        keras_tse.deescalate(keras_hub.models.BertMaskedLM(once, preprocessor=None))
    small = dict(depth=2, image_size=8, patch_size=4, hidden_dim=16, ffn_dim=32, num_heads=2)
    for scan, named in ((False, r"block_00 \(TransformerBlock\)"), (True, r"blocks \(ScannedBlocks\)")):
        with pytest.raises(ValueError, match=twice + named):
            keras_tse.deescalate(zoo.vit(norm="deescalate", scan=scan, **small))
    keras_tse.deescalate(zoo.vit(norm="post", **small))
    contra = keras_tse.deescalate(_bert()[0], norm="contranorm")  # ContraNorm then eq. (21): refused too
    with pytest.raises(ValueError, match=twice + r"transformer_layer_0_contranorm \(ContraNormBlock\), "):
        keras_tse.deescalate(contra)


def test_a_sequential_of_blocks_is_measured_and_deescalated_and_other_models_are_refused_in_one_line(tmp_path):
    """A Sequential of KerasHub encoders is read as its functional twin (`as_graph`): its profile is each
    block's output's token similarity computed by hand, `deescalate` shares its weights and centres each block
    (similarity ~0), and the copy saves and loads. A subclassed model (its `call` hides the graph), a lone layer,
    a Sequential with no input yet and a string are each refused in one line."""
    import keras
    import keras_hub

    from keras_tse.analysis.similarity import token_similarity

    keras.utils.set_random_seed(0)
    blocks = [keras_hub.layers.TransformerEncoder(16, 2) for _ in range(2)]
    sequential = keras.Sequential([keras.Input((6, 8)), *blocks])
    x = np.random.default_rng(0).normal(size=(3, 6, 8)).astype("float32")
    by_hand, y = [], x
    for block in blocks:
        y = block(y)
        by_hand.append(float(np.mean(keras.ops.convert_to_numpy(token_similarity(y)))))
    np.testing.assert_allclose(token_similarity_profile(sequential, x), by_hand, rtol=1e-5)
    assert by_hand[-1] > 0.05
    fixed = keras_tse.deescalate(sequential)
    assert _same_values_own_variables(fixed, sequential)
    assert np.abs(token_similarity_profile(fixed, x)).max() < 1e-5
    fixed.save(tmp_path / "sequential.keras")
    loaded = keras.saving.load_model(tmp_path / "sequential.keras")
    np.testing.assert_allclose(*(keras.ops.convert_to_numpy(m(x)) for m in (loaded, fixed)), atol=1e-6)

    class Subclassed(keras.Model):
        def __init__(self):
            super().__init__(name="subclassed")
            self.block = keras_hub.layers.TransformerEncoder(16, 2)

        def call(self, x):
            return self.block(x)

    subclassed = Subclassed()
    subclassed(x)
    hidden = r"a functional or Sequential `keras.Model` .*; a subclassed model's `call` hides its graph. Received: "
    for model, received in ((subclassed, "model of type Subclassed named 'subclassed'"), ("bert", "model of type str"),
                            (blocks[0], f"model of type TransformerEncoder named '{blocks[0].name}'")):  # fmt: skip
        for measure in (keras_tse.deescalate, lambda m: token_similarity_profile(m, x)):
            with pytest.raises(ValueError, match=hidden + received + "$"):
                measure(model)
    with pytest.raises(ValueError, match="Sequential model 'no_input' has no input yet: start it with a `keras.Input`"):
        keras_tse.deescalate(keras.Sequential([keras_hub.layers.TransformerEncoder(16, 2)], name="no_input"))


def test_the_bert_study_builds_its_three_arms_from_one_kerashub_bert():
    """The study's arms (`recipes/lab/bert_ptb_cell.py`) at 2 layers: post-norm is KerasHub's BERT itself,
    de-escalation centres its blocks' outputs (similarity ~0 where BERT's is not), the pre-norm twin has
    the same weights' shapes with every encoder `normalize_first`; the masked-word head reads `MASKED`
    positions, tied to the arm's own input embedding, and starts from the same values in the post-norm and the
    de-escalated arm of a seed (`deescalate` leaves the random state as found); the masking replaces exactly
    those positions by the mask id."""
    import keras

    pytest.importorskip("keras_hub")
    from recipes.lab import bert_ptb_cell as study

    rng = np.random.default_rng(0)
    x, y = study.masked(study.windows(np.arange(1000) % 49, 4, rng), 49, rng)
    assert (np.take_along_axis(x["token_ids"], x["mask_positions"], axis=1) == 49).all()
    assert ((x["token_ids"] == 49).sum(axis=1) == study.MASKED).all() and y.shape == (4, study.MASKED)
    probe = {k: v for k, v in x.items() if k != "mask_positions"}
    shapes, similarity, heads = {}, {}, {}
    for layout in study.LAYOUTS:
        keras.utils.set_random_seed(3)
        model, backbone = study.build(layout, 2, 50)
        assert model(x).shape == (4, study.MASKED, 50)
        assert model.get_layer("mlm_head").token_embedding is backbone.get_layer("token_embedding")
        heads[layout] = [keras.ops.convert_to_numpy(w) for w in model.get_layer("mlm_head").weights]
        shapes[layout] = [tuple(w.shape) for w in backbone.weights]
        similarity[layout] = token_similarity_profile(backbone, probe)[-1]
        encoders = [layer for layer in backbone.layers if type(layer).__name__ == "TransformerEncoder"]
        assert all(e.normalize_first == (layout == "pre") for e in encoders)
    assert shapes["pre"] == shapes["post"] == shapes["deescalate"]
    assert all(np.array_equal(a, b) for a, b in zip(heads["post"], heads["deescalate"], strict=True))
    assert abs(similarity["deescalate"]) < 1e-5 < similarity["post"]
    # the study's words: the first VOCABULARY ids (the most frequent), every later one read as <unk>
    kept = study.VOCABULARY
    capped = study.capped({"train": np.array([0, kept - 1, kept, kept + 7])}, 3)
    assert capped["train"].tolist() == [0, kept - 1, 3, 3]
    with pytest.raises(ValueError, match=f"`<unk>` must be among the {kept} kept words. Received: its id {kept}"):
        study.capped({"train": np.arange(3)}, kept)


def test_a_class_built_on_a_kerashub_class_the_installed_kerashub_lacks_is_not_made_and_is_refused_in_one_line():
    """KerasHub's tasks differ from version to version (its text embedders came in 0.30): a de-escalated class
    of a task the installed KerasHub lacks must not stop `import keras_hub, keras_tse`, which makes the others."""
    import keras_hub

    from keras_tse.zoo import keras_hub_classes

    present = "keras_hub.src.models.bert.bert_masked_lm:BertMaskedLM"
    absent = "keras_hub.src.models.bert.no_such:NoSuch"
    assert keras_hub_classes.installed(present) and not keras_hub_classes.installed(absent)
    assert not keras_hub_classes.installed("keras_hub.src.models.no_such_family.no_such:NoSuch")
    defined = []
    made = keras_hub_classes.lazy_class("DeEscalatedNoSuch", lambda: defined.append(1) or object, needs=(absent,))
    keras_hub_classes.make_all()  # what KerasHub's import runs
    assert defined == []
    message = (r"^DeEscalatedNoSuch is built on KerasHub's keras_hub\.src\.models\.bert\.no_such\.NoSuch, which the "
               rf"installed KerasHub {keras_hub.__version__} lacks$")  # fmt: skip
    with pytest.raises(ImportError, match=message):
        made()


def test_the_kerashub_families_name_every_task_kerashub_declares_for_their_backbones():
    """`keras_hub_families.FAMILIES` is written out (a saved model's classes are registered before KerasHub is
    imported): each of its classes is the installed KerasHub's, and its tasks for a backbone are exactly the task
    classes KerasHub declares for that backbone (`backbone_cls`), so that a new KerasHub task shows here. Each
    de-escalated task's `backbone_cls` is its family's de-escalated backbone, a `DeEscalatedBackbone`."""
    import inspect

    import keras_hub

    from keras_tse._lazy import attribute
    from keras_tse.analysis.similarity import kind_name
    from keras_tse.zoo.deescalated_backbone import deescalated_backbone_class, family_backbone_class
    from keras_tse.zoo.deescalated_task import task_class
    from keras_tse.zoo.keras_hub_families import FAMILIES

    tasks = [c for c in vars(keras_hub.models).values() if inspect.isclass(c) and issubclass(c, keras_hub.models.Task)]
    for backbone, named in FAMILIES.items():
        assert kind_name(attribute(backbone)) == backbone
        declared = {kind_name(c) for c in tasks if c.backbone_cls is attribute(backbone)}
        assert set(named) == declared, backbone
        fixed = family_backbone_class(backbone)
        assert issubclass(fixed, deescalated_backbone_class())
        assert fixed.__name__ == f"DeEscalated{backbone.split(':')[1]}"
        for task in named:
            made = task_class(attribute(task))
            assert issubclass(made, attribute(task)) and made.backbone_cls is fixed
