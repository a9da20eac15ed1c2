import csv

import keras
import numpy as np
import pytest

from keras_tse.analysis.similarity import token_similarity_profile
from keras_tse.callbacks import TokenSimilarityMetric
from keras_tse.zoo import vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

TINY = dict(depth=3, image_size=8, patch_size=2, channels=1, hidden_dim=16, ffn_dim=32, num_heads=2)


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 8, 8, 1)).astype("float32"), rng.integers(0, 10, n).astype("int32")


def _model(norm="post"):
    model = vit(norm=norm, **TINY)
    # a large learning rate, so that every step visibly changes the similarity profile
    model.compile(
        optimizer=keras.optimizers.Adam(3e-2), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def _fit(metrics, history_path, epochs=2):
    x, y = _data()
    model = _model()
    callbacks = [*metrics, keras.callbacks.CSVLogger(str(history_path))]
    return model, model.fit(x, y, batch_size=16, epochs=epochs, verbose=0, callbacks=callbacks)


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """One fit of 2 epochs of 4 batches, four metrics on it, each measuring the same model on the same probe
    at its own times; only the first writes fit's logs. (One fit: on TensorFlow each fit traces its step
    anew, most of these tests' time.)"""
    folder = tmp_path_factory.mktemp("callbacks")
    probe = _data()[0][:16]
    metrics = {
        "every_batch": TokenSimilarityMetric(probe, every_n_batches=1, logs="none"),
        "logged": TokenSimilarityMetric(probe, csv_path=str(folder / "similarity.csv")),
        "tensorboard": TokenSimilarityMetric(probe, tensorboard_dir=str(folder / "tb"), every_n_batches=2, logs="none"),
        "plots": TokenSimilarityMetric(probe, plot_dir=str(folder / "plots"), logs="none"),
    }
    model, history = _fit(list(metrics.values()), folder / "history.csv")
    return model, history, metrics, folder, probe


def test_values_equal_the_profile_and_the_logs_get_the_last_block(fitted):
    model, history, metrics, folder, probe = fitted
    metric = metrics["logged"]
    last = [metric.records[-1][f"tsim_{i}"] for i in range(3)]
    np.testing.assert_allclose(last, token_similarity_profile(model, probe), rtol=1e-5)
    # every block in similarity.csv, one row per measurement ...
    rows = _rows(folder / "similarity.csv")
    assert [r["when"] for r in rows] == ["train_begin", "epoch_end", "epoch_end"]
    assert float(rows[-1]["tsim_1"]) == pytest.approx(last[1], rel=1e-6)
    # ... and only the last block's values in fit's logs (the progress line, History, history.csv)
    (row,) = _rows(folder / "history.csv")[-1:]
    assert {k for k in row if k.startswith(("tsim", "tcos"))} == {"tsim_last", "tcos_last"}
    assert float(row["tsim_last"]) == pytest.approx(last[2], rel=1e-6)
    assert history.history["tcos_last"][-1] == pytest.approx(metric.records[-1]["tcos_2"], rel=1e-6)


@pytest.mark.one_backend  # which keys reach the history is the callback's Python, not the backend's
def test_logs_all_puts_every_block_in_history_and_none_puts_none(tmp_path):
    probe = _data()[0][:16]
    _, history = _fit([TokenSimilarityMetric(probe, logs="all")], tmp_path / "all.csv", epochs=1)
    assert {"tsim_0", "tsim_2", "tcos_0", "tcos_2"} <= set(history.history)
    _, history = _fit([TokenSimilarityMetric(probe, logs="none")], tmp_path / "none.csv", epochs=1)
    assert not [k for k in history.history if k.startswith(("tsim", "tcos"))]
    with pytest.raises(ValueError, match=r"Received: logs='every'"):
        TokenSimilarityMetric(probe, logs="every")


def test_tensorboard_scalars_equal_the_csv(fitted):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, _, metrics, folder, _ = fitted
    metric = metrics["tensorboard"]
    events = EventAccumulator(str(folder / "tb"))
    events.Reload()
    assert {f"{m}/block_{b}" for m in ("tsim", "tcos") for b in range(3)} == set(events.Tags()["scalars"])
    scalars = events.Scalars("tsim/block_2")
    assert [e.step for e in scalars] == [r["step"] for r in metric.records] == [0, 2, 4, 4, 6, 8, 8]
    np.testing.assert_allclose([e.value for e in scalars], [r["tsim_2"] for r in metric.records], rtol=1e-6)


def test_mid_epoch_measurements_see_current_weights(fitted):
    # Under JAX, fit keeps the weights out of the model during an epoch; the callback must sync them.
    records = fitted[2]["every_batch"].records  # the first metric of the fit: none measured before it
    assert [r["when"] for r in records] == ["train_begin", *["batch"] * 4, "epoch_end", *["batch"] * 4, "epoch_end"]
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4, 4, 5, 6, 7, 8, 8]
    batch_values = [r["tsim_2"] for r in records[:5]]
    assert len(set(batch_values)) == 5  # every step changed the weights, and each measurement saw it
    # the last batch's weights are the epoch's final weights: same numbers
    assert records[4]["tsim_2"] == pytest.approx(records[5]["tsim_2"], rel=1e-6)


def test_plots_and_overhead(fitted):
    _, _, metrics, folder, _ = fitted
    metric = metrics["plots"]
    for name in ("token_similarity_heatmap.png", "token_similarity_curves.png"):
        assert (folder / "plots" / name).read_bytes()[:4] == b"\x89PNG"
    assert metric.similarity_matrix().shape == (3, 3)  # blocks x (train begin + 2 epoch ends)
    assert 0 < metric.overhead < np.inf


def test_a_fit_with_no_step_left_reports_no_overhead():
    """A run resumed after its last epoch trains no step: the probe still measures once at train begin,
    and a ratio over no training time would be absurd (it printed 41,774,440,200% once). None instead."""
    x, y = _data()
    metric = TokenSimilarityMetric(x[:16])
    _model().fit(x, y, batch_size=16, epochs=2, initial_epoch=2, verbose=0, callbacks=[metric])
    assert metric.overhead is None


def test_named_layers_in_a_plain_functional_model():
    inputs = keras.Input((6, 4))
    h1 = keras.layers.Dense(4, name="first")(inputs)
    h2 = keras.layers.Dense(4, name="second")(h1)
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling1D()(h2))
    x = np.random.default_rng(0).standard_normal((3, 6, 4)).astype("float32") + 1.0
    profile = token_similarity_profile(model, x, layers=["first", "second"])
    assert profile.shape == (2,)
    with pytest.raises(ValueError, match="name the block layers with `layers=`"):
        token_similarity_profile(model, x)


@pytest.mark.one_backend
@pytest.mark.parametrize("every", [0, 2.5, "1"])
def test_bad_frequency_is_rejected(every):
    with pytest.raises(ValueError, match=f"Received: every_n_batches={every!r}"):
        TokenSimilarityMetric(np.zeros((1, 8, 8, 1)), every_n_batches=every)
