import numpy as np
import pytest
from keras import ops

from keras_tse.training import TrainConfig, read_history
from keras_tse.training.runner import make_optimizer
from tests.helpers import tiny_vit

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py


def test_multi_step_schedule_of_sec_3_3():
    # 10 epochs x 100 steps: x0.2 at step 700 (70%) and again at step 900 (90%)
    optimizer = make_optimizer(TrainConfig(epochs=10, learning_rate=1e-4), steps_per_epoch=100)
    schedule = optimizer._learning_rate
    lr = lambda step: float(ops.convert_to_numpy(schedule(step)))  # noqa: E731
    assert lr(0) == pytest.approx(1e-4) and lr(699) == pytest.approx(1e-4)
    assert lr(701) == pytest.approx(2e-5) and lr(899) == pytest.approx(2e-5)
    assert lr(901) == pytest.approx(4e-6)
    assert (optimizer.beta_1, optimizer.beta_2, optimizer.weight_decay) == (0.9, 0.999, 0.1)


def test_read_history_keeps_the_last_row_of_a_repeated_epoch(tmp_path):
    # a run killed after CSVLogger wrote epoch 1 but before its backup: the resumed run repeats it
    path = tmp_path / "history.csv"
    path.write_text("epoch,loss\n0,2.0\n1,1.5\n1,1.4\n2,1.0\n")
    history = read_history(str(path))
    assert history["epoch"] == [0, 1, 2]
    np.testing.assert_allclose(history["loss"], [2.0, 1.4, 1.0])
    assert read_history(str(tmp_path / "missing.csv")) == {}


def test_a_run_folder_refuses_other_settings(tmp_path):
    from keras_tse.data import image_dataset
    from keras_tse.training import fit_variant

    x = np.random.default_rng(0).standard_normal((16, 8, 8, 1)).astype("float32")
    data = image_dataset(x, (np.arange(16) % 10).astype("int32"), 8)

    def run(epochs, batch_size=8):
        model = tiny_vit(depth=1, patch_size=4, hidden_dim=8, ffn_dim=8, name="tiny")
        config = TrainConfig(epochs=epochs, batch_size=batch_size)
        return fit_variant(model, data, data, str(tmp_path), config, x[:4], 2, checkpoints=False, verbose=0)

    first = run(1)
    assert run(1) == first  # finished with the same settings: reused, not retrained
    with pytest.raises(ValueError, match=r"received train.batch_size 4; expected 8, the setting of the run it holds"):
        run(1, batch_size=4)
    with pytest.raises(ValueError, match=r"received train.epochs 2; expected 1: a finished run of 1 epochs"):
        run(2)


def test_a_learned_tau_run_records_each_blocks_tau_as_trained_scanned_or_not(tmp_path):
    from keras_tse.data import image_dataset
    from keras_tse.training import fit_variant
    from keras_tse.training.runner import learned_taus, summary_line

    x = np.random.default_rng(0).standard_normal((16, 8, 8, 1)).astype("float32")
    data = image_dataset(x, (np.arange(16) % 10).astype("int32"), 8)
    config = TrainConfig(epochs=1, batch_size=8, learning_rate=0.05, weight_decay=0.0)
    for scan in (False, True):
        kwargs = dict(depth=2, patch_size=4, hidden_dim=8, ffn_dim=8, norm="deescalate", scan=scan)
        model = tiny_vit(**kwargs, tau=0.5, trainable_tau=True)
        run = str(tmp_path / f"scan{scan}")
        summary = fit_variant(model, data, data, run, config, x[:4], 2, checkpoints=False, verbose=0)
        taus = summary["learned_tau"]
        # two steps at lr 0.05 move each block's tau off its start, and the recorded values are the weights'
        assert len(taus) == 2 and all(0.0 <= t <= 1.0 and t != 0.5 for t in taus)
        weights = [w for w in model.weights if w.name.endswith("tau")]
        np.testing.assert_allclose(
            np.concatenate([np.ravel(ops.convert_to_numpy(w)) for w in weights]), taus, atol=1e-5
        )
        assert f"learned tau {min(taus):.3f}-{max(taus):.3f}" in summary_line("deescalate", summary)
    assert learned_taus(tiny_vit(depth=2, patch_size=4, hidden_dim=8, ffn_dim=8, norm="deescalate", scan=True)) == []


@pytest.mark.parametrize(
    "kwargs, pattern",
    [({"epochs": 0}, "epochs=0"), ({"batch_size": -1}, "batch_size=-1"), ({"learning_rate": 0.0}, "learning_rate=0.0")],
)
def test_bad_training_settings_are_rejected(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        TrainConfig(**kwargs)
