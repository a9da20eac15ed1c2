"""The WikiText-103 Transformer-XL recipe end to end on the offline corpus (CPython's docs)."""

import csv
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_tse  # also registers the classes the checkpoints name
from tests.helpers import planned, run_recipe_here, smoke_all_variants

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "recipes", "wikitext103_txl.py")


@pytest.mark.large
@pytest.mark.one_backend  # the folder layout of three variants; test_smoke_one_variant_on_this_backend trains on each
def test_smoke_all_variants_writes_the_run_folder(tmp_path, capsys):
    # one block: this is the run folder of every variant; the depth of the smoke model changes none of it
    for run in smoke_all_variants("wikitext103_txl", tmp_path, "valid ppl", capsys, more_files=("steps.csv",)):
        with open(run / "steps.csv") as f:
            losses = [float(row["loss"]) for row in csv.DictReader(f)]
        assert len(losses) == 6 and losses[-1] < losses[0]  # 60 steps logged every 10; it learns
        summary = json.loads((run / "summary.json").read_text())
        assert summary["epochs"] == 3 and summary["valid_perplexity"] > 1


def test_smoke_one_variant_on_this_backend(tmp_path, capsys):
    argv = ["--smoke", "--norm", "deescalate", "--steps", "20", "--out", str(tmp_path)]
    code, out, err = run_recipe_here("wikitext103_txl", argv, capsys)
    assert code == 0, err[-3000:]
    assert "deescalate: 1 evaluations" in out
    assert out.index("loading wikitext103 (smoke slice) ...") < out.index("loaded ") < out.index("=== deescalate")
    assert "\x1b[" not in out and "\r" not in out  # not a terminal: one plain line per epoch (--verbose 2)
    model = keras.saving.load_model(str(tmp_path / "deescalate" / "checkpoints" / "last.keras"))
    assert model.input.shape == (8, 32) and model.output.shape == (8, 32, 4000)


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["--norm", "post", "--tau", "0.5"],
            "--norm: received post; expected deescalate or deescalate_layerscale or deescalate_leaky_global",
        ),
        (
            ["--norm", "deescalate_leaky_global", "--segment-mean"],
            "--norm: received deescalate_leaky_global; expected deescalate or deescalate_layerscale: --segment-mean "
            "set(s) eq. (21)",
        ),
    ],
)
def test_eq_21_flags_on_a_norm_without_it_stop_in_one_line(argv, expected, tmp_path, capsys):
    code, _, err = run_recipe_here("wikitext103_txl", [*argv, "--smoke", "--out", str(tmp_path)], capsys)
    assert code == 2 and err.strip().startswith(f"wikitext103_txl: error: {expected}") and err.count("\n") == 1
    assert not os.listdir(tmp_path)  # stopped before any folder was made


@pytest.mark.large
@pytest.mark.one_backend  # flags to config; the blocks' numerics are tests/test_transformer_xl.py's
def test_eq_21_flags_reach_every_block_and_the_run_config(tmp_path, capsys):
    argv = ["--smoke", "--norm", "deescalate", "--tau", "0.5", "--trainable-tau", "--deescalate-at", "output"]
    argv += ["--segment-mean", "--steps", "4", "--eval-interval", "2", "--depth", "1", "--out", str(tmp_path)]
    code, out, err = run_recipe_here("wikitext103_txl", argv, capsys)
    assert code == 0, err[-3000:]
    with open(tmp_path / "deescalate" / "config.json") as f:
        overrides = json.load(f)["overrides"]
    expected = dict(tau=0.5, trainable_tau=True, deescalate_at="output", deescalate_memory=False)
    assert {key: overrides[key] for key in expected} == expected
    model = keras.saving.load_model(tmp_path / "deescalate" / "checkpoints" / "last.keras")
    block = model.get_layer("block_00")
    assert (block.tau, block.trainable_tau, block.deescalate_at, block.deescalation_memory) == (
        0.5,
        True,
        "output",
        None,
    )


