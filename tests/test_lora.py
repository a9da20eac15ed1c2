"""LoRA on the zoo's models (`keras_tse.zoo.enable_lora`): only the adapters train, their `.lora.h5` file puts them
back on a fresh copy of the base model, the saved `.keras` is the merged model, a run resumes its adapters exactly,
and `keras-tse train vit --from-preset ... --lora-rank R` fine-tunes that way."""

import json
import os

import keras
import numpy as np
import pytest

from keras_tse import lora, zoo
from keras_tse.callbacks import RunBackup
from tests.helpers import lab_module, tiny_transformer_xl, tiny_vit

pytestmark = pytest.mark.every_backend  # Keras's adapters and the file's reading on each backend; the command's once

FAMILIES = {  # every family, at its smallest: (builder, inputs, the Dense names its blocks adapt)
    "vit": (
        lambda: tiny_vit(depth=2, patch_size=4, hidden_dim=16, ffn_dim=32, num_classes=3),
        lambda rng: rng.normal(size=(4, 8, 8, 1)).astype("float32"),
        {"query", "key", "value", "attention_output", "ffn_inner", "ffn_outer"},
    ),
    "gpt": (
        lambda: zoo.gpt(depth=2, vocab_size=40, segment_len=6, hidden_dim=16, num_heads=2, ffn_dim=32),
        lambda rng: rng.integers(0, 40, (4, 6)).astype("int32"),
        {"query", "key", "value", "attention_output", "ffn_inner", "ffn_outer"},
    ),
    "transformer_xl": (
        lambda: tiny_transformer_xl(),
        lambda rng: rng.integers(0, 40, (2, 6)).astype("int32"),
        {"qkv", "attention_output", "ffn_inner", "ffn_outer"},
    ),
}


def _adapter_size(layers):
    return sum(layer.kernel.shape[0] * layer.lora_rank + layer.lora_rank * layer.kernel.shape[1] for layer in layers)


def _randomised_adapters(model, seed):
    """Adapters as training leaves them: B is zero when enabled, so a file of fresh ones proves nothing."""
    rng = np.random.default_rng(seed)
    for layer in lora.lora_layers(model):
        for variable in (layer.lora_kernel_a, layer.lora_kernel_b):
            variable.assign(rng.normal(scale=0.3, size=variable.shape).astype("float32"))


def _fresh(build, seed=0):
    keras.utils.set_random_seed(seed)
    return build()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_only_the_adapters_train_and_their_file_puts_them_back_on_a_fresh_base_model(family, tmp_path):
    """Every block's attention and FFN projections get a rank-2 adapter and nothing else trains; the `.lora.h5`
    file reloads onto a fresh copy of the base model with the same outputs; `model.save` writes the merged model,
    which loads with no adapter and the same outputs."""
    build, inputs, names = FAMILIES[family]
    model, x = _fresh(build), inputs(np.random.default_rng(0))
    base = model.predict(x, verbose=0)
    paths = zoo.enable_lora(model, 2)
    adapted = lora.lora_layers(model)
    depth = len([layer for layer in model.layers if layer.name.startswith("block_")])
    assert {layer.name for layer in adapted} == names and len(adapted) == depth * len(names) == len(paths)
    assert {v.path.rsplit("/", 1)[1] for v in model.trainable_weights} == {"lora_kernel_a", "lora_kernel_b"}
    assert sum(int(np.prod(v.shape)) for v in model.trainable_weights) == _adapter_size(adapted)
    np.testing.assert_allclose(model.predict(x, verbose=0), base, atol=1e-6)  # B starts at zero: the same model
    _randomised_adapters(model, seed=1)
    tuned = model.predict(x, verbose=0)
    assert np.abs(tuned - base).max() > 1e-3
    zoo.save_lora_weights(model, tmp_path / "adapters.lora.h5")
    fresh = _fresh(build)
    zoo.load_lora_weights(fresh, tmp_path / "adapters.lora.h5")
    np.testing.assert_allclose(fresh.predict(x, verbose=0), tuned, atol=1e-5)
    model.save(tmp_path / "merged.keras")
    merged = keras.saving.load_model(tmp_path / "merged.keras")
    assert not lora.lora_layers(merged)
    np.testing.assert_allclose(merged.predict(x, verbose=0), tuned, atol=1e-5)


