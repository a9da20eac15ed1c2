"""Preset folders (`zoo.save_preset`, `zoo.from_preset(folder)`): KerasHub's layout, the same model back
on this backend, a folder never overwritten."""

import json
import os

import keras
import numpy as np
import pytest

from keras_tse import zoo
from tests.helpers import randomise_weights, tiny_transformer_xl, tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


@pytest.mark.parametrize("build", [tiny_vit, lambda: tiny_transformer_xl(mem_len=4, batch_size=2)], ids=["vit", "txl"])
def test_a_saved_preset_folder_loads_as_the_same_model(build, tmp_path):
    keras.utils.set_random_seed(0)
    model = build()
    randomise_weights(model)
    folder = zoo.save_preset(model, tmp_path / "mine", metadata={"test_accuracy": 0.5, "command": "python x.py"})
    assert sorted(os.listdir(folder)) == ["config.json", "metadata.json", "model.weights.h5"]
    with open(os.path.join(folder, "metadata.json")) as f:
        metadata = json.load(f)
    assert metadata["test_accuracy"] == 0.5 and metadata["parameter_count"] == model.count_params()
    assert metadata["saved_with_backend"] == keras.backend.backend()
    loaded = zoo.from_preset(folder)
    assert type(loaded) is type(model) and loaded.name == model.name
    if model.input.dtype == "int32":
        x = np.arange(2 * model.input.shape[1]).reshape(2, -1).astype("int32") % 40
    else:
        x = np.random.default_rng(0).normal(size=(2, *model.input.shape[1:])).astype("float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)), atol=1e-6)


def test_a_folder_that_holds_anything_is_never_overwritten_and_overrides_are_refused(tmp_path):
    model = tiny_vit(depth=1)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="never replaces one. Received: folder="):
        zoo.save_preset(model, tmp_path / "run")
    assert os.listdir(tmp_path / "run") == ["notes.txt"]
    assert [p for p in os.listdir(tmp_path) if p.startswith(".preset-")] == []  # nothing left half-written
    zoo.save_preset(model, tmp_path / "empty")
    with pytest.raises(ValueError, match=r"overrides apply to presets. Received: \['depth'\]"):
        zoo.from_preset(tmp_path / "empty", depth=2)


def test_a_preset_folder_with_cut_or_missing_weights_and_a_folder_that_is_not_one_are_named(tmp_path):
    """One ValueError naming the file or the folder, never h5py's traceback or "Unknown preset"."""
    folder = tmp_path / "preset"
    zoo.save_preset(tiny_vit(), folder)
    weights = folder / "model.weights.h5"
    whole = weights.read_bytes()
    weights.write_bytes(whole[: len(whole) // 2])  # a copy cut short
    with pytest.raises(ValueError, match=r"model.weights.h5: received a weights file that does not load"):
        zoo.from_preset(str(folder))
    weights.unlink()
    with pytest.raises(ValueError, match=r"received a preset folder without model.weights.h5"):
        zoo.from_preset(str(folder))
    with pytest.raises(ValueError, match=r"received a folder without config.json; expected a preset folder"):
        zoo.from_preset(str(tmp_path))
    run = tmp_path / "run" / "post" / "checkpoints"
    run.mkdir(parents=True)
    (run / "last.keras").write_bytes(b"")
    with pytest.raises(ValueError, match=r"received a run's folder; expected one of its models: .*post/checkpoints"):
        zoo.from_preset(str(tmp_path / "run"))
