"""`keras-tse evaluate` scores a trained image classifier on a data set's test split, `keras-tse classify` labels
image files; both take a shipped preset, a run's variant folder (its validation-chosen checkpoint, said so) and
an exported `.keras` file."""

import csv
import json
import os

import keras
import numpy as np
import pytest
from PIL import Image

from keras_tse import data, layers, zoo
from keras_tse.cli import main as cli
from keras_tse.zoo.preprocessing import with_preprocessing

pytestmark = pytest.mark.one_backend  # the commands' reading and arithmetic; the models' outputs are every backend's

DIGITS_ACCURACY = 344 / 359  # vit6_digits's card: 95.82% of scikit-learn's 359 test digits


def _digits_test():
    return data.get_dataset("digits").load_data(None, download=False)[1]


def test_evaluate_gives_the_cards_accuracy_keras_loss_and_a_confusion_matrix_that_adds_up(tmp_path, capsys):
    """The shipped digits preset on its own test split: the card's accuracy to the image, the loss Keras's
    `evaluate` computes, each class's images and accuracy from the confusion matrix's rows, the figure drawn."""
    out, figure = tmp_path / "scores.json", tmp_path / "confusion.png"
    assert cli.main(["evaluate", "vit6_digits", "--out", str(out), "--figure", str(figure)]) == 0
    with open(out) as f:
        scores = json.load(f)
    assert scores["dataset"] == "digits" and scores["images"] == 359 and scores["checkpoint"] is None
    assert scores["accuracy"] == pytest.approx(DIGITS_ACCURACY, abs=1e-12)
    confusion = np.asarray(scores["confusion"])
    assert confusion.sum() == 359 and np.trace(confusion) == 344
    for i, entry in enumerate(scores["per_class"]):
        assert entry["class"] == str(i) and entry["images"] == confusion[i].sum()
        assert entry["accuracy"] == pytest.approx(confusion[i, i] / confusion[i].sum())
    x, y = _digits_test()
    assert [entry["images"] for entry in scores["per_class"]] == np.bincount(np.ravel(y)).tolist()  # rows: true labels
    model = zoo.from_preset("vit6_digits")
    model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert scores["loss"] == pytest.approx(model.evaluate(x, y, verbose=0, batch_size=359), rel=1e-5)
    assert os.path.getsize(figure) > 5000
    assert "accuracy 95.82% (359 images)" in capsys.readouterr().out


def test_evaluate_takes_a_runs_validation_chosen_checkpoint_and_an_exported_file(tmp_path, capsys):
    """A run folder whose best checkpoint was chosen on validation is scored from it (said so), not from its last;
    the `.keras` file `keras-tse export` wrote scores as the preset does."""
    run = tmp_path / "run" / "deescalate"
    os.makedirs(run / "checkpoints")
    best = zoo.from_preset("vit6_digits")
    best.save(run / "checkpoints" / "best.keras")
    last = zoo.from_preset("vit6_digits")
    last.get_layer("head").set_weights([np.zeros_like(w) for w in last.get_layer("head").get_weights()])
    last.save(run / "checkpoints" / "last.keras")  # all-zero logits: class 0 for every image
    with open(run / "summary.json", "w") as f:
        json.dump({"best_chosen_on": "validation"}, f)
    with open(run / "config.json", "w") as f:
        json.dump({"dataset": "digits"}, f)
    assert cli.main(["evaluate", str(run), "--out", str(tmp_path / "run.json")]) == 0
    assert "best.keras" in capsys.readouterr().out
    with open(tmp_path / "run.json") as f:
        scores = json.load(f)
    assert scores["accuracy"] == pytest.approx(DIGITS_ACCURACY) and "validation" in scores["checkpoint"]
    assert cli.main(["export", "vit6_digits", "--out", str(tmp_path / "exported.keras")]) == 0
    assert cli.main(["evaluate", str(tmp_path / "exported.keras"), "--dataset", "digits",
                     "--out", str(tmp_path / "file.json")]) == 0  # fmt: skip
    with open(tmp_path / "file.json") as f:
        assert json.load(f)["accuracy"] == pytest.approx(DIGITS_ACCURACY)


