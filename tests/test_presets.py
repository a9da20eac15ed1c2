"""Presets with metadata: measured parameter counts, input, card, weights; `keras-tse presets`."""

import os

import keras
import numpy as np
import pytest

from keras_tse import zoo
from keras_tse.cli import main as cli
from keras_tse.cli.preset_sizes import model_sizes

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SMALL = sorted(n for n, e in zoo.presets().items() if e["params"] < 2_000_000)
# The paper-sized presets take 5-10 s each to build. No count depends on the backend (one code path
# makes every shape): the file is in conftest's ONE_BACKEND group.
LARGE = sorted(set(zoo.presets()) - set(SMALL))


def _check_counts(name):
    entry = zoo.presets()[name]
    model = zoo.from_preset(name)
    assert model_sizes(model) == {"params": entry["params"], "state": entry["state"]}
    assert entry["params"] + entry["state"] == model.count_params()


@pytest.mark.parametrize("name", SMALL)
def test_small_preset_parameter_counts_match_count_params(name):
    _check_counts(name)


@pytest.mark.parametrize("name", LARGE)
def test_paper_sized_preset_parameter_counts_match_count_params(name):
    _check_counts(name)
    keras.backend.clear_session(free_memory=True)


def test_presets_command_lists_every_preset_with_its_count(capsys):
    assert cli.main(["presets"]) == 0
    out = capsys.readouterr().out
    for name, entry in zoo.presets().items():
        row = next(line for line in out.splitlines() if line.startswith(f"| {name} |"))
        assert f"| {entry['params']:,} |" in row and entry["card"] in row and entry["input"] in row


def test_every_preset_has_its_metadata_and_an_existing_card():
    for name, entry in zoo.presets().items():
        if entry["weights"] is not None:  # shipped: a preset folder inside the package, at most 10 MiB
            folder = os.path.join(os.path.dirname(zoo.__file__), entry["weights"])
            files = sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)
            # a language model's tokenizer: its words and its settings (`keras_tse.data.WordTokenizer`)
            words = (
                ["assets/tokenizer/tokenizer.json", "assets/tokenizer/vocabulary.txt"]
                if entry["builder"] == "gpt"
                else []
            )
            assert files == sorted([*words, "config.json", "metadata.json", "model.weights.h5"]), name
            assert sum(os.path.getsize(os.path.join(folder, f)) for f in files) <= 10 * 2**20, name
        assert entry["normalization"] and entry["description"], name
        assert os.path.exists(os.path.join(ROOT, entry["card"])), (name, entry["card"])
    assert zoo.presets()["vit24_digits"]["input"] == "8x8x1 images"
    assert zoo.presets()["transformer_xl8_small"]["input"].startswith("[8, 32] token ids")


def test_the_zoo_index_lists_every_preset_with_its_card_and_links_every_card():
    """zoo/README.md, the cards' index: a table row for each preset naming its card, and a link to each card."""
    with open(os.path.join(ROOT, "zoo", "README.md")) as f:
        index = f.read()
    for name, entry in zoo.presets().items():
        page = os.path.basename(entry["card"])
        assert any(
            line.startswith(f"| `{name}` |") and line.endswith(f"| [{page}]({page}) |") for line in index.splitlines()
        ), name
    cards = sorted(f for f in os.listdir(os.path.join(ROOT, "zoo")) if f.endswith(".md") and f != "README.md")
    assert [card for card in cards if f"]({card})" not in index] == []


@pytest.mark.parametrize("keyword", ["pretrained", "load_weights"])
def test_asking_for_weights_says_none_are_published(keyword):
    with pytest.raises(ValueError, match=r"No weights are published for preset 'vit24_digits' yet.*vit24_digits\.md"):
        zoo.from_preset("vit24_digits", **{keyword: True})


def test_a_shipped_preset_loads_its_weights_unless_told_not_to():
    trained = zoo.from_preset("vit6_digits")
    untrained = zoo.from_preset("vit6_digits", load_weights=False)
    assert trained.count_params() == untrained.count_params() and trained.name == untrained.name == "vit6_digits"
    assert not all(np.array_equal(a, b) for a, b in zip(trained.get_weights(), untrained.get_weights()))
    with pytest.raises(
        ValueError, match=r"fix everything but num_classes, image_size, channels. Received overrides: \['depth'\]"
    ):
        zoo.from_preset("vit6_digits", depth=2)
    assert zoo.from_preset("vit6_digits", load_weights=False, depth=2).name == "vit6_digits-depth2"


def test_an_overridden_preset_is_named_after_the_change():
    assert zoo.from_preset("vit12_cifar10_small", depth=2, norm="pre").name == "vit12_cifar10_small-depth2-normpre"
    assert zoo.from_preset("vit12_cifar10_small", depth=12).name == "vit12_cifar10_small"  # no change, no suffix
    assert zoo.from_preset("vit12_cifar10_small", depth=2, name="mine").name == "mine"


