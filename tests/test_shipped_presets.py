"""The presets that ship with trained weights (the lab's `ship_presets` wrote them): on every backend,
`zoo.from_preset(name)` classifies its whole test set as its card and metadata say, within 0.5 points."""

import os

import pytest

from keras_tse import zoo
from keras_tse.zoo.preset_folder import preset_metadata
from tests.helpers import lab_module

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

SHIPPED = sorted(name for name, entry in zoo.presets().items() if entry["weights"] is not None)
PACKAGE = os.path.dirname(zoo.__file__)  # the presets' `weights` are relative to it
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_shipped_presets_are_the_ones_the_shipping_script_makes():
    assert SHIPPED == sorted(lab_module("ship_presets").COMMANDS)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_preset_classifies_its_test_set_as_recorded(name):
    metadata = preset_metadata(os.path.join(PACKAGE, zoo.presets()[name]["weights"]))
    model = zoo.from_preset(name)  # the weights, with no network
    try:
        accuracy, images = lab_module("ship_presets").evaluate_test_set(model, metadata["dataset"])
    except FileNotFoundError as error:  # Fashion-MNIST's files: .ci/run fetches them
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))
    assert images == metadata["test_images"]
    assert abs(accuracy - metadata["test_accuracy"]) <= 0.005, (accuracy, metadata["test_accuracy"])
    with open(os.path.join(ROOT, zoo.presets()[name]["card"])) as f:
        assert f"{100 * metadata['test_accuracy']:.2f}%" in f.read()  # the card quotes the file
