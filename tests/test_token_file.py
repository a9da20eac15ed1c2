"""`keras_tse.data.token_file`: a split encoded a slice of lines at a time into a `.npy` file holds the ids the
whole split encodes to, NumPy reads it as its own, it is read memory-mapped, and a write cut short leaves no
file; a text folder loaded into token files gives the ids it gives in memory."""

import numpy as np
import pytest

from keras_tse.data import BytePairTokenizer, Vocabulary, load_text_folder
from keras_tse.data.token_file import read_token_file, write_token_file
from tests.helpers import text_folder

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py; ids and files depend on no backend

LINES = ["the cat sat", "", "on the mat", "the end"] * 5 + ["cat"]


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_a_split_written_a_slice_at_a_time_holds_the_ids_of_the_whole_split(kind, tmp_path):
    tokenizer = Vocabulary.build(LINES) if kind == "word" else BytePairTokenizer.train(LINES, 270)
    whole = tokenizer.encode(LINES)
    for size in (1, 2, 3, 7, len(LINES), 100):  # slices that cut the split anywhere, or not at all
        path = str(tmp_path / f"{size}.npy")
        assert write_token_file(path, tokenizer, iter(LINES), lines_per_slice=size) == len(whole)
        ids = read_token_file(path)
        assert isinstance(ids, np.memmap) and ids.dtype == np.int32
        np.testing.assert_array_equal(ids, whole)
        np.testing.assert_array_equal(np.load(path), whole)  # a plain .npy, NumPy's own reader


def test_a_write_cut_short_leaves_no_file_and_a_file_that_is_not_one_is_named(tmp_path):
    class Failing:
        def __init__(self):
            self.calls = 0

        def encode(self, lines):
            self.calls += 1
            if self.calls == 2:
                raise KeyboardInterrupt
            return np.zeros(len(lines), "int32")

    path = tmp_path / "train.npy"
    with pytest.raises(KeyboardInterrupt):
        write_token_file(str(path), Failing(), LINES, lines_per_slice=4)
    assert list(tmp_path.iterdir()) == []  # neither the file nor its partial sibling
    np.save(path, np.zeros((2, 3), "int32"))
    with pytest.raises(ValueError, match=r"train.npy holds int32 values of shape \(2, 3\); expected a token file"):
        read_token_file(str(path))
    path.write_bytes(b"not numpy")
    with pytest.raises(ValueError, match=r"train.npy is not a token file, a .npy file of int32 ids"):
        read_token_file(str(path))


@pytest.mark.parametrize("tokenizer", ["word", "bpe"])
def test_a_text_folder_in_token_files_gives_the_ids_it_gives_in_memory(tokenizer, tmp_path):
    folder = text_folder(tmp_path / "text", lines=(300, 40, 40))
    in_memory, words = load_text_folder(str(folder), tokenizer=tokenizer, vocab_size=280)
    mapped, mapped_words = load_text_folder(str(folder), tokenizer=tokenizer, vocab_size=280, token_dir=tmp_path / "t")
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["test.npy", "train.npy", "valid.npy"]
    for split, ids in in_memory.items():
        assert isinstance(mapped[split], np.memmap)
        np.testing.assert_array_equal(mapped[split], ids)
    assert len(words) == len(mapped_words)