def test_classify_labels_files_and_folders_as_the_model_does_with_their_probabilities(tmp_path, capsys):
    """PNG files, one in a subfolder, one RGB, one of another size: each file's top classes are the model's argmax
    and next, their probabilities its softmax; CSV and JSON hold the same rows; a file that is no image is one line."""
    rng = np.random.default_rng(0)
    os.makedirs(tmp_path / "images" / "more")
    files = []
    for i, shape in enumerate([(28, 28), (28, 28), (28, 28, 3), (40, 33)]):
        path = tmp_path / "images" / ("more" if i == 3 else "") / f"image_{i}.png"
        Image.fromarray(rng.integers(0, 256, shape).astype("uint8")).save(path)
        files.append(str(path))
    assert cli.main(["classify", "vit6_fashion_mnist", str(tmp_path / "images"), "--top-k", "2",
                     "--out", str(tmp_path / "labels.json")]) == 0  # fmt: skip
    with open(tmp_path / "labels.json") as f:
        rows = json.load(f)["images"]
    assert [row["file"] for row in rows] == sorted(files)
    model = zoo.from_preset("vit6_fashion_mnist")
    names = zoo.preprocessing.class_names_of(model)
    for row in rows:
        image = np.asarray(Image.open(row["file"]).convert("RGB"))
        logits = np.asarray(model.predict(image[None], verbose=0), "float64")[0]
        probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        order = probs.argsort()[::-1][:2]
        assert [entry["class"] for entry in row["top"]] == [names[i] for i in order]
        np.testing.assert_allclose([entry["probability"] for entry in row["top"]], probs[order], rtol=1e-5)
    assert cli.main(["classify", "vit6_fashion_mnist", *files, "--out", str(tmp_path / "labels.csv")]) == 0
    with open(tmp_path / "labels.csv") as f:
        table = [(r["file"], r["class_1"]) for r in csv.DictReader(f)]
    by_file = {row["file"]: row["top"][0]["class"] for row in rows}
    assert table == [(file, by_file[file]) for file in files]
    (tmp_path / "notes.png").write_text("not an image")
    assert cli.main(["classify", "vit6_fashion_mnist", str(tmp_path / "notes.png")]) == 2
    assert "notes.png: received a file that is not a readable image" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["evaluate", "gpt4_ptb"], "MODEL: received gpt4_ptb; expected an image classifier"),
        (
            ["evaluate", "vit6_digits", "--dataset", "fashion_mnist"],
            "expected a data set of the model's classes (0, 1,",
        ),
        (["classify", "gpt4_ptb", "{tmp}"], "MODEL: received gpt4_ptb; expected an image classifier"),
        (["evaluate", "vit6_digits", "--out", "{tmp}/scores.csv"], "--out: received {tmp}/scores.csv; expected a path"),
        (["classify", "vit6_digits", "{tmp}/missing.png"], "IMAGES: received {tmp}/missing.png; expected an image"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, expected, tmp_path, capsys):
    Image.fromarray(np.zeros((8, 8), "uint8")).save(tmp_path / "blank.png")
    argv = [arg.format(tmp=tmp_path) for arg in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected.format(tmp=tmp_path) in err[0], err


def test_a_model_without_class_names_is_refused_by_classify(tmp_path, capsys):
    model = zoo.vit(
        depth=1, image_size=8, patch_size=4, hidden_dim=8, num_heads=2, ffn_dim=16, num_classes=3, channels=1
    )
    plain = with_preprocessing(model, layers.ImagePreprocessor(8, 1, (0.5,), (0.25,)))
    plain.save(tmp_path / "plain.keras")
    Image.fromarray(np.zeros((8, 8), "uint8")).save(tmp_path / "blank.png")
    assert cli.main(["classify", str(tmp_path / "plain.keras"), str(tmp_path / "blank.png")]) == 2
    assert "expected an image classifier that carries its class names" in capsys.readouterr().err
