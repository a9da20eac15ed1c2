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
    with pytest.raises(ValueError, match=r"takes num_classes only; its weights fix the rest. Received: \['depth'\]"):
        zoo.from_preset(tmp_path / "empty", depth=2)


def test_a_saved_preset_folder_fine_tunes_with_a_fresh_head_or_gives_its_features(tmp_path):
    keras.utils.set_random_seed(0)
    model = tiny_vit(depth=1)
    randomise_weights(model)
    folder = zoo.save_preset(model, tmp_path / "mine")
    x = np.random.default_rng(0).normal(size=(2, *model.input.shape[1:])).astype("float32")
    features = zoo.from_preset(folder, num_classes=0)
    assert features(x).shape == (2, model.get_layer("head").input.shape[-1])
    three = zoo.from_preset(folder, num_classes=3)
    assert three(x).shape == (2, 3)
    for layer in model.layers:
        if layer.weights and layer.name != "head":
            for got, saved in zip(three.get_layer(layer.name).get_weights(), layer.get_weights()):
                np.testing.assert_array_equal(got, saved)
    with pytest.raises(ValueError, match="num_classes applies to a classifier"):
        zoo.from_preset(zoo.save_preset(tiny_transformer_xl(), tmp_path / "lm"), num_classes=3)


HUB_LOAD = """
import sys
import numpy as np
from keras_tse import zoo
model = zoo.from_preset("hf://someone/tiny-vit")
np.save(sys.argv[1], np.asarray(model.predict(np.load(sys.argv[2]), verbose=0)))
"""


@pytest.mark.one_backend  # the hub's part is a path; a preset folder loads on every backend (above)
def test_a_preset_in_a_hugging_face_cache_loads_offline_and_a_missing_one_is_one_line(tmp_path, monkeypatch):
    """A local Hugging Face cache filled as `huggingface_hub` fills it (refs/main names the snapshot that
    holds the files save_preset wrote), read by a fresh process with HF_HUB_OFFLINE=1: the same predictions.
    A repository not in the cache, offline, is one line naming it."""
    import subprocess
    import sys

    keras.utils.set_random_seed(0)
    model = tiny_vit(depth=1)
    randomise_weights(model)
    repository = tmp_path / "hf" / "hub" / "models--someone--tiny-vit"
    commit = "0123456789abcdef0123456789abcdef01234567"
    zoo.save_preset(model, repository / "snapshots" / commit)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text(commit)
    x = np.random.default_rng(0).normal(size=(2, *model.input.shape[1:])).astype("float32")
    np.save(tmp_path / "x.npy", x)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-c", HUB_LOAD, str(tmp_path / "y.npy"), str(tmp_path / "x.npy")]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), np.asarray(model.predict(x, verbose=0)), atol=1e-6)
    missing = [sys.executable, "-c", HUB_LOAD.replace("someone/tiny-vit", "someone/absent"), "y", "x"]
    done = subprocess.run(
        missing, env=env, capture_output=True, text=True, cwd=os.path.dirname(os.path.dirname(__file__))
    )
    assert "ValueError: hf://someone/absent: received no preset from the Hugging Face Hub (" in done.stderr
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # the extra not installed
    with pytest.raises(ImportError, match=r"^Loading hf://someone/tiny-vit needs .*pip install 'keras-tse\[hub\]'$"):
        zoo.from_preset("hf://someone/tiny-vit")
    with pytest.raises(ValueError, match="A Hugging Face preset is hf://owner/name. Received: preset='hf://x'"):
        zoo.from_preset("hf://x")


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
