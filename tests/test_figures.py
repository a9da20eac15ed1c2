"""`keras-tse figures --quick`: every figure regenerates, and the paper's statements hold on its numbers."""

import numpy as np
import pytest

from keras_tse.cli import main as cli
from recipes.lab.figures import draw, figure_3, figure_5, make_figures, read_csv

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py


def test_quick_figures_write_png_and_csv(tmp_path, capsys):
    assert cli.main(["figures", "--which", "2,8", "--quick", "--out", str(tmp_path)]) == 0
    for name in ("2", "8"):
        assert (tmp_path / f"fig{name}.png").stat().st_size > 0
    columns = read_csv(tmp_path / "fig2.csv")
    assert len(columns["t_sim"]) == 6 and columns["t_sim"][-1] > columns["t_sim"][0]  # escalation
    assert 1.5 < columns["xi_ratio_step1"][0] < 2.5  # "the mean of xi_1/xi_2 stays around 2"
    # the settings that made it head the CSV; every mean has its spread over the 2 trials
    caption = (tmp_path / "fig2.csv").read_text().splitlines()[0]
    assert caption.startswith("# Yu & Zhang, Fig. 2 (--quick): trials=2 depth=6 seed=0 n=64 d=512 h=8")
    assert {"t_sim_sd", "delta_sd", "omega_sd"} <= set(columns) and np.all(columns["t_sim_sd"] >= 0)
    assert columns["t_sim_sd"][-1] > 0  # two trials of random weights differ
    out = capsys.readouterr().out
    assert "Fig. 8 written:" in out and out.rstrip().splitlines()[-1].endswith("fig2.png/.csv, fig8.png/.csv")


def test_one_trial_has_zero_spread_and_figures_are_labelled_in_words():
    columns = figure_5(trials=1, depth=3, taus=(0.0, 0.4))
    np.testing.assert_array_equal(columns["tau_0.4_sd"], 0.0)  # one trial: no spread
    fig = draw("5", columns, "trials=1 depth=3")
    (ax,) = fig.axes
    assert ax.get_xlabel() == "block" and ax.get_ylabel() == "token diversity"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["tau = 0.0", "tau = 0.4"]
    assert len(ax.collections) == 2  # a band per curve
    assert "trials=1 depth=3" in fig.get_suptitle() and "sd over the trials" in fig.get_suptitle()
    figure_2 = draw("2", {"block": np.arange(1, 3), **{c: np.ones(2) for c in _FIGURE_2_COLUMNS}}, "")
    assert all(ax.get_xlabel() and ax.get_ylabel() for ax in figure_2.axes)
    legends = [t.get_text() for ax in figure_2.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert "step 3: FFN + residual" in legends and not [t for t in legends if "_" in t]


_FIGURE_2_COLUMNS = ("t_sim", "xi_ratio_step1", "xi_ratio_step2", "xi_ratio_step3", "xi_ratio_step4", "delta", "omega")


def test_pre_norm_residual_grows_and_its_normalised_input_does_not():
    from recipes.lab.figures import figure_4

    columns = figure_4(trials=1, depth=6)
    assert np.all(np.diff(columns["norm_x"]) > 0)  # eq. (20): the residual stream grows block after block
    np.testing.assert_allclose(columns["norm_ln_x"], np.sqrt(64 * 512), rtol=1e-3)  # LN rows have norm sqrt(d)


def test_quick_bert_and_albert_figure_measures_every_block():
    from recipes.lab.figures import figure_1

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
