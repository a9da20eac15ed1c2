"""Same command, same seed, same machine and backend: the same numbers."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from recipes.lab import sweep
from tests.helpers import tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _train_once(seed):
    """A short fit with every source of randomness in play: init, shuffled order, dropout."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 10, 96)
    model = tiny_vit(dropout=0.1, norm="deescalate")
    model.compile(keras.optimizers.AdamW(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = []
    callback = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: losses.append(float(logs["loss"])))
    model.fit(x, y, batch_size=16, epochs=2, shuffle=True, verbose=0, callbacks=[callback])
    return losses, keras.ops.convert_to_numpy(model.get_layer("head").kernel)


def test_a_short_training_twice_gives_identical_losses_and_weights():
    first, second = _train_once(3), _train_once(3)
    assert len(first[0]) == 12
    assert first[0] == second[0]  # bit-for-bit, every batch
    np.testing.assert_array_equal(first[1], second[1])
    # ... and the seed does matter: another seed draws other initial weights (a third training would
    # show no more than this, at the cost of one)
    heads = []
    for seed in (3, 4):
        keras.utils.set_random_seed(seed)
        heads.append(keras.ops.convert_to_numpy(tiny_vit(dropout=0.1, norm="deescalate").get_layer("head").kernel))
    assert not np.array_equal(heads[0], heads[1])


@pytest.mark.one_backend  # each backend's determinism is the training test above; this is the sweep's rows
def test_a_sweep_cell_twice_gives_the_same_row(tmp_path):
    config = sweep.SweepConfig.quick(steps=6, depths=(2,), norms=("deescalate",), seeds=(1,))
    (cell,) = sweep.cells(config)
    data = sweep._images("digits")
    rows = [sweep.run_cell(cell, config, data, str(tmp_path / f"run_{i}")) for i in range(2)]
    for row in rows:
        row.pop("wall_s")
    assert rows[0] == rows[1]


@pytest.mark.one_backend  # each backend's determinism is the in-process training test above; this is the CLI's
@pytest.mark.starts_processes  # two demo processes under JAX
def test_demo_in_two_fresh_processes_prints_identical_numbers(tmp_path):
    """The README's promise, the way a user meets it: the same `keras-tse demo` command (on JAX, the
    README's backend), run twice as separate processes, prints the same table and writes the same
    numbers. Shrunk to 2 blocks, 1 epoch and one seed to keep CI short."""
    outputs = []
    for run in range(2):
        out = tmp_path / f"demo{run}"
        argv = ["demo", "--epochs", "1", "--depth", "2", "--seeds", "1", "--verbose", "0", "--out", str(out)]
        printed = subprocess.run(
            [sys.executable, "-m", "keras_tse.cli.main", *argv],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"},
        ).stdout
        table = printed[printed.index("Token similarity") : printed.index(" s in all")]
        outputs.append((table.rsplit("\n", 1)[0], json.loads((out / "demo.json").read_text())["runs"]))
    assert outputs[0] == outputs[1]
    assert "| deescalate | 0.0000 |" in outputs[0][0]  # tau = 1 at the last block output: centred tokens
    assert [r["seed"] for r in outputs[0][1]["post"]] == [1]  # one entry per seed


ON_JAX_ONLY = pytest.mark.skipif(
    keras.backend.backend() != "jax",
    reason="the RandAugment recipe once, on JAX: in tf.data each batch draws from its own seed whatever the "
    "backend (tests/test_data.py checks the batches do not depend on timing)",
)


@pytest.mark.large
@pytest.mark.every_backend
@ON_JAX_ONLY  # the language model's command twice: tests/test_processes.py, beside its two-process run
def test_the_vit_recipes_smoke_command_twice_gives_the_same_numbers(tmp_path):
    """The same recipe command (--smoke, same seed) in two fresh processes, side by side on one machine
    and backend, gives the same summary, RandAugment and shuffling included."""
    recipe, argv = "cifar10_vit", ["--smoke", "--norm", "deescalate", "--epochs", "1", "--depth", "1"]
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "recipes", f"{recipe}.py")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    runs = [
        subprocess.Popen(
            [sys.executable, script, *argv, "--out", str(tmp_path / f"run_{i}")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(2)
    ]
    summaries = []
    for i, run in enumerate(runs):
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
        with open(tmp_path / f"run_{i}" / "deescalate" / "summary.json") as f:
            summaries.append(json.load(f))
    for key in ("train_loss", "last_block_similarity_end", "test_loss"):
        assert summaries[0][key] == summaries[1][key], key
