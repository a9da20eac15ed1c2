"""`keras-tse probe`: the profile of a saved model, equal to the library's measures."""

import numpy as np
import pytest

import keras_tse
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
    expected += " or a preset folder"
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


def test_probe_command_draws_kerashubs_named_inputs(tmp_path, capsys):
    """A saved KerasHub task takes a dict (token ids, padding mask, segments, masked positions): the probe draws
    them (ids in the vocabulary, every token real, distinct masked positions, no more tokens than the position
    table holds) and prints a row a block, t_sim the library's measure on those inputs; so from the task's
    preset folder, de-escalated."""
    keras_hub = pytest.importorskip("keras_hub")
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    )
    task = keras_hub.models.BertMaskedLM(bert, preprocessor=None)
    _, x = random_inputs(task)
    assert x["token_ids"].shape == (8, 16) and 0 <= x["token_ids"].min() and x["token_ids"].max() < 50
    assert (x["padding_mask"] == 1).all() and (x["segment_ids"] == 0).all()
    assert x["mask_positions"].shape == (8, 4) and all(len(set(row)) == 4 for row in x["mask_positions"])
    path = str(tmp_path / "task.keras")
    task.save(path)
    assert cli.main(["probe", path]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith(("0 ", "1 "))]
    np.testing.assert_allclose([float(row[1]) for row in rows], token_similarity_profile(task, x), atol=1e-3)
    keras_tse.deescalate(task).save_to_preset(str(tmp_path / "preset"))  # a KerasHub task's preset folder
    assert cli.main(["probe", str(tmp_path / "preset")]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith(("0 ", "1 "))]
    assert len(rows) == 2 and all(abs(float(row[1])) < 1e-4 for row in rows)  # eq. (21): every block centred


def test_probe_command_reads_a_saved_sequential_of_kerashub_encoders(tmp_path, capsys):
    """A Sequential of blocks (read as its functional twin): a row a block, t_sim the library's measure."""
    import keras

    keras_hub = pytest.importorskip("keras_hub")
    model = keras.Sequential([keras.Input((6, 8)), *(keras_hub.layers.TransformerEncoder(16, 2) for _ in range(2))])
    path = str(tmp_path / "sequential.keras")
    model.save(path)
    assert cli.main(["probe", path]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith(("0 ", "1 "))]
    _, x = random_inputs(keras.saving.load_model(path))
    np.testing.assert_allclose([float(row[1]) for row in rows], token_similarity_profile(model, x), atol=1e-3)
