"""Preprocessing travels with the model: `ImagePreprocessor` computes the training pipeline's normalisation
on raw pixels (and converts size and channels), and a model a training run saves takes raw images, after
export, in a fresh process, with its class names."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_tse import data, zoo
from keras_tse.layers import ImagePreprocessor
from keras_tse.layers.image_preprocessor import LUMA

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEAN, STD = (0.2, 0.4, 0.6), (0.5, 0.25, 0.125)


def test_the_preprocessor_is_the_pipelines_normalisation_on_raw_pixels():
    """uint8 pixels in: `data.normalized`'s values out at the trained size and channels (to float32 rounding:
    a backend may divide by 255 as a product with its reciprocal)."""
    raw = np.random.default_rng(0).integers(0, 256, (3, 8, 8, 3), dtype="uint8")
    layer = ImagePreprocessor(8, 3, MEAN, STD)
    expected = data.normalized(raw, np.asarray(MEAN, "float32"), np.asarray(STD, "float32"), (0, 255))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(raw)), expected, rtol=1e-6, atol=1e-6)
    again = ImagePreprocessor.from_config(json.loads(json.dumps(layer.get_config())))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(raw)), expected, rtol=1e-6, atol=1e-6)


def test_the_preprocessor_converts_channels_and_size():
    """Grey to colour repeats the grey value; colour to grey is its luma (ITU-R 601); RGBA drops its alpha;
    another size is resized bilinearly to the trained one."""
    rng = np.random.default_rng(1)
    colour = rng.integers(0, 256, (2, 8, 8, 3)).astype("float32")
    grey = ImagePreprocessor(8, 1, 0.0, 1.0, value_range=(0, 1))
    luma = (colour * np.asarray(LUMA, "float32")).sum(-1, keepdims=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(grey(colour)), luma, rtol=1e-6)
    rgb = ImagePreprocessor(8, 3, 0.0, 1.0, value_range=(0, 1))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(rgb(colour[..., :1])), np.repeat(colour[..., :1], 3, -1))
    rgba = np.concatenate([colour, np.full((2, 8, 8, 1), 7.0, "float32")], axis=-1)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(rgb(rgba)), colour)
    larger = np.repeat(np.repeat(colour, 2, axis=1), 2, axis=2)  # each pixel a 2x2 square
    np.testing.assert_allclose(keras.ops.convert_to_numpy(rgb(larger)), colour, rtol=1e-6)
    with pytest.raises(ValueError, match="`mean` must hold 1 or 3 values"):
        ImagePreprocessor(8, 3, (0.1, 0.2), 1.0)


def test_the_shipped_preset_takes_raw_images_of_any_size_and_mode_and_names_their_classes():
    """vit6_fashion_mnist on raw uint8 garments: the logits of the pipeline's normalised images, and the
    same classes for the images enlarged and made colour; `classify` answers in Fashion-MNIST's names."""
    model = zoo.from_preset("vit6_fashion_mnist")
    spec = data.get_dataset("fashion_mnist")
    raw = np.random.default_rng(2).integers(0, 256, (4, 28, 28, 1), dtype="uint8")
    normalised = data.normalized(raw, np.asarray(spec.mean, "float32"), np.asarray(spec.std, "float32"))
    logits = model.predict(raw, verbose=0)
    core = zoo.preprocessing.core_of(model)
    np.testing.assert_allclose(logits, core.predict(normalised, verbose=0), atol=1e-5)
    enlarged = np.repeat(np.repeat(np.repeat(raw, 2, axis=1), 2, axis=2), 3, axis=-1)  # 56x56 RGB
    np.testing.assert_allclose(model.predict(enlarged, verbose=0), logits, atol=1e-3)
    names = zoo.classify(model, [raw[0, ..., 0], enlarged[1], raw[2], raw[3]])
    assert names == [spec.class_names[i] for i in logits.argmax(-1)]


