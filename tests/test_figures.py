"""`keras-tse figures --quick`: every figure regenerates, and the paper's statements hold on its numbers."""

import csv

import numpy as np
import pytest

from keras_tse.experiments import cli
from keras_tse.experiments.figures import figure_3, figure_5, make_figures


def test_quick_figures_write_png_and_csv(tmp_path, capsys):
    assert cli.main(["figures", "--which", "2,8", "--quick", "--out", str(tmp_path)]) == 0
    for name in ("2", "8"):
        assert (tmp_path / f"fig{name}.png").stat().st_size > 0
    with open(tmp_path / "fig2.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and float(rows[-1]["t_sim"]) > float(rows[0]["t_sim"])  # escalation
    assert 1.5 < float(rows[0]["xi_ratio_step1"]) < 2.5  # "the mean of xi_1/xi_2 stays around 2"


def test_pre_norm_residual_grows_and_its_normalised_input_does_not():
    from keras_tse.experiments.figures import figure_4

    columns = figure_4(trials=1, depth=6)
    assert np.all(np.diff(columns["norm_x"]) > 0)  # eq. (20): the residual stream grows block after block
    np.testing.assert_allclose(columns["norm_ln_x"], np.sqrt(64 * 512), rtol=1e-3)  # LN rows have norm sqrt(d)


def test_quick_bert_and_albert_figure_measures_every_block():
    from keras_tse.experiments.figures import figure_1

    columns = figure_1(
        depth=4,
        hidden_dim=32,
        num_heads=2,
        intermediate_dim=64,
        vocabulary_size=100,
        embedding_dim=16,
        sequence_length=16,
    )
    for key in ("bert_t_sim", "albert_t_sim"):
        assert columns[key].shape == (4,) and np.all((columns[key] > 0) & (columns[key] < 1))
    assert len(set(np.round(columns["albert_t_sim"], 6))) == 4  # one value per call of the shared block
    assert np.all(np.isfinite(columns["bert_gradient_norm"])) and np.all(columns["bert_gradient_norm"] > 0)


def test_estimate_17_is_closer_than_estimate_16():
    columns = figure_3(draws=50, depth=6)
    error_16 = np.abs(columns["estimate1_xi"] - columns["xi_ratio_minus_1"]).mean()
    error_17 = np.abs(columns["estimate2_xi"] - columns["xi_ratio_minus_1"]).mean()
    assert error_17 < error_16


def test_de_escalation_keeps_diversity_once_tau_reaches_0_4():
    columns = figure_5(trials=1, depth=8, taus=(0.0, 0.4))
    assert columns["tau_0.4"][-1] > 0.8 > 0.2 > columns["tau_0.0"][-1]


def test_unknown_figure_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"Received: which=\['7'\]"):
        make_figures(["7"], str(tmp_path))