def test_fit_moves_the_adapters_and_a_fresh_head_and_no_other_weight():
    """`train=["head"]` (a fresh classifier head) trains whole beside the adapters; every other weight, biases
    of the adapted layers included (Hu et al.), keeps its value through `fit`."""
    model = _fresh(FAMILIES["vit"][0])
    zoo.enable_lora(model, 2, train=["head"])
    rng = np.random.default_rng(0)
    x, y = FAMILIES["vit"][1](rng), rng.integers(0, 3, 4)
    before = {v.path: np.asarray(v) for v in model.weights}
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss=loss)
    model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    moved = {v.path for v in model.weights if not np.array_equal(before[v.path], np.asarray(v))}
    adapters = {v.path for layer in lora.lora_layers(model) for v in (layer.lora_kernel_a, layer.lora_kernel_b)}
    assert moved == adapters | {"head/kernel", "head/bias"}


def test_a_run_backup_resumes_the_adapters_and_their_frozen_kernels_exactly(tmp_path):
    """`model.save_weights` merges each adapter into its kernel and a load zeroes the adapters (Keras's rule), from
    where both would get zero gradients; a backup also holds the adapter state (`lora.add_state`), so 1 epoch, a
    restart and 1 more give the uninterrupted 2 epochs' weights digit for digit."""
    build = FAMILIES["vit"][0]
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 8, 8, 1)).astype("float32"), rng.integers(0, 3, 8)

    def train(folder, epochs):
        model = _fresh(build)
        zoo.enable_lora(model, 2)
        model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
        backup = RunBackup(str(folder), log=lambda line: None)
        model.fit(x, y, epochs=epochs, batch_size=4, shuffle=False, verbose=0, callbacks=[backup, backup.saver()])
        return model

    whole = train(tmp_path / "whole", 2)
    train(tmp_path / "halves", 1)
    resumed = train(tmp_path / "halves", 2)
    assert resumed.optimizer.iterations.numpy() == 4
    for a, b in zip(whole.weights, resumed.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    adapter_b = lora.lora_layers(resumed)[0].lora_kernel_b
    assert np.abs(np.asarray(adapter_b)).max() > 0  # the adapters trained on after the restart


@pytest.mark.one_backend
def test_bad_uses_are_one_line_naming_what_is_wrong(tmp_path):
    build = FAMILIES["vit"][0]
    with pytest.raises(ValueError, match="`rank` must be a positive integer. Received: rank=0"):
        zoo.enable_lora(_fresh(build), 0)
    with pytest.raises(ValueError, match="scanned loop.*scan=False"):
        zoo.enable_lora(tiny_vit(depth=2, scan=True), 2)
    model = _fresh(build)
    zoo.enable_lora(model, 2)
    with pytest.raises(ValueError, match="already has LoRA adapters \\(rank 2\\)"):
        zoo.enable_lora(model, 4)
    with pytest.raises(ValueError, match="must end in .lora.h5"):
        zoo.save_lora_weights(model, tmp_path / "adapters.h5")
    with pytest.raises(ValueError, match="has no LoRA adapters"):
        zoo.save_lora_weights(_fresh(build), tmp_path / "none.lora.h5")
    with pytest.raises(ValueError, match="`train` names layers .* lacks: \\['classifier'\\]"):
        zoo.enable_lora(_fresh(build), 2, train=["classifier"])
    zoo.save_lora_weights(model, tmp_path / "adapters.lora.h5")
    deeper = tiny_vit(depth=3, patch_size=4, hidden_dim=16, ffn_dim=32, num_classes=3)
    with pytest.raises(ValueError, match="holds adapters for 12 layers and .* has 18; they differ at \\['block_02/"):
        zoo.load_lora_weights(deeper, tmp_path / "adapters.lora.h5")
    other_rank = _fresh(build)
    zoo.enable_lora(other_rank, 3)
    with pytest.raises(ValueError, match="holds rank-2 adapters; .* has rank 3"):
        zoo.load_lora_weights(other_rank, tmp_path / "adapters.lora.h5")
    wider = tiny_vit(depth=2, patch_size=4, hidden_dim=24, ffn_dim=32, num_classes=3)
    with pytest.raises(ValueError, match="lora_kernel_a is \\(16, 2\\) there and \\(24, 2\\) in the model"):
        zoo.load_lora_weights(wider, tmp_path / "adapters.lora.h5")


@pytest.mark.one_backend
def test_lora_on_the_fashion_mnist_preset_trains_the_adapters_and_its_run_keeps_them(tmp_path):
    """`keras-tse train vit --from-preset vit6_fashion_mnist --lora-rank 4`: the run trains 36 adapters (6 blocks x
    6 projections) and no other weight (its own data set: the head kept, frozen); its `best.lora.h5` on a fresh
    preset gives the logits of its merged `best.keras`; without --from-preset the flag is one line."""
    from keras_tse.cli import main

    out = tmp_path / "run"
    argv = ["train", "vit", "--from-preset", "vit6_fashion_mnist", "--dataset", "fashion_mnist", "--lora-rank", "4",
            "--train-size", "60", "--test-size", "20", "--epochs", "1", "--batch-size", "20",
            "--out", str(out)]  # fmt: skip
    assert main.main(argv) == 0
    checkpoints = out / "deescalate" / "checkpoints"
    fresh = zoo.from_preset("vit6_fashion_mnist")
    zoo.load_lora_weights(fresh, checkpoints / "best.lora.h5")
    assert len(lora.lora_layers(fresh)) == 36 and not [v for v in fresh.trainable_weights if "lora" not in v.path]
    merged = keras.saving.load_model(checkpoints / "best.keras", compile=False)
    images = np.random.default_rng(0).integers(0, 256, (3, 28, 28, 1)).astype("uint8")
    np.testing.assert_allclose(fresh.predict(images, verbose=0), merged.predict(images, verbose=0), atol=1e-4)
    assert os.path.getsize(checkpoints / "best.lora.h5") < os.path.getsize(checkpoints / "best.keras") / 3
    base = zoo.from_preset("vit6_fashion_mnist").predict(images, verbose=0)
    assert not np.allclose(merged.predict(images, verbose=0), base)  # the adapters trained
    assert main.main(["train", "vit", "--lora-rank", "4", "--smoke", "--out", str(tmp_path / "no")]) == 2


@pytest.mark.one_backend
def test_the_cards_footprint_is_what_the_rank_4_arm_trains_and_writes(tmp_path):
    """zoo/vit6_fashion_mnist.md's LoRA footprint, measured again: 36 adapted layers, each `r (in + out)` adapter
    parameters, the fresh head's 650, the adapter file's bytes."""
    study = lab_module("fine_tune_study")
    with open(study.FOOTPRINT) as f:
        recorded = json.load(f)
    measured = study.footprint(str(tmp_path))
    assert measured == recorded
    assert measured["adapter_parameters"] == 6 * 4 * (4 * (64 + 64) + (64 + 128) + (128 + 64))  # 6 blocks, width 64
    assert measured["trained_parameters"] - measured["adapter_parameters"] == 64 * 10 + 10


@pytest.mark.one_backend
def test_the_cards_lora_sentence_gives_the_result_files_verdict_seed_means():
    """zoo/vit6_fashion_mnist.md's LoRA numbers: seeds 1-5 of each arm at its chosen rate, from fine_tune.csv."""
    import csv

    study = lab_module("fine_tune_study")
    with open(study.RESULTS, newline="") as f:
        rows = list(csv.DictReader(f))

    def mean(arm, rate, column):
        values = [float(r[column]) for r in rows if (r["arm"], r["learning_rate"]) == (arm, rate) and r["seed"] != "0"]
        assert len(values) == 5
        return sum(values) / 5

    with open(study.CARD) as f:
        card = " ".join(f.read().split())
    accuracy = [100 * mean(arm, rate, "test_accuracy") for arm, rate in (("lora_4", "0.009"), ("all_weights", "0.003"))]
    loss = [mean(arm, rate, "train_loss") for arm, rate in (("lora_4", "0.009"), ("all_weights", "0.003"))]
    assert f"reach {accuracy[0]:.1f}% test accuracy against {accuracy[1]:.1f}%" in card
    assert f"final training loss ({loss[0]:.3f} against {loss[1]:.3f})" in card
    assert (
        "| do rank-4 adapters match training every weight? | lora_4 | all_weights | inconclusive | A loses to B |"
        in card
    )
