"""`keras-tse train --from-preset MODEL` starts from any trained model a user names (`keras_tse.zoo.trained`): a
`.keras` file, a preset folder, a run's variant folder (its checkpoint chosen on the validation split), a shipped
preset of the task; every weight kept, the head by one rule: kept only on the data the model was trained on."""

import json
import os

import numpy as np
import pytest

from keras_tse import layers, zoo
from keras_tse.data.registry import DIGIT_NAMES
from keras_tse.training import Plan, image_runs
from keras_tse.zoo.preprocessing import with_preprocessing
from keras_tse.zoo.preset_folder import save_preset

pytestmark = pytest.mark.one_backend  # the sources' reading and the plan's choices; loading is every backend's

TINY = dict(depth=2, image_size=8, patch_size=4, hidden_dim=16, num_heads=2, ffn_dim=32, norm="layerscale")


def _classifier(channels, class_names, seed):
    import keras

    keras.utils.set_random_seed(seed)
    model = zoo.vit(**TINY, channels=channels, num_classes=len(class_names), name=f"tiny_{seed}")
    preprocessor = layers.ImagePreprocessor(8, channels, (0.5,) * channels, (0.25,) * channels, class_names=class_names)
    return with_preprocessing(model, preprocessor)


def _run_folder(root, dataset, last, best=None):
    """A run's variant folder as the trainer leaves it: config, checkpoints, the split its best was chosen on."""
    folder = root / "run" / "layerscale"
    os.makedirs(folder / "checkpoints")
    last.save(folder / "checkpoints" / "last.keras")
    if best is not None:
        best.save(folder / "checkpoints" / "best.keras")
    with open(folder / "config.json", "w") as f:
        json.dump({"dataset": dataset, "preset": None}, f)
    with open(folder / "summary.json", "w") as f:
        json.dump({"best_chosen_on": "validation" if best is not None else None}, f)
    return str(folder)


def _same_weights(model, source, but=()):
    source_layers = {layer.name: layer for layer in zoo.preprocessing.core_of(source).layers}
    for layer in zoo.preprocessing.core_of(model).layers:
        if layer.weights and layer.name not in but:
            for got, expected in zip(layer.get_weights(), source_layers[layer.name].get_weights()):
                np.testing.assert_array_equal(got, expected, err_msg=layer.name)


def _built(from_preset, tmp_path, **settings):
    plan = Plan.build("images", from_preset=from_preset, out=str(tmp_path / "out"), no_download=True, **settings)
    return plan, image_runs.build_model(plan, plan.variants[0])


def test_a_file_a_preset_folder_and_a_run_fine_tune_with_every_weight_and_the_head_kept_only_on_their_data(tmp_path):
    """A run's folder records its data set (digits): its head is kept there; a file or a preset folder records none,
    so its head is fresh (the said-so rule). A run whose best checkpoint was chosen on validation starts from it."""
    last, best = _classifier(1, DIGIT_NAMES, 1), _classifier(1, DIGIT_NAMES, 2)
    last.save(tmp_path / "model.keras")
    save_preset(last, tmp_path / "preset")
    sources = {
        "file": (str(tmp_path / "model.keras"), last, True),
        "preset folder": (str(tmp_path / "preset"), last, True),
        "run": (_run_folder(tmp_path, "digits", last, best), best, False),
    }
    for kind, (path, weights, fresh_head) in sources.items():
        plan, model = _built(path, tmp_path, dataset="digits")
        assert plan.variants[0].norm == "layerscale" and plan.variants[0].preset is None, kind
        _same_weights(model, weights, but=("head",))
        head = model.get_layer("head").get_weights()[0]
        assert (head == weights.get_layer("head").get_weights()[0]).all() != fresh_head, kind
        assert plan.variants[0].settings["from_preset"] == os.path.abspath(path)


def test_a_users_folder_keeps_the_head_of_a_model_trained_on_the_same_class_names_in_order(tmp_path):
    from tests.test_bad_inputs import image_folder

    source = _classifier(3, ("cat", "dog"), 3)
    source.save(tmp_path / "pets.keras")
    for classes, kept in ((("cat", "dog"), True), (("cat", "cow"), False)):
        data = image_folder(tmp_path / "_".join(classes), classes=classes, per_class=4)
        plan, model = _built(str(tmp_path / "pets.keras"), tmp_path, dataset="folder", data_dir=data)
        assert plan.settings.image_size == 8  # the model's own size where --image-size is not given
        same = (model.get_layer("head").get_weights()[0] == source.get_layer("head").get_weights()[0]).all()
        assert same == kept, classes