def test_from_preset_loads_a_keras_file_and_refuses_overrides_for_it(tmp_path):
    path = os.path.join(ROOT, "tests", "fixtures", "vit_deescalate.keras")
    saved = np.load(path.replace(".keras", ".npz"))
    model = zoo.from_preset(path)
    np.testing.assert_allclose(np.asarray(model.predict(saved["inputs"], verbose=0)), saved["expected"], atol=1e-4)
    with pytest.raises(ValueError, match=r"overrides apply to presets. Received: \['depth'\]"):
        zoo.from_preset(path, depth=3)
    with pytest.raises(ValueError, match="missing.keras: received no such file; expected a saved .keras file"):
        zoo.from_preset("missing.keras")
    with open(path, "rb") as f:  # a download cut short: a file, but no archive (Keras says "File not found")
        (tmp_path / "cut.keras").write_bytes(f.read()[:2000])
    with pytest.raises(ValueError, match="cut.keras: received a file of 2,000 bytes that is no zip archive"):
        zoo.from_preset(str(tmp_path / "cut.keras"))


def test_create_model_and_list_models_cover_every_preset_and_family():
    from keras_tse.zoo.registry import FAMILIES, register_family

    names = zoo.list_models()
    assert set(names) == set(zoo.presets()) | set(zoo.list_families()) and names == sorted(names)
    vit80 = [f"vit80_cifar10_{norm}" for norm in ("deepnorm", "deescalate", "layerscale", "post", "pre")]
    assert zoo.list_models("vit80*") == vit80
    # a preset by name, with overrides, is from_preset's model; a family by name is its builder's
    model = zoo.create_model("vit24_digits", depth=2)
    assert (
        model.name == "vit24_digits-depth2"
        and model.count_params() == zoo.from_preset("vit24_digits", depth=2).count_params()
    )
    tiny = dict(depth=1, image_size=8, patch_size=4, channels=1, hidden_dim=8, ffn_dim=8, num_heads=2, name="tiny")
    built, expected = zoo.create_model("vit", **tiny), zoo.vit(**tiny)
    assert (built.name, built.count_params()) == ("tiny", expected.count_params())
    with pytest.raises(ValueError, match=r"Unknown model; choose from list_models\(\).*Received: model_name='vits'"):
        zoo.create_model("vits")
    # a new family is one decorator; a name registered twice is an error
    try:
        twin = register_family("vit_twin", lambda config: f"{config['image_size']}px images")(zoo.vit)
        assert "vit_twin" in zoo.list_models("vit_*")
        assert zoo.create_model("vit_twin", **tiny).count_params() == expected.count_params()
        with pytest.raises(ValueError, match="'vit_twin' is registered already"):
            register_family("vit_twin", lambda config: "images")(twin)
    finally:
        FAMILIES.unregister("vit_twin")
    assert zoo.presets()["vit24_digits"]["input"] == "8x8x1 images"  # described by its family


def test_a_family_s_presets_sit_beside_it_and_name_what_its_training_command_builds():
    """Presets are the families' (`register_family(presets=...)`): a family registered with its own is
    listed, built and searched by layout like the zoo's, and leaves with it; each layout's training preset
    and rate come from there (the paper's smaller rate for post-norm), a layout without one trains in the
    default layout's preset at its rate."""
    from keras_tse.zoo.registry import FAMILIES, preset, preset_for_layout

    assert preset_for_layout("vit", "post") == ("vit80_cifar10_post", 5e-5, False)
    assert preset_for_layout("vit", "rezero") == ("vit80_cifar10_deescalate", 1e-4, True)
    assert preset_for_layout("transformer_xl", "pre") == ("transformer_xl60_wt103_pre", 2.5e-4, False)
    tiny = {"depth": 1, "image_size": 8, "patch_size": 4, "channels": 1, "hidden_dim": 8, "ffn_dim": 8, "num_heads": 2}

    @zoo.register_family(
        "tiny_vit_test",
        lambda config: "8x8x1 images",
        presets={"tiny_vit_test_pre": preset({**tiny, "norm": "pre"}, "a test's", "none", "none", learning_rate=3e-4)},
    )
    def tiny_vit_test(norm="pre", **config):
        return zoo.vit(norm=norm, **config)

    try:
        listed = zoo.presets()["tiny_vit_test_pre"]
        assert (listed["builder"], listed["input"], listed["learning_rate"]) == ("tiny_vit_test", "8x8x1 images", 3e-4)
        assert zoo.from_preset("tiny_vit_test_pre").get_layer("block_00").norm == "pre"
        assert "tiny_vit_test_pre" in zoo.list_models("tiny*")
        assert preset_for_layout("tiny_vit_test", "post") == ("tiny_vit_test_pre", 3e-4, True)
    finally:
        FAMILIES.unregister("tiny_vit_test")
    assert "tiny_vit_test_pre" not in zoo.presets()
