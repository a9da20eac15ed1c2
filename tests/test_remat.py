"""`remat=True` on the builders: every block's activations recomputed in the backward pass
(`keras.RematScope`), the same losses and gradients, on every backend."""

import keras
import numpy as np
import pytest

from keras_tse import zoo

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

VIT = dict(depth=3, image_size=8, patch_size=4, channels=1, num_classes=3, hidden_dim=16, ffn_dim=32, num_heads=2)
GPT = dict(depth=3, vocab_size=30, segment_len=6, hidden_dim=16, num_heads=2, ffn_dim=32, cutoffs=())


def _pair(build, **kwargs):
    keras.utils.set_random_seed(1)
    plain = build(**kwargs)
    kept = build(remat=True, **kwargs)
    kept.set_weights(plain.get_weights())
    return plain, kept


def _one_step(model, x, y, loss):
    model.compile(keras.optimizers.SGD(0.1), loss)
    history = model.fit(x, y, batch_size=len(x), epochs=1, verbose=0, shuffle=False)
    return history.history["loss"][0], [keras.ops.convert_to_numpy(w) for w in model.trainable_weights]


@pytest.mark.parametrize(
    "family, kwargs",
    [("vit", dict(norm="deescalate")), ("vit", dict(norm="layerscale", scan=True)), ("gpt", dict(norm="deescalate"))],
)
def test_remat_trains_the_same_step(family, kwargs):
    if kwargs.get("scan") and keras.backend.backend() != "jax":  # refused there in one line, tested below
        pytest.skip("remat inside the scanned loop runs on JAX")
    rng = np.random.default_rng(0)
    if family == "vit":
        plain, kept = _pair(zoo.vit, **VIT, **kwargs)
        x, y = rng.normal(size=(4, 8, 8, 1)).astype("float32"), np.array([0, 1, 2, 0])
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        plain, kept = _pair(zoo.gpt, **GPT, **kwargs)
        x = rng.integers(0, 30, (4, 6)).astype("int32")
        y, loss = np.roll(x, -1, axis=1), keras.losses.SparseCategoricalCrossentropy()
    loss_plain, weights_plain = _one_step(plain, x, y, loss)
    loss_kept, weights_kept = _one_step(kept, x, y, loss)
    assert abs(loss_plain - loss_kept) < 1e-5
    for a, b in zip(weights_plain, weights_kept):
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="reads JAX's traced program")
@pytest.mark.parametrize("scan", [False, True])
def test_remat_puts_each_block_in_a_recomputed_region_of_the_gradient(scan):
    import jax
    import jax.numpy as jnp

    plain, kept = _pair(zoo.vit, **VIT, norm="deescalate" if not scan else "post", scan=scan)
    x = np.zeros((2, 8, 8, 1), "float32")

    def gradient_program(model):
        trainable = [v.value for v in model.trainable_variables]
        frozen = [v.value for v in model.non_trainable_variables]

        def loss(weights):
            return jnp.sum(model.stateless_call(weights, frozen, x)[0])

        return str(jax.make_jaxpr(jax.grad(loss))(trainable))

    assert "remat" not in gradient_program(plain) and "checkpoint" not in gradient_program(plain)
    program = gradient_program(kept)
    assert program.count("remat") + program.count("checkpoint") >= (1 if scan else 3)


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="JAX recomputes inside the scanned loop")
def test_remat_inside_a_scanned_loop_is_refused_in_one_line_elsewhere():
    with pytest.raises(ValueError, match="remat=True with scan=True runs on the JAX backend only. Received: backend"):
        zoo.vit(**VIT, norm="post", scan=True, remat=True)


@pytest.mark.xla_optimized  # the memory plan XLA makes of the step, its passes included
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="XLA's memory analysis of the compiled step")
@pytest.mark.usefixtures("float32_matmuls")  # equal losses to 1e-5 need float32 products, not a GPU's TF32
def test_remat_cuts_the_compiled_steps_temporary_memory():
    """The measuring device of zoo/speed.md's remat table, at 8 blocks: under half the temporary memory on
    a CPU (the table's device), less on a GPU, the same losses. On an H100, XLA's GPU plan kept 64% at 8
    blocks (36.5 of 56.8 MB, one measurement)."""
    import jax

    from tests.helpers import lab_module

    remat_memory = lab_module("remat_memory")
    plain, weights = remat_memory.measure(8, False)
    kept, _ = remat_memory.measure(8, True, weights)
    cut = 0.5 if jax.devices()[0].platform == "cpu" else 0.8
    assert kept["temp_bytes"] < cut * plain["temp_bytes"], (plain, kept)
    np.testing.assert_allclose(kept["losses"], plain["losses"], atol=1e-5)


def test_the_training_command_takes_remat_and_a_rerun_without_it_resumes_the_same_run(tmp_path, capsys):
    from tests.helpers import run_recipe_here

    argv = ["--dataset", "digits", "--norm", "post", "--depth", "2", "--hidden-dim", "16", "--num-heads", "2"]
    argv += ["--epochs", "1", "--batch-size", "64", "--out", str(tmp_path)]
    code, _, err = run_recipe_here("cifar10_vit", [*argv, "--remat"], capsys)
    assert code == 0, err[-2000:]
    import json

    assert json.loads((tmp_path / "post" / "config.json").read_text())["overrides"]["remat"] is True
    code, out, err = run_recipe_here("cifar10_vit", argv, capsys)  # the same model, its activations kept
    assert code == 0 and f"{tmp_path / 'post'}: finished, skipping" in out, err[-2000:]
    code, _, err = run_recipe_here("wikitext103_txl", ["--smoke", "--remat", "--out", str(tmp_path / "lm")], capsys)
    assert code == 2 and err.strip().endswith(
        "--remat: received with --model transformer_xl; expected a family whose builder takes it: gpt"
    ), err
