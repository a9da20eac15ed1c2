"""`keras_tse.data.BytePairTokenizer`: the merges a text teaches (worked by hand), no text without ids, its files
read back, and `keras-tse train lm --tokenizer bpe` end to end: the run and its preset carry it to another
backend, which reads the text as this one does."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_tse.data import BytePairTokenizer, load_tokenizer, tokenizer_from_archive
from keras_tse.data.tokenizers import tokenizer_from_files

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py; the text's ids depend on no backend


def test_the_merges_are_the_most_frequent_pairs_lowest_ids_first_as_worked_by_hand():
    """ "ab ab ab" and "abc": the words " ab" x3 and " abc" (ids: the byte + 1, so space 33, a 98, b 99, c 100).
    Pairs (33, 98) and (98, 99) occur 4 times: the lower ids merge first, into 257; then (257, 99), 4 times, into
    258; (258, 100) occurs once, so learning stops there, below the 300 asked for."""
    tokenizer = BytePairTokenizer.train(["ab ab ab", "abc"], 300)
    assert tokenizer.merges == [(33, 98), (257, 99)] and len(tokenizer) == 259
    assert tokenizer.tokenize("ab abc").tolist() == [258, 258, 100]
    assert tokenizer.encode(["ab", "abc ab"]).tolist() == [258, 0, 258, 100, 258, 0]  # each line ends with <eos>
    assert tokenizer.detokenize([258, 0, 258, 100]) == "ab <eos> abc"
    assert tokenizer.detokenize([258, 0, 258, 100], skip_special_tokens=True) == "ab abc"
    assert tokenizer.symbols()[257:] == ["Ġa", "Ġab"]  # GPT-2's stand-in for the space byte
    assert BytePairTokenizer.train(["ab ab ab", "abc"], 258).merges == [(33, 98)]  # the size asked for, at most
    with pytest.raises(ValueError, match=r"`vocab_size` must be at least 258 .* Received: vocab_size=257"):
        BytePairTokenizer.train(["ab"], 257)


def test_every_text_has_ids_and_reads_back_and_the_files_rebuild_the_same_tokenizer(tmp_path):
    """Words the training text never held (accents, CJK, an emoji) still have ids, their bytes', and read back as
    written, single-spaced; saved and loaded (a folder, a .keras archive) the tokenizer gives the same ids."""
    lines = ["the company said the shares fell", "the market rose", "shares of the company"] * 20
    tokenizer = BytePairTokenizer.train(lines, 400, lowercase=True)
    text = "The  Naïve 日本 company 🚀 zyzzyva"
    ids = tokenizer.tokenize(text)
    assert ids.dtype == np.int32 and 0 not in ids.tolist() and max(ids) < len(tokenizer)
    assert tokenizer.detokenize(ids) == "the naïve 日本 company 🚀 zyzzyva"
    assert len(tokenizer.tokenize("the company")) < len(tokenizer.tokenize("zyzzyva qqq"))  # learned words: few ids
    tokenizer.save(tmp_path / "t")
    assert json.loads((tmp_path / "t" / "tokenizer.json").read_text()) == {"lowercase": True, "type": "byte_pair"}
    again = load_tokenizer(str(tmp_path / "t"))
    assert isinstance(again, BytePairTokenizer) and again.merges == tokenizer.merges and again.lowercase
    assert again.tokenize(text).tolist() == ids.tolist()
    import zipfile

    with zipfile.ZipFile(tmp_path / "m.keras", "w") as z:
        z.writestr("config.json", "{}")
    tokenizer.write_into(str(tmp_path / "m.keras"))
    assert tokenizer_from_archive(str(tmp_path / "m.keras")).tokenize(text).tolist() == ids.tolist()
    files = tokenizer.files()
    with pytest.raises(
        ValueError, match=r"tokenizer.json's type must be one of word, byte_pair. Received: 'wordpiece'"
    ):
        tokenizer_from_files(lambda name: '{"type": "wordpiece"}' if name == "tokenizer.json" else files.get(name))


OTHER = {"jax": "torch", "torch": "tensorflow", "tensorflow": "jax"}
READ_ELSEWHERE = """
import json, sys
from keras_tse import zoo
model = zoo.from_preset(sys.argv[1])
print(json.dumps({"ids": model.tokenizer.encode(open(sys.argv[2]).read().splitlines()).tolist(),
                  "text": zoo.generate(model, "the company", 6, temperature=0, stop_token_ids=None)}))
