"""`keras-tse probe`: the profile of a saved model, equal to the library's measures."""

import numpy as np
import pytest

from keras_tse.analysis.probe import probe_model, random_inputs
from keras_tse.analysis.similarity import token_similarity_profile
from keras_tse.cli import main as cli
from tests.helpers import tiny_transformer_xl, tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def test_probe_rows_match_the_similarity_profile():
    model = tiny_vit(depth=3, norm="post")
    _, x = random_inputs(model, batch_size=4)
    rows = probe_model(model, x)
    np.testing.assert_allclose([r["t_sim"] for r in rows], token_similarity_profile(model, x), rtol=1e-5)
    assert [r["block"] for r in rows] == [0, 1, 2] and all(r["entropy"] > 0 for r in rows)


def test_probe_command_on_a_saved_transformer_xl(tmp_path, capsys):
    model = tiny_transformer_xl()
    warmup, ids = random_inputs(model)
    assert ids.shape == (2, 6) and warmup.shape == (2, 6) and ids.max() < 40
    path = str(tmp_path / "txl.keras")
    model.save(path)
    assert cli.main(["probe", path]) == 0
    out = capsys.readouterr().out
    assert "2 blocks" in out and len([line for line in out.splitlines() if line.strip().startswith(("0 ", "1 "))]) == 2


@pytest.mark.one_backend
def test_probe_command_names_a_missing_file(tmp_path, capsys):
    assert cli.main(["probe", str(tmp_path / "none.keras")]) == 2
    expected = f"keras-tse probe: error: MODEL: received {tmp_path / 'none.keras'}; expected a saved .keras file"
    assert capsys.readouterr().err.strip() == expected


def test_probe_command_reads_a_plain_keras_model_through_layers(tmp_path, capsys):
    """A model of plain Keras layers: `--layers` names the blocks; t_sim is the library's measure."""
    import keras

    inputs = keras.Input((5, 8))
    x = keras.layers.Dense(8, name="mix_0")(inputs)
    x = keras.layers.Dense(8, name="mix_1")(keras.layers.LayerNormalization()(x))
    model = keras.Model(inputs, x, name="plain")
    path = str(tmp_path / "plain.keras")
    model.save(path)
    assert cli.main(["probe", path, "--layers", "mix_0,mix_1"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith(("0 ", "1 "))]
    _, x = random_inputs(model)
    expected = token_similarity_profile(model, x, layers=["mix_0", "mix_1"])
    np.testing.assert_allclose([float(row[1]) for row in rows], expected, atol=1e-3)
    assert cli.main(["probe", path, "--layers", "mix_0,nope"]) == 2
    assert (
        "keras-tse probe: error: --layers: received nope; expected names of layers of plain" in capsys.readouterr().err
    )