@pytest.mark.parametrize(
    "source, settings, expected",
    [
        (
            "file",
            dict(dataset="mnist"),
            "a model of the data's images \\(28x28, 1 channel\\(s\\)\\); it takes 8x8 with 1",
        ),
        ("file", dict(dataset="digits", norm=("post",)), "--norm: received post; expected layerscale or no --norm"),
        ("run top", dict(dataset="digits"), "expected one of the run's variant folders: .*run/layerscale"),
        ("gpt4_ptb", dict(dataset="digits"), "an image classifier of the zoo's blocks \\(a language model"),
        ("vit80_cifar10_post", dict(dataset="digits"), "ships no weights yet"),
        (
            "nothing",
            dict(dataset="digits"),
            "--from-preset: received .*nothing; expected a preset with trained weights",
        ),
    ],
)
def test_what_is_not_a_trained_image_classifier_of_the_data_is_one_line(tmp_path, source, settings, expected):
    model = _classifier(1, DIGIT_NAMES, 1)
    model.save(tmp_path / "model.keras")
    paths = {"file": str(tmp_path / "model.keras"), "run top": os.path.dirname(_run_folder(tmp_path, "digits", model))}
    with pytest.raises(ValueError, match=expected):
        Plan.build("images", from_preset=paths.get(source, str(tmp_path / source) if source == "nothing" else source),
                   out=str(tmp_path / "out"), no_download=True, **settings)  # fmt: skip


def test_the_training_command_fine_tunes_a_run_and_names_its_folder_after_it(tmp_path):
    from keras_tse.cli import main as cli

    source = _run_folder(tmp_path, "digits", _classifier(1, DIGIT_NAMES, 1))
    argv = ["train", "vit", "--dataset", "digits", "--from-preset", source, "--epochs", "1", "--verbose", "0"]
    assert cli.main([*argv, "--out", str(tmp_path / "tuned"), "--no-download"]) == 0
    with open(tmp_path / "tuned" / "layerscale" / "config.json") as f:
        config = json.load(f)
    assert config["from_preset"] == source and config["preset"] is None
    from keras_tse.training.plans import run_folder_of

    assert run_folder_of({"dataset": "digits", "model": "vit", "from_preset": source + "/"}) == "runs/digits_layerscale"


# === A language model: the text read in its own words ===

WORDS = ["<eos>", "<unk>", "the", "company", "said", "it", "would", "buy", "shares", "of", "stock"]


def _language_model(tmp_path):
    """A tiny GPT with its words, saved as `keras-tse export` writes one (its tokenizer inside the file)."""
    from keras_tse import run_files
    from keras_tse.data import WordTokenizer

    model = zoo.gpt(depth=2, vocab_size=len(WORDS), hidden_dim=16, num_heads=2, ffn_dim=32, segment_len=8, norm="pre")
    model.tokenizer = WordTokenizer(WORDS)
    run_files.save_model(model, str(tmp_path / "lm.keras"))
    return model


def _corpus(root):
    rng = np.random.default_rng(0)
    text = [*WORDS[2:], "zebra", "giraffe"]  # two words the model lacks
    os.makedirs(root)
    for split, lines in (("train", 60), ("valid", 20), ("test", 20)):
        with open(root / f"{split}.txt", "w") as f:
            f.write("\n".join(" ".join(rng.choice(text, 10)) for _ in range(lines)) + "\n")
    return str(root)


def test_a_language_model_fine_tunes_on_a_users_text_read_in_its_own_words(tmp_path):
    from keras_tse.data import WordTokenizer, load_tokenizer
    from keras_tse.training import text_runs

    source, data = _language_model(tmp_path), _corpus(tmp_path / "corpus")
    plan = Plan.build(
        "text", dataset="text", data_dir=data, from_preset=str(tmp_path / "lm.keras"), out=str(tmp_path / "o")
    )
    assert plan.settings.norm == ("pre",) and plan.variants[0].preset is None
    ids, vocab = text_runs.load_data(plan)
    assert vocab.symbols == WORDS
    with open(os.path.join(data, "valid.txt")) as f:  # every word by the model's own ids, the two it lacks <unk>
        expected = WordTokenizer(WORDS).vocabulary.encode(f.read().splitlines())
    np.testing.assert_array_equal(ids["valid"], expected)
    assert (ids["valid"] == 1).sum() > 0 and text_runs._stream_shape(plan) == (plan.variants[0].config.batch_size, 8)
    loaded = text_runs.source(plan.settings).trained.load()
    for got, expected in zip(loaded.get_weights(), source.get_weights()):  # it starts from every trained weight
        np.testing.assert_array_equal(got, expected)

    from keras_tse.cli import main as cli

    argv = ["train", "lm", "--dataset", "text", "--data-dir", data, "--from-preset", str(tmp_path / "lm.keras")]
    run = ["--steps", "1", "--eval-interval", "1", "--batch-size", "2", "--verbose", "0", "--out", str(tmp_path / "r")]
    assert cli.main([*argv, *run]) == 0
    tuned = tmp_path / "r" / "pre"
    assert load_tokenizer(str(tuned)).vocabulary.symbols == WORDS  # the run keeps the model's words
    with open(tuned / "config.json") as f:
        assert json.load(f)["from_preset"] == str(tmp_path / "lm.keras")
    image = _classifier(1, DIGIT_NAMES, 1)
    image.save(tmp_path / "image.keras")
    given = dict(dataset="text", data_dir=data, out=str(tmp_path / "x"), from_preset=str(tmp_path / "lm.keras"))
    for change, expected in (
        (dict(depth=3), "--depth: received 3; expected no model flag with --from-preset"),
        (dict(norm=("post",)), "--norm: received post; expected pre or no --norm"),
        (
            dict(from_preset=str(tmp_path / "image.keras")),
            "a language model .* \\(an image classifier: keras-tse train vit",
        ),
    ):
        with pytest.raises(ValueError, match=expected):
            Plan.build("text", **{**given, **change})
