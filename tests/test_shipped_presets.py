"""The presets that ship with trained weights (the lab's `ship_presets` wrote them):
`zoo.from_preset(name)` scores its whole test set as its card and metadata say (each preset on two or three
backends), and fine-tunes, pools and resizes as timm's models do."""

import json
import os

import keras
import pytest

from keras_tse import zoo
from keras_tse.zoo.preset_folder import preset_metadata
from tests.helpers import lab_module, only_on, pyproject_floors

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

SHIPPED = sorted(name for name, entry in zoo.presets().items() if entry["weights"] is not None)
PACKAGE = os.path.dirname(zoo.__file__)  # the presets' `weights` are relative to it
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_shipped_presets_are_the_ones_the_shipping_script_makes():
    ship = lab_module("ship_presets")
    assert SHIPPED == sorted([*ship.COMMANDS, *ship.LANGUAGE_MODELS])


@pytest.mark.one_backend
def test_the_keras_the_package_asks_for_reads_what_the_shipped_presets_were_saved_with():
    """A preset's `config.json` holds what its Keras's `get_config` wrote, and an older Keras refuses a setting it
    does not know (Keras 3.15's `VarianceScaling(input_axes=...)` stops 3.14 from loading every shipped preset,
    seen): so the lowest Keras `pyproject.toml` allows is at least the newest the presets were saved with."""
    from packaging.version import Version

    lowest = pyproject_floors()["keras"]
    folders = [os.path.join(PACKAGE, zoo.presets()[name]["weights"]) for name in SHIPPED]
    saved = max(Version(preset_metadata(folder)["keras_version"]) for folder in folders)
    assert lowest.release[:2] >= saved.release[:2], (lowest, saved)


# The digits preset on every backend (raw images through its own preprocessor, on each); the larger two, 10,000
# images and 82,430 tokens, on two, JAX (the README's) among them: that a `.keras` file predicts the same on every
# backend is tests/test_gpt.py's, and their preprocessors are the digits preset's code.
SCORED_ON = {
    "gpt4_ptb": ("jax", "torch"),
    "vit6_digits": ("jax", "tensorflow", "torch"),
    "vit6_fashion_mnist": ("jax", "torch"),
}


@pytest.mark.one_backend
def test_every_shipped_preset_is_scored():
    assert sorted(SCORED_ON) == SHIPPED


@pytest.mark.xla_optimized  # a whole test set: the passes save more than they cost
@pytest.mark.parametrize("name", [only_on(name, *SCORED_ON.get(name, ("jax",))) for name in SHIPPED])
def test_a_shipped_preset_scores_its_test_set_as_recorded(name):
    """Accuracy within 0.5 points, a language model's perplexity within 0.5%, on this backend; the card
    quotes the number."""
    metadata = preset_metadata(os.path.join(PACKAGE, zoo.presets()[name]["weights"]))
    model = zoo.from_preset(name)  # the weights, with no network
    ship = lab_module("ship_presets")
    try:
        if "test_perplexity" in metadata:
            perplexity, tokens = ship.evaluate_text_test_set(model, metadata["dataset"])
        else:
            accuracy, images = ship.evaluate_test_set(model, metadata["dataset"])
    except FileNotFoundError as error:  # Fashion-MNIST's files: .ci/run fetches them
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    with open(os.path.join(ROOT, zoo.presets()[name]["card"])) as f:
        card = f.read()
    if "test_perplexity" in metadata:
        assert tokens == metadata["test_tokens"]
        assert abs(perplexity / metadata["test_perplexity"] - 1) <= 0.005, (perplexity, metadata["test_perplexity"])
        assert f"{metadata['test_perplexity']:.1f}" in card
    else:
        assert images == metadata["test_images"]
        assert abs(accuracy - metadata["test_accuracy"]) <= 0.005, (accuracy, metadata["test_accuracy"])
        assert f"{100 * metadata['test_accuracy']:.2f}%" in card
    if name == "vit6_fashion_mnist":  # chosen on a validation split: its record, and the table shows the epoch
        chosen = metadata["validation"]
        assert chosen["fraction"] == 0.1 and chosen["chosen_by"].startswith("recipes/lab/vit6_selection_study.py")
        assert "--validation-fraction 0.1" in metadata["command"] and 1 <= chosen["checkpoint_epoch"] <= 12
        assert f"| {chosen['checkpoint_epoch']} of {metadata['epochs']} (validation) |" in card


