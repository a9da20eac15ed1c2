import numpy as np
import pytest
from keras import ops

import keras_tse
from keras_tse.analysis.similarity import token_similarity_profile
from keras_tse.layers import DeEscalation, PostNormBlock, TransformerBlock
from keras_tse.zoo import from_preset, full_config, presets, vit
from tests.helpers import only_on

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

TINY = dict(depth=3, image_size=8, patch_size=2, channels=1, hidden_dim=16, ffn_dim=32, num_heads=2)


def _images(shape=(4, 8, 8, 1), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


@pytest.fixture(scope="module")
def preset_model():
    """Each preset built once for this module: an 80-block model takes seconds to build on TensorFlow."""
    built = {}

    def get(name):
        if name not in built:
            built[name] = from_preset(name)
        return built[name]

    yield get
    built.clear()


@pytest.mark.one_backend  # 20-50 s a preset; the blocks' numerics run on every backend at small size
@pytest.mark.parametrize("norm", ["post", "pre", "deescalate"])
def test_paper_vit80_size_and_escalation_at_init(norm, preset_model):
    model = preset_model(f"vit80_cifar10_{norm}")  # Table 1's ViT at depth 80, the paper's variant
    assert 22e6 <= model.count_params() <= 26e6, model.count_params()
    assert tuple(model.output.shape) == (None, 10)
    blocks = [layer for layer in model.layers if isinstance(layer, TransformerBlock) and layer.norm == norm]
    assert len(blocks) == 80
    if norm == "post":
        profile = token_similarity_profile(model, _images((2, 32, 32, 3)))
        assert profile.shape == (80,) and profile[-1] > 0.9, profile
    if norm == "deescalate":
        profile = token_similarity_profile(model, _images((2, 32, 32, 3)))
        assert np.all(profile < 0.05), profile
        assert all(b.norm == "deescalate" and b.deescalate_at == "output" and b.tau == 1.0 for b in blocks)


@pytest.mark.one_backend
def test_table1_defaults():
    model = vit(depth=2)
    embedding = model.get_layer("patch_embedding")
    block = model.get_layer("block_00")
    assert (embedding.patch_size, embedding.hidden_dim, embedding.num_tokens) == (4, 192, 65)
    assert (block.num_heads, block.ffn_dim, block.self_attention._head_dim) == (8, 384, 24)  # Table 1
    assert model.get_layer("head").units == 10


def test_mean_pooling_after_full_deescalation_still_learns():
    # tau=1 at every block output would zero the token mean the head sees; the last block keeps it.
    model = vit(norm="deescalate", pool="mean", tau=1.0, **TINY)
    layouts = [model.get_layer(f"block_{i:02d}").norm for i in range(3)]
    assert layouts == ["deescalate", "deescalate", "post"]
    pooled = keras_tse.analysis.similarity.block_outputs_model(model, ["mean_pool"]).predict(_images(), verbose=0)
    assert np.abs(pooled).max() > 0.1
    logits = model.predict(_images(), verbose=0)
    assert np.std(logits, axis=0).max() > 1e-3  # different images, different logits


def test_the_broken_combination_really_is_broken():
    # The reason for the rule above: after DeEscalation(tau=1), the mean over tokens is exactly 0.
    x = _images((2, 5, 4))
    np.testing.assert_allclose(ops.convert_to_numpy(ops.mean(DeEscalation(1.0)(x), axis=1)), 0.0, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"norm": "postnorm"}, r"Received: norm='postnorm'"),
        ({"pool": "max"}, r"one of \('cls', 'mean'\). Received: pool='max'"),
        ({"deescalate_at": "input"}, "Received: deescalate_at='input'"),
        ({"patch_size": 3}, "image_size=8, patch_size=3"),
        ({"num_heads": 3}, "hidden=16, num_heads=3"),
        ({"depth": 0}, "Received: depth=0"),
        ({"tau": 1.2}, "Received: tau=1.2"),
        ({"num_classes": -1}, "Received: num_classes=-1"),  # 0: the pooled features
    ],
)
def test_bad_arguments_fail_up_front(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        vit(**{**TINY, **kwargs})


# Every 80-block preset once (20-40 s each): their blocks run on every backend at small size
# (tests/test_baselines.py, test_layouts.py), and the preset adds only the depth.


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.one_backend)
        for n in sorted(n for n, p in presets().items() if p["builder"] == "vit")
    ],
)
def test_every_vit_preset_forward_pass_is_finite(name, preset_model):
    config = full_config(name)  # the builder's defaults filled in (a shipped preset leaves num_classes at 10)
    model = preset_model(name)
    x = _images((2, config["image_size"], config["image_size"], config.get("channels", 3)))
    logits = model.predict(x, verbose=0)
    assert logits.shape == (2, config["num_classes"]) and np.all(np.isfinite(logits))


@pytest.mark.one_backend
def test_paper_presets_are_the_three_variants():
    p = presets()
    assert {p[f"vit80_cifar10_{n}"]["config"]["norm"] for n in ("post", "pre", "deescalate")} == {
        "post",
        "pre",
        "deescalate",
    }


def test_from_preset_overrides_and_rejects_unknown():
    model = from_preset("vit12_cifar10_small", depth=2, norm="pre")
    assert model.get_layer("block_01").norm == "pre"
    with pytest.raises(ValueError, match=r"Received unknown overrides: \['layers'\]"):
        from_preset("vit12_cifar10_small", layers=4)
    with pytest.raises(ValueError, match="Received: preset='vit1000'"):
        from_preset("vit1000")