def test_floats_in_0_1_are_read_as_scaled_and_pixels_past_the_range_are_refused_in_one_line():
    """`x / 255`, what most pipelines feed, gives the uint8 images' logits (read as stored they would be all
    but black); an all-black image stays black; the digits' 0..16 model refuses 0-255 pixels in `classify`."""
    model = zoo.from_preset("vit6_fashion_mnist")
    raw = np.random.default_rng(4).integers(0, 256, (3, 28, 28, 1), dtype="uint8")
    black = np.zeros((1, 28, 28, 1), "uint8")
    as_stored = model.predict(np.concatenate([raw, black]), verbose=0)
    scaled = model.predict(np.concatenate([raw, black]).astype("float32") / 255.0, verbose=0)
    np.testing.assert_allclose(scaled, as_stored, atol=1e-4)
    assert zoo.classify(model, raw.astype("float32") / 255.0) == zoo.classify(model, raw)
    digits = zoo.from_preset("vit6_digits")
    with pytest.raises(ValueError, match=r"values in \[0, 255\]; this model takes pixels in \[0, 16\]"):
        zoo.classify(digits, [np.full((8, 8), 255, "uint8"), np.zeros((8, 8), "uint8")])


def test_a_model_without_class_names_is_one_line_for_classify():
    with pytest.raises(ValueError, match="carries no class names"):
        zoo.classify(zoo.from_preset("vit6_fashion_mnist", load_weights=False), np.zeros((1, 28, 28, 1)))


FRESH = """
import json, sys
import keras, numpy as np
from keras_tse import zoo
model = keras.saving.load_model(sys.argv[1])
grey = np.random.default_rng(3).integers(0, 256, (24, 40), dtype="uint8")  # another size, one channel
logits = model.predict(grey[None, ..., None], verbose=0)
print(json.dumps({"names": zoo.classify(model, [grey]), "logits": logits.tolist()}))
"""


def test_a_run_on_an_image_folder_exports_a_model_that_classifies_raw_images_in_a_fresh_process(tmp_path):
    """`keras-tse train vit --dataset folder`, then `keras-tse export`: a new process loads the file and
    names the class of a grey 40x24 image (the folder's are colour, 8x8, trained at 16x16); its logits are
    those of the image made colour, resized and normalised by hand with the training images' statistics."""
    from keras_tse.cli import main as cli
    from tests.test_bad_inputs import image_folder

    folder = image_folder(tmp_path / "pets", classes=("cat", "dog"), per_class=5)
    out, exported = tmp_path / "run", str(tmp_path / "model.keras")
    argv = ["train", "vit", "--norm", "deescalate", "--dataset", "folder", "--data-dir", folder, "--image-size", "16"]
    argv += ["--depth", "1"]
    argv += ["--hidden-dim", "8", "--num-heads", "2", "--epochs", "1", "--batch-size", "4", "--verbose", "0"]
    assert cli.main([*argv, "--validation-fraction", "0", "--out", str(out)]) == 0
    assert cli.main(["export", str(out / "deescalate"), "--out", exported]) == 0
    env = {**os.environ, "PYTHONPATH": ROOT}
    answer = subprocess.run(
        [sys.executable, "-c", FRESH, exported], capture_output=True, text=True, env=env, check=True
    )
    said = json.loads(answer.stdout.strip().splitlines()[-1])
    (x_train, _), _, _ = data.load_image_folder(folder, 16)
    pixels = x_train.reshape(-1, 3).astype("float64") / 255.0
    mean, std = pixels.mean(0), pixels.std(0)
    grey = np.random.default_rng(3).integers(0, 256, (24, 40), dtype="uint8")
    colour = np.repeat(grey[None, ..., None].astype("float32"), 3, axis=-1)
    resized = keras.ops.convert_to_numpy(keras.ops.image.resize(colour, (16, 16), interpolation="bilinear"))
    by_hand = ((resized / 255.0 - mean) / std).astype("float32")
    core = zoo.preprocessing.core_of(keras.saving.load_model(exported))
    expected = core.predict(by_hand, verbose=0)
    np.testing.assert_allclose(said["logits"], expected, atol=1e-4)
    assert said["names"] == [("cat", "dog")[int(np.argmax(expected))]]