def test_a_shipped_preset_fine_tunes_with_a_fresh_head_gives_its_features_and_takes_another_image_size():
    """timm's `create_model(name, pretrained=True, num_classes=N)`: every body weight bit for bit, a fresh
    head of N classes; `num_classes=0` the pooled features; another `image_size` loads and predicts."""
    import numpy as np

    trained = zoo.from_preset("vit6_fashion_mnist")
    three = zoo.create_model("vit6_fashion_mnist", num_classes=3)
    assert tuple(three.output.shape) == (None, 3)
    for layer in trained.layers:
        if layer.name != "head":
            for a, b in zip(layer.weights, three.get_layer(layer.name).weights):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert three.get_layer("head") is not trained.get_layer("head")
    x = np.random.default_rng(0).random((4, 28, 28, 1)).astype("float32")
    features = zoo.from_preset("vit6_fashion_mnist", num_classes=0)
    pooled = features.predict(x, verbose=0)
    assert pooled.shape == (4, 64)
    head = trained.get_layer("head")  # the trained model's logits are its head on those features
    logits = keras.ops.convert_to_numpy(head(pooled))
    np.testing.assert_allclose(logits, trained.predict(x, verbose=0), atol=1e-4)
    larger = zoo.from_preset("vit6_fashion_mnist", image_size=32)
    assert larger.name == "vit6_fashion_mnist-image_size32"  # named after the change, as every override
    for layer in trained.layers:  # every weight kept bit for bit but the resampled position table
        for a, b in zip(layer.weights, larger.get_layer(layer.name).weights):
            if "position" not in a.path:
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    assert tuple(zoo.preprocessing.core_of(larger).input.shape) == (None, 32, 32, 1)
    assert zoo.preprocessing.preprocessor_of(larger).image_size == 32  # raw images resized to the new size
    assert larger.predict(np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0))), verbose=0).shape == (4, 10)
    with pytest.raises(
        ValueError, match=r"fix everything but num_classes, image_size, channels. Received overrides: \['depth'\]"
    ):
        zoo.from_preset("vit6_fashion_mnist", depth=3)


def test_a_grey_preset_fine_tunes_on_colour_images_and_the_head_follows_one_rule():
    """`channels=3` on a grey preset: the patch kernel repeated on each channel over 3, so a grey image
    given as three equal channels gives the preset's logits exactly (every other weight kept); a colour
    kernel back to grey is the sum over its channels (timm's `adapt_input_conv`). The head: the preset's for
    its own count of classes, fresh for another count or on request (`new_head=True`)."""
    import numpy as np

    from keras_tse.zoo.fine_tune import adapt_input_channels

    trained = zoo.from_preset("vit6_fashion_mnist")
    colour = zoo.from_preset("vit6_fashion_mnist", channels=3)
    assert colour.name == "vit6_fashion_mnist-channels3"
    assert tuple(zoo.preprocessing.core_of(colour).input.shape) == (None, 28, 28, 3)
    grey = np.random.default_rng(0).random((4, 28, 28, 1)).astype("float32")
    np.testing.assert_allclose(
        colour.predict(np.repeat(grey, 3, axis=-1), verbose=0), trained.predict(grey, verbose=0), atol=1e-4
    )
    kernel = keras.ops.convert_to_numpy(colour.get_layer("patch_embedding").projection.kernel)
    back = keras.ops.convert_to_numpy(adapt_input_channels(kernel, 1))
    original = keras.ops.convert_to_numpy(trained.get_layer("patch_embedding").projection.kernel)
    np.testing.assert_allclose(back, original, rtol=1e-6, atol=1e-7)  # w/3 summed thrice: float32 rounding
    trained_head = trained.get_layer("head").get_weights()[0]
    for options, fresh in (({"num_classes": 10}, False), ({"num_classes": 10, "new_head": True}, True), ({}, False)):
        head = zoo.from_preset("vit6_fashion_mnist", **options).get_layer("head").get_weights()[0]
        assert (head == trained_head).all() != fresh, options