def test_de_escalation_options_on_a_norm_that_ignores_them_are_refused():
    with pytest.raises(ValueError, match=r"tau set\(s\) de-escalation .* Received: norm='post', tau=0.3"):
        vit(depth=1, norm="post", tau=0.3)
    with pytest.raises(ValueError, match="Received: norm='pre', trainable_tau=True, deescalate_at='pre_ffn'"):
        vit(depth=1, norm="pre", trainable_tau=True, deescalate_at="pre_ffn")
    assert vit(depth=1, norm="post", tau=1.0).count_params() > 0  # the defaults, given, are fine


def test_a_vit_composed_from_public_layers_saves_and_loads_in_safe_mode(tmp_path):
    import keras

    from keras_tse.layers import ClassTokenPooling, PatchEmbedding

    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            PatchEmbedding(8, 2, 16),
            *[PostNormBlock(2, 32, deescalate="output") for _ in range(2)],
            keras.layers.LayerNormalization(epsilon=1e-5),
            ClassTokenPooling(),
            keras.layers.Dense(3),
        ]
    )
    images = np.random.default_rng(0).normal(size=(4, 8, 8, 1)).astype("float32")
    tokens = keras.Sequential(model.layers[:-2])(images)
    np.testing.assert_allclose(ops.convert_to_numpy(model.layers[-2](tokens)), ops.convert_to_numpy(tokens)[:, 0])
    path = str(tmp_path / "composed.keras")
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)  # no Lambda: nothing unsafe to refuse
    np.testing.assert_allclose(loaded.predict(images, verbose=0), model.predict(images, verbose=0), atol=1e-6)
    with pytest.raises(
        ValueError, match=r"ClassTokenPooling expects inputs of rank 3.*Received: inputs.shape=\(4, 16\)"
    ):
        ClassTokenPooling()(np.zeros((4, 16), "float32"))


def _scanned_twin(unrolled, depth, **kwargs):
    """`vit(scan=True)` holding `unrolled`'s weights: the blocks' stacked by `ScannedBlocks.from_blocks`."""
    from keras_tse.layers import ScannedBlocks

    scanned = vit(**{**TINY, "depth": depth, **kwargs}, scan=True)
    for layer in scanned.layers:
        if layer.name != "blocks" and layer.weights:
            layer.set_weights(unrolled.get_layer(layer.name).get_weights())
    stack = ScannedBlocks.from_blocks([unrolled.get_layer(f"block_{i:02d}") for i in range(depth)])
    stack.build(unrolled.get_layer("block_00").input.shape)
    scanned.get_layer("blocks").set_weights([ops.convert_to_numpy(w) for w in stack.weights])
    return scanned


@pytest.mark.usefixtures("float32_matmuls")  # scanned and unrolled agree to 1e-5 only in full float32, not TF32
@pytest.mark.parametrize(  # layerscale: the pre-norm body and its weights; JAX, whose scan compiles, runs both
    "norm", [only_on("deescalate", "jax", "torch"), only_on("layerscale", "jax", "tensorflow")]
)
def test_scan_is_the_same_model_its_probes_and_its_training_included(norm):
    """`scan=True` (one `keras.ops.scan` over stacked block weights) on the same weights: the same
    logits, the same per-block similarity, and the same losses over three AdamW steps."""
    import keras

    keras.utils.set_random_seed(0)
    unrolled = vit(**TINY, norm=norm)
    scanned = _scanned_twin(unrolled, TINY["depth"], norm=norm)
    assert unrolled.count_params() == scanned.count_params()
    x, y = _images(), np.arange(4) % 10
    np.testing.assert_allclose(scanned.predict(x, verbose=0), unrolled.predict(x, verbose=0), atol=1e-5)
    np.testing.assert_allclose(token_similarity_profile(scanned, x), token_similarity_profile(unrolled, x), atol=1e-5)
    losses = []
    for model in (unrolled, scanned):
        model.compile(keras.optimizers.AdamW(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        losses.append([float(model.train_on_batch(x, y)) for _ in range(3)])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    assert losses[1][-1] < losses[1][0]


def test_scan_draws_each_block_like_a_block_and_saves_and_loads(tmp_path):
    import keras

    keras.utils.set_random_seed(0)
    model = vit(**TINY, scan=True)
    stack = model.get_layer("blocks")
    kernel = next(ops.convert_to_numpy(w) for w in stack.weights if w.shape == (3, 16, 32))  # the FFN's first
    assert not np.allclose(kernel[0], kernel[1])  # independent draws, one per block
    assert np.abs(kernel).max() <= 1 / np.sqrt(16) and np.abs(kernel).max() > 0.9 / np.sqrt(16)  # torch's bound
    path = str(tmp_path / "scanned.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    x = _images()
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)


def test_a_scanned_learned_tau_stays_in_the_unit_interval_fresh_or_loaded(tmp_path):
    """eq. (21)'s learned tau is clipped into [0, 1] after every step, in the stack as in each block."""
    import keras

    model = vit(**TINY, norm="deescalate", trainable_tau=True, scan=True)
    path = str(tmp_path / "scanned_tau.keras")
    model.save(path)
    for candidate in (model, keras.saving.load_model(path)):
        tau = next(w for w in candidate.weights if w.name.endswith("tau"))
        tau.assign(np.array([0.0, 0.5, 1.0], "float32"))
        # a step of -0.25 on the first and +0.25 on the others: below 0, inside, above 1
        keras.optimizers.SGD(1.0).apply([ops.convert_to_tensor([0.25, -0.25, -0.25])], [tau])
        np.testing.assert_allclose(ops.convert_to_numpy(tau), [0.0, 0.75, 1.0])


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(dropout=0.1), "scan=True needs identical blocks without dropout. Received: dropout=0.1"),
        (dict(pool="mean"), "Received: pool='mean' with deescalate_at='output'"),
    ],
)
def test_scan_refuses_blocks_that_differ_or_carry_random_state(kwargs, expected):
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        vit(**TINY, **kwargs, scan=True)