@pytest.mark.large
@pytest.mark.one_backend
def test_own_text_folder_trains_the_language_model_recipes_smoke_run(tmp_path, capsys):
    from keras_tse.data import load_text_folder

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    for split, lines in (("train", 400), ("valid", 60), ("test", 60)):
        text = "\n".join(" ".join(rng.choice(words, 8)) for _ in range(lines))
        (tmp_path / f"{split}.txt").write_text(text + ("\nnever_in_training" if split == "test" else ""))
    ids, vocab = load_text_folder(str(tmp_path))
    assert len(vocab) == 42 and vocab.decode(ids["test"][-2:]) == "<unk> <eos>"  # 40 words, <eos>, <unk>
    argv = ["--smoke", "--norm", "deescalate", "--dataset", "text", "--data-dir", str(tmp_path), "--steps", "4"]
    argv += ["--depth", "1"]
    code, out, err = run_recipe_here(
        "wikitext103_txl", [*argv, "--eval-interval", "2", "--out", str(tmp_path / "r")], capsys
    )
    assert code == 0, err[-3000:]
    with open(tmp_path / "r" / "deescalate" / "summary.json") as f:
        summary = json.load(f)
    assert np.isfinite(summary["test_perplexity"]) and summary["test_perplexity"] < 42 * 3  # near 42 words, untrained
    from keras_tse.data.text import Vocabulary  # the run keeps its words: its ids read back as the text's

    kept = Vocabulary.load(str(tmp_path / "r" / "deescalate" / "vocabulary.txt"))
    assert kept.symbols == vocab.symbols and kept.decode(ids["test"][-2:]) == "<unk> <eos>"
    # `keras-tse generate` continues a text with the run's model, reading and writing its words
    from keras_tse import run_files, zoo
    from keras_tse.cli import main as cli

    run = tmp_path / "r" / "deescalate"
    capsys.readouterr()
    every_word = ["--prompt", "w1 w2 w3", "--max-new-tokens", "5", "--temperature", "0", "--no-stop", "--show-special"]
    assert cli.main(["generate", str(run), *every_word]) == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    chosen, which = run_files.chosen_checkpoint(str(run))  # the language model's: chosen on its validation text
    assert chosen == str(run / "checkpoints" / "best.keras") and which.startswith("best.keras")
    model = keras.saving.load_model(chosen, compile=False)
    expected = zoo.generate(model, kept.encode(["w1 w2 w3"])[:-1], 5, temperature=0)
    assert said == kept.decode(expected) and said.startswith("w1 w2 w3 ") and len(said.split()) == 8
    # its words travel inside its checkpoints and its export: the file alone continues the text
    from keras_tse.data.tokenizers import tokenizer_from_archive

    assert tokenizer_from_archive(str(run / "checkpoints" / "last.keras")).vocabulary.symbols == vocab.symbols
    exported = str(tmp_path / "lm.keras")
    assert cli.main(["export", str(run), "--out", exported]) == 0
    capsys.readouterr()
    assert cli.main(["generate", exported, *every_word]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == said
    every_id = dict(temperature=0, stop_token_ids=None, skip_special_tokens=False)
    assert zoo.generate(zoo.from_preset(exported), "w1 w2 w3", 5, **every_id) == said
    assert cli.main(["generate", str(tmp_path / "r"), "--prompt", "w1"]) == 2  # the top folder: one line
    assert "or a run's variant folder (it has no checkpoints/last.keras, vocabulary.txt)" in capsys.readouterr().err
    # the identical command again: the vocabulary is read from the text, then the finished run is found
    code, out, err = run_recipe_here(
        "wikitext103_txl", [*argv, "--eval-interval", "2", "--out", str(tmp_path / "r")], capsys
    )
    assert code == 0 and f"{tmp_path / 'r' / 'deescalate'}: finished, skipping" in out, err[-3000:]
    # killed right after its first backup, then run again: it resumes there and ends as the whole run did
    killed = [RECIPE, *argv, "--eval-interval", "2", "--out", str(tmp_path / "k")]
    child = [sys.executable, "-c", KILL_AFTER_FIRST_BACKUP, *killed]
    stopped = subprocess.run(child, capture_output=True, text=True, timeout=600)
    assert stopped.returncode == -9 and not (tmp_path / "k" / "deescalate" / "summary.json").exists(), stopped.stderr
    code, out, err = run_recipe_here("wikitext103_txl", killed[1:], capsys)  # the same command, in this process
    assert code == 0 and "RunBackup: resuming after epoch 1" in out, err[-3000:]
    for name in ("history.csv", "steps.csv"):
        assert (tmp_path / "k" / "deescalate" / name).read_text() == (tmp_path / "r" / "deescalate" / name).read_text()
    # --epochs: passes over train.txt, in steps of batch x segment tokens (smoke: 8 x 32)
    by_epochs = [*argv[: argv.index("--steps")], "--depth", "1", "--epochs", "0.1", "--out", str(tmp_path / "e")]
    code, _, err = run_recipe_here("wikitext103_txl", by_epochs, capsys)
    assert code == 0, err[-3000:]
    with open(tmp_path / "e" / "deescalate" / "config.json") as f:
        assert json.load(f)["train"]["steps"] == int(np.ceil(0.1 * len(ids["train"]) / (8 * 32)))


KILL_AFTER_FIRST_BACKUP = r"""
import os, runpy, signal, sys
replace = os.replace
def replace_then_die(src, dst):
    replace(src, dst)
    if str(dst).endswith("epoch_00001.weights.h5"):
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace_then_die
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_size_paper_trains_fig_7s_model_on_ptb():
    """Sec. 3.4's widths at depth 60 with PTB's plain softmax, and Transformer-XL's schedule."""
    variant = planned("wikitext103_txl", ["--dataset", "ptb", "--size", "paper", "--norm", "deescalate"]).variant(
        "deescalate"
    )
    built = {**keras_tse.zoo.full_config(variant.preset), **variant.overrides}
    widths = ("depth", "hidden_dim", "num_heads", "head_dim", "ffn_dim", "segment_len", "mem_len", "batch_size")
    assert [built[k] for k in widths] == [60, 410, 10, 41, 820, 150, 150, 40]
    assert (built["norm"], built["cutoffs"], built["dropout"], built["deescalate_at"]) == (
        "deescalate",
        (),
        0.0,
        "pre_ffn",
    )
    config = variant.config
    assert (config.steps, config.batch_size, config.learning_rate, config.clipnorm) == (4000, 40, 2.5e-4, None)
    cpu = planned("wikitext103_txl", ["--dataset", "ptb"]).variant("post")
    assert cpu.overrides["depth"] == 16 and cpu.overrides["hidden_dim"] == 128  # the CPU size stays the default
    with pytest.raises(ValueError, match="^--size: received 'paper' with --dataset wikitext103; expected"):
        planned("wikitext103_txl", ["--size", "paper"])