def test_a_colour_kernel_adapts_to_any_channel_count_as_timm_does():
    """timm's `adapt_input_conv` on a colour kernel whose channels differ: grey is the sum over them; C channels
    the colour kernel repeated to C and scaled by 3 / C, so an image of the colour image's channels repeated
    projects as the colour image does; a kernel of other than 1 or 3 channels adapts to grey only."""
    import numpy as np

    from keras_tse.zoo.fine_tune import adapt_input_channels

    def adapted(kernel, channels):
        return keras.ops.convert_to_numpy(adapt_input_channels(kernel, channels))

    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(2, 2, 3, 4)).astype("float32")
    np.testing.assert_allclose(adapted(kernel, 1), kernel.sum(axis=2, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(adapted(kernel, 3), kernel)
    np.testing.assert_allclose(adapted(kernel, 4), kernel[:, :, [0, 1, 2, 0]] * 0.75, rtol=1e-6)
    six = adapted(kernel, 6)
    np.testing.assert_allclose(six, kernel[:, :, [0, 1, 2, 0, 1, 2]] * 0.5, rtol=1e-6)
    patch = rng.normal(size=(2, 2, 3)).astype("float32")
    np.testing.assert_allclose(
        np.einsum("ijc,ijcd->d", np.concatenate([patch, patch], axis=-1), six),
        np.einsum("ijc,ijcd->d", patch, kernel),
        rtol=1e-5,
    )
    four = rng.normal(size=(2, 2, 4, 4)).astype("float32")
    np.testing.assert_allclose(adapted(four, 1), four.sum(axis=2, keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="A 4-channel kernel adapts to 1 channel only. Received: channels=3"):
        adapt_input_channels(four, 3)


def test_another_size_and_class_count_at_once_keep_every_other_weight_and_a_size_off_the_grid_is_one_line():
    import numpy as np

    trained = zoo.from_preset("vit6_fashion_mnist")
    both = zoo.from_preset("vit6_fashion_mnist", image_size=32, num_classes=3)
    assert tuple(both.output.shape) == (None, 3)
    for layer in trained.layers:
        if layer.name == "head":
            continue
        for a, b in zip(layer.weights, both.get_layer(layer.name).weights):
            if "position" not in a.path:
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=a.path)
    patch = zoo.full_config("vit6_fashion_mnist")["patch_size"]
    off_grid = patch * 8 + 1
    with pytest.raises(ValueError, match=f"divide `image_size`. Received: image_size={off_grid}, patch_size={patch}"):
        zoo.from_preset("vit6_fashion_mnist", image_size=off_grid)


def test_a_fresh_head_is_named_initialised_as_pytorchs_and_the_head_rule_holds():
    """`with_head`: the models named after the change; a fresh head of PyTorch's default init (kernel and bias
    uniform within 1/sqrt(fan_in), fan_in the 64 features), float32 logits under a mixed policy; `new_head`:
    fresh for another count or on request, the preset's otherwise."""
    import numpy as np

    from keras_tse.zoo.fine_tune import new_head, with_head

    trained = zoo.from_preset("vit6_fashion_mnist")
    assert with_head(trained, 0).name == f"{trained.name}_features"
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        wide = with_head(trained, 1000)
    finally:
        keras.config.set_dtype_policy(previous)
    assert wide.name == f"{trained.name}_head1000" and wide.get_layer("head").dtype_policy.name == "float32"
    kernel, bias = (np.asarray(w) for w in wide.get_layer("head").weights)
    bound = 1 / np.sqrt(64)
    assert bound * 0.9 < np.abs(kernel).max() <= bound and bound * 0.9 < np.abs(bias).max() <= bound
    rule = [new_head(10, None), new_head(10, 10), new_head(10, 3), new_head(10, None, True)]
    assert rule == [False, False, True, True]


def test_the_position_table_resamples_over_the_patch_grid_and_keeps_the_class_token_row():
    import numpy as np

    from keras_tse.zoo.fine_tune import resample_positions

    rng = np.random.default_rng(0)
    table = rng.normal(size=(1, 1 + 49, 8)).astype("float32")
    np.testing.assert_allclose(resample_positions(table, 7, 7), table, atol=1e-5)  # the same grid: unchanged
    larger = np.asarray(resample_positions(table, 7, 14))
    assert larger.shape == (1, 1 + 196, 8)
    np.testing.assert_array_equal(larger[:, 0], table[:, 0])  # the class token's row, kept
    flat = np.asarray(resample_positions(np.ones((1, 50, 8), "float32"), 7, 14))
    np.testing.assert_allclose(flat, 1.0, atol=1e-5)  # a constant table stays constant
    torch = pytest.importorskip("torch")  # timm's resampling, PyTorch's bicubic: the same numbers on every backend
    for old, new in ((7, 14), (14, 7), (4, 9)):
        patches = rng.normal(size=(1, old * old, 8)).astype("float32")
        grid = torch.tensor(patches).reshape(1, old, old, 8).permute(0, 3, 1, 2)
        expected = torch.nn.functional.interpolate(grid, size=(new, new), mode="bicubic", align_corners=False)
        ours = keras.ops.convert_to_numpy(resample_positions(np.concatenate([table[:, :1], patches], 1), old, new))
        np.testing.assert_allclose(ours[0, 1:], expected[0].permute(1, 2, 0).reshape(-1, 8).numpy(), atol=1e-5)


@pytest.mark.one_backend  # the training command's path; the fresh head itself is checked on every backend above
def test_the_training_command_fine_tunes_a_shipped_preset_from_its_weights(tmp_path):
    """`keras-tse train vit --from-preset`: the run starts from the preset's weights, its head by the one rule
    (`zoo.fine_tune`): on the preset's own data set every layer as shipped, on another's classes a fresh head
    (and the patch grid resampled to its images), so one epoch of the digits at a small rate already
    classifies them, where the same epoch from scratch is near chance; the run records what it started
    from; a rate set or a model flag beside it is one line."""
    from keras_tse.cli import main as cli
    from keras_tse.training import Plan, image_runs

    argv = ["--from-preset", "vit6_digits", "--dataset", "digits", "--out", str(tmp_path / "run")]
    shipped = zoo.from_preset("vit6_digits")
    planned = dict(from_preset="vit6_digits", out=str(tmp_path / "run"), no_download=True)
    for dataset in ("digits", "mnist"):
        plan = Plan.build("images", dataset=dataset, **planned)
        model = image_runs.build_model(plan, plan.variants[0])
        for layer in model.layers:
            if layer.weights and layer.name not in ("head", "patch_embedding"):
                for got, expected in zip(layer.get_weights(), shipped.get_layer(layer.name).get_weights()):
                    assert (got == expected).all(), layer.name
        kept = (model.get_layer("head").get_weights()[0] == shipped.get_layer("head").get_weights()[0]).all()
        assert kept == (dataset == "digits"), dataset  # the preset's own classes keep their head
        core = zoo.preprocessing.core_of(model)
        assert tuple(core.input.shape) == ((None, 8, 8, 1) if dataset == "digits" else (None, 28, 28, 1))

    epoch = ["--epochs", "1", "--learning-rate", "1e-3", "--verbose", "0", "--no-download"]
    assert cli.main(["train", "vit", *argv, *epoch]) == 0
    with open(tmp_path / "run" / "deescalate" / "config.json") as f:
        config = json.load(f)
    with open(tmp_path / "run" / "deescalate" / "summary.json") as f:
        accuracy = json.load(f)["test_accuracy"]
    assert config["from_preset"] == "vit6_digits" and config["model"] == "vit6_digits"
    assert accuracy > 0.8, accuracy  # from scratch, the same epoch and rate: 27.6% (measured)
    with pytest.raises(ValueError, match="--depth: received 3; expected no model flag with --from-preset"):
        Plan.build("images", dataset="digits", depth=3, **planned)


@pytest.mark.one_backend  # the command's path; the model's perplexity is checked on every backend above
def test_keras_tse_generate_on_the_shipped_language_model_prints_the_words_its_card_quotes(capsys):
    from keras_tse.cli import main as cli

    argv = ["generate", "gpt4_ptb", "--prompt", "the company said", "--max-new-tokens", "12", "--temperature", "0"]
    capsys.readouterr()
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    with open(os.path.join(ROOT, "zoo", "gpt4_ptb.md")) as f:
        quoted = f.read().split("<!-- greedy -->\n```text\n")[1].split("\n```")[0]
    assert printed == quoted and len(printed.split()) == 13 and printed.split()[3:5] == ["the", "<unk>"]  # to <eos>


@pytest.mark.one_backend  # the command's path; the kernel's adaptation is checked on every backend above
def test_the_training_command_fine_tunes_a_grey_preset_on_a_folder_of_colour_images(tmp_path):
    """`keras-tse train vit6_fashion_mnist --dataset folder` on RGB images (Pillow reads a folder as RGB):
    the preset's patch kernel adapted to three channels, a fresh head for the folder's two classes."""
    from keras_tse.cli import main as cli
    from tests.test_bad_inputs import image_folder

    folder = image_folder(tmp_path / "pets", per_class=5)
    out = tmp_path / "run"
    argv = ["train", "vit6_fashion_mnist", "--dataset", "folder", "--data-dir", folder, "--image-size", "28"]
    assert cli.main([*argv, "--epochs", "1", "--batch-size", "4", "--verbose", "0", "--out", str(out)]) == 0
    with open(out / "deescalate" / "config.json") as f:
        config = json.load(f)
    assert (config["from_preset"], config["overrides"]) == ("vit6_fashion_mnist", {"channels": 3})
    model = keras.saving.load_model(out / "deescalate" / "checkpoints" / "last.keras")
    assert tuple(zoo.preprocessing.core_of(model).input.shape) == (None, 28, 28, 3)
    assert tuple(model.output.shape) == (None, 2)