"""


@pytest.mark.large
def test_a_gpt_trains_on_byte_pairs_and_its_tokenizer_travels_with_the_run_and_the_preset(tmp_path, capsys):
    """`keras-tse train lm --dataset text --tokenizer bpe`: the vocabulary learned from train.txt alone reads every
    split, a test word the training text lacks included, with no unknown id (the ids read back as the text); the
    summary gives the perplexity a token and a word (`exp(loss * tokens / words)`); the run's tokenizer and its
    preset's, loaded on another backend, read the test text into the same ids; generated text shows no `<eos>`."""
    import keras

    from keras_tse import zoo
    from keras_tse.cli import main as cli

    rng = np.random.default_rng(0)
    words = ["the", "company", "said", "stocks", "fell", "rose", "déjà", "naïve", "market", "shares"]
    for split, count in (("train", 300), ("valid", 40), ("test", 40)):
        text = "\n".join(" ".join(rng.choice(words, 8)) for _ in range(count))
        (tmp_path / f"{split}.txt").write_text(text + ("\nnever_in_training zyzzyva" if split == "test" else "") + "\n")
    argv = ["train", "lm", "--model", "gpt", "--dataset", "text", "--data-dir", str(tmp_path), "--tokenizer", "bpe"]
    argv += [
        "--vocab-size",
        "300",
        "--norm",
        "deescalate",
        "--smoke",
        "--steps",
        "4",
        "--eval-interval",
        "2",
        "--depth",
        "1",
    ]
    assert cli.main([*argv, "--out", str(tmp_path / "r")]) == 0, capsys.readouterr().err[-3000:]
    run = tmp_path / "r" / "deescalate"
    tokenizer = load_tokenizer(str(run))
    assert isinstance(tokenizer, BytePairTokenizer) and len(tokenizer) == 300
    for split in ("train", "test"):  # every word read as itself: nothing unknown, nothing lost
        lines = (tmp_path / f"{split}.txt").read_text().splitlines()
        ids = tokenizer.encode(lines)
        assert tokenizer.detokenize(ids, skip_special_tokens=True) == " ".join(" ".join(lines).split())
        # the run trained from the split's token file, read memory-mapped: the same ids
        np.testing.assert_array_equal(np.load(tmp_path / "r" / "tokens" / f"{split}.npy", mmap_mode="r"), ids)
    test = lines
    with open(run / "summary.json") as f:
        summary = json.load(f)
    assert summary["test_words"] == sum(len(line.split()) + 1 for line in test) and summary["test_tokens"] == len(ids)
    ratio = summary["test_tokens"] / summary["test_words"]
    assert ratio > 1 and np.isclose(summary["test_perplexity_per_word"], summary["test_perplexity"] ** ratio)
    model = keras.saving.load_model(run / "checkpoints" / "last.keras", compile=False)
    model.tokenizer = tokenizer
    folder = zoo.save_preset(model, tmp_path / "preset")
    assert sorted(os.listdir(tmp_path / "preset" / "assets" / "tokenizer")) == ["merges.txt", "tokenizer.json",
                                                                                 "vocabulary.txt"]  # fmt: skip
    text = zoo.generate(zoo.from_preset(folder), "the company", 6, temperature=0, stop_token_ids=None)
    assert "<eos>" not in text and text.startswith("the company")
    backend = OTHER[keras.backend.backend()]
    done = subprocess.run(
        [sys.executable, "-c", READ_ELSEWHERE, folder, str(tmp_path / "test.txt")],
        env={**os.environ, "KERAS_BACKEND": backend}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    there = json.loads(done.stdout.strip().splitlines()[-1])
    assert there["ids"] == ids.tolist() and there["text"] == text
