"""`keras_tse.zoo.generate`: greedy generation is the model's own argmax step by step, the Transformer-XL's
memory carries the text as one pass over it would, sampling is seeded, and bad arguments are one line."""

import keras
import numpy as np
import pytest

from keras_tse import zoo
from keras_tse.layouts import layout_names
from tests.helpers import tiny_transformer_xl

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

# heads narrower than the width (2 x 4 < 16): every cache sized from the kernel it holds, not from the width
GPT = dict(depth=2, vocab_size=40, segment_len=8, hidden_dim=16, num_heads=2, head_dim=4, ffn_dim=32, cutoffs=())


def _gpt(norm="deescalate"):
    keras.utils.set_random_seed(3)
    return zoo.gpt(norm=norm, **GPT)


def _argmax_steps(model, prompt, count, window=8):
    """Greedy by hand: the whole model over the last `window` ids (right-padded), its last real position."""
    ids = list(prompt)
    for _ in range(count):
        context = ids[-window:]
        padded = np.array([context + [0] * (window - len(context))], "int32")
        ids.append(int(np.argmax(keras.ops.convert_to_numpy(model(padded))[0, len(context) - 1])))
    return ids


@pytest.mark.usefixtures("float32_matmuls")  # cache and whole model agree to 2e-5 only in full float32, not TF32
@pytest.mark.parametrize("norm", layout_names(measurement=True))
def test_the_gpts_key_value_cache_gives_the_whole_models_log_probabilities_one_position_a_token(norm):
    """Read the prompt once, then one id a call: at every position the log-probabilities the whole model
    gives, for every layout (de-escalation's causal mean over the cached rows; a learned tau; the leaky
    mean, which reads later positions, rereads the window instead); each block's cache grows by one
    position a token."""
    import importlib

    from tests.helpers import randomise_weights

    generation = importlib.import_module("keras_tse.zoo.generate")  # the module, not `zoo.generate`

    model = _gpt(norm)
    randomise_weights(model, seed=4, scale=0.3)
    ids = np.random.default_rng(0).integers(0, GPT["vocab_size"], (2, GPT["segment_len"])).astype("int32")
    whole = keras.ops.convert_to_numpy(model(ids))
    reader = generation.gpt_reader(model)
    leaky = norm == "deescalate_leaky_global"
    for t in range(3, GPT["segment_len"] + 1):
        if leaky:  # its mean reads later positions: what it gives from the prompt alone, zeros after it
            padded = np.pad(ids[:, :t], ((0, 0), (0, GPT["segment_len"] - t)))
            expected = keras.ops.convert_to_numpy(model(padded))[:, t - 1]
        else:
            expected = whole[:, t - 1]
        np.testing.assert_allclose(reader(ids[:, :t]), expected, atol=2e-5, err_msg=f"{norm} at {t}")
    assert all(block.decodes for block in generation._blocks(model)) is (norm != "deescalate_leaky_global")
    assert generation.decode_step(model).name == f"{model.name}_decode_step"


@pytest.mark.usefixtures("float32_matmuls")
def test_the_eager_readers_give_the_compiled_ones_log_probabilities_without_dropout():
    """`compiled=False` (every step eager, kept to measure against) reads as the compiled reader does, from the
    cache and past the window, in float64, with the model's dropout off."""
    import importlib

    generation = importlib.import_module("keras_tse.zoo.generate")
    keras.utils.set_random_seed(3)
    model = zoo.gpt(norm="deescalate", **{**GPT, "dropout": 0.5})
    ids = np.random.default_rng(2).integers(0, GPT["vocab_size"], (2, 11)).astype("int32")
    compiled, eager = generation.gpt_reader(model), generation.gpt_reader(model, compiled=False)
    for t in (3, 8, 11):  # the cache, its last position, the window sliding
        got = eager(ids[:, :t])
        expected = compiled(ids[:, :t])
        assert got.dtype == expected.dtype == np.float64
        np.testing.assert_allclose(got, expected, atol=2e-5, err_msg=f"after {t} ids")


def test_the_gpt_reads_each_id_once_from_its_cache_while_the_ids_fit_its_window(monkeypatch):
    """A prompt of 3 and 5 new ids: the decode step runs once an id read (3, then 1 a token: 7), the window is
    never reread while the ids fit it (8 here), and is after."""
    import importlib

    generation = importlib.import_module("keras_tse.zoo.generate")
    runs, rereads = [], []
    runner = generation._runner

    def counted(model, compiled):
        run = runner(model, compiled)
        return lambda inputs: runs.append(model.name) or run(inputs)

    window_reader = generation.window_reader

    def watched(model, compiled=True):
        reread = window_reader(model, compiled)
        return lambda ids: rereads.append(ids.shape[1]) or reread(ids)

    monkeypatch.setattr(generation, "_runner", counted)
    monkeypatch.setattr(generation, "window_reader", watched)
    model = _gpt()
    zoo.generate(model, [[1, 2, 3], [4, 5, 6]], 5, temperature=0)
    assert runs == [f"{model.name}_decode_step"] * 7 and rereads == []
    runs.clear()
    zoo.generate(model, [1, 2, 3, 4, 5, 6, 7], 3, temperature=0)  # reads 7, then 8; then 9 ids: the window
    assert len(runs) == 8 + 1 and rereads == [9]  # the window reader's own pass counted with the steps


@pytest.mark.parametrize("norm", ["deescalate", "post"])
def test_greedy_gpt_generation_is_the_models_argmax_step_by_step_and_slides_past_its_window(norm):
    model = _gpt(norm)
    prompt = [5, 7, 1]
    got = zoo.generate(model, prompt, 9, temperature=0)  # 12 ids: the window of 8 slides
    assert got.shape == (12,) and got.dtype == np.int32
    assert got.tolist() == _argmax_steps(model, prompt, 9)
    batch = zoo.generate(model, np.array([prompt, [2, 2, 2]]), 4, temperature=0)
    assert batch.shape == (2, 7) and batch[0].tolist() == got[:7].tolist()


def test_the_transformer_xls_memory_carries_the_text_as_one_pass_over_it_would():
    keras.utils.set_random_seed(4)
    model = tiny_transformer_xl(norm="deescalate", batch_size=1)
    config = model.get_config()
    got = zoo.generate(model, [3, 9, 4, 1], 6, temperature=0)
    # the same weights reading the 10 ids in one segment, no memory: its argmax at each position
    whole = type(model).from_config({**config, "segment_len": 10, "mem_len": 0})
    whole(np.zeros((1, 10), "int32"))
    trained = {w.path.split("/", 1)[-1]: w for w in model.trainable_weights}
    for weight in whole.trainable_weights:
        weight.assign(trained[weight.path.split("/", 1)[-1]])
    predicted = np.argmax(keras.ops.convert_to_numpy(whole(got[None, :10]))[0], axis=-1)
    assert got[4:].tolist() == predicted[3:9].tolist()


@pytest.mark.usefixtures("float32_matmuls")
def test_the_transformer_xls_reader_gives_one_passs_log_probabilities_at_every_step():
    """The one-token reader, asked after 4, 5, 8 and 12 ids (several read between calls), gives at each step
    the log-probabilities of one pass over the same ids, to the last position its memory of
    `segment_len + mem_len` reaches: the memory holds every id once, in order, read without dropout, for a
    batch other than the model's."""
    import importlib

    from tests.helpers import randomise_weights

    generation = importlib.import_module("keras_tse.zoo.generate")
    keras.utils.set_random_seed(4)
    model = tiny_transformer_xl(norm="deescalate", batch_size=2, dropout=0.3)
    randomise_weights(model, seed=5, scale=0.3)
    config = model.get_config()
    total = config["segment_len"] + config["mem_len"]
    ids = np.random.default_rng(1).integers(0, config["vocab_size"], (3, total)).astype("int32")
    whole = type(model).from_config({**config, "segment_len": total, "mem_len": 0, "batch_size": 3})
    whole(ids)
    trained = {w.path.split("/", 1)[-1]: w for w in model.trainable_weights}
    for weight in whole.trainable_weights:
        weight.assign(trained[weight.path.split("/", 1)[-1]])
    expected = keras.ops.convert_to_numpy(whole(ids, training=False))
    reader = generation._transformer_xl_reader(model, ids[:, :4])
    for t in (4, 5, 8, total):
        got = reader(ids[:, :t])
        assert got.dtype == np.float64 and got.shape == (3, config["vocab_size"])
        np.testing.assert_allclose(got, expected[:, t - 1], atol=1e-4, err_msg=f"after {t} ids")


def test_sampling_is_seeded_and_top_k_1_is_greedy():
    model = _gpt()
    first = zoo.generate(model, [1, 2], 8, temperature=1.5, top_p=0.9, seed=11)
    assert first.tolist() == zoo.generate(model, [1, 2], 8, temperature=1.5, top_p=0.9, seed=11).tolist()
    assert (
        zoo.generate(model, [1, 2], 8, top_k=1, seed=5).tolist()
        == zoo.generate(model, [1, 2], 8, temperature=0).tolist()
    )
    draws = {tuple(zoo.generate(model, [1, 2], 6, temperature=2.0, seed=s).tolist()) for s in range(4)}
    assert len(draws) > 1  # a temperature above 0 samples


def test_the_default_temperature_is_1_and_a_tiny_nucleus_is_greedy():
    model = _gpt()
    drawn = zoo.generate(model, [1, 2], 8, seed=11)
    assert drawn.tolist() == zoo.generate(model, [1, 2], 8, temperature=1.0, seed=11).tolist()
    assert drawn.tolist() != zoo.generate(model, [1, 2], 8, temperature=2.0, seed=11).tolist()
    greedy = zoo.generate(model, [1, 2], 8, temperature=0).tolist()
    assert zoo.generate(model, [1, 2], 8, top_p=1e-6, seed=11).tolist() == greedy
    assert zoo.generate(model, [1, 2], 8, top_p=1.0, seed=11).tolist() == drawn.tolist()  # the whole nucleus
    # id 0 and a one-id prompt are prompts like any other
    assert zoo.generate(model, [0], 3, temperature=0).tolist() == _argmax_steps(model, [0], 3)


def test_each_token_is_handed_on_as_it_is_drawn():
    """`on_token` sees each step's ids in order, each before the next is drawn: together the generated ids."""
    model, seen = _gpt(), []
    ids = zoo.generate(model, [[1, 2], [3, 4]], 5, temperature=1.0, seed=3, on_token=lambda new: seen.append(new))
    assert len(seen) == 5 and np.array_equal(np.stack(seen, axis=1), ids[:, 2:])
    assert ids.tolist() == zoo.generate(model, [[1, 2], [3, 4]], 5, temperature=1.0, seed=3).tolist()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(prompt_ids=[1, 40]), r"`prompt_ids` must lie in \[0, 40\). Received: ids from 1 to 40"),
        (dict(prompt_ids=[]), r"`prompt_ids` must be ints, \[batch, T\] or \[T\] with T >= 1"),
        (dict(temperature=-1), "`temperature` must be a number >= 0"),
        (dict(top_p=1.5), r"`top_p` must be in \(0, 1\] or None. Received: top_p=1.5"),
        (dict(top_p=0.0), r"`top_p` must be in \(0, 1\] or None. Received: top_p=0.0"),
        (dict(prompt_ids=[-1, 2]), r"`prompt_ids` must lie in \[0, 40\). Received: ids from -1 to 2"),
        (
            dict(prompt_ids=[1.0, 2.0]),
            r"must be ints, \[batch, T\] or \[T\] with T >= 1. Received: shape \(1, 2\), dtype float64",
        ),
        (dict(prompt_ids=np.zeros((1, 2, 2), int)), r"with T >= 1. Received: shape \(1, 2, 2\)"),
        (dict(prompt_ids=np.zeros((2, 0), int)), r"with T >= 1. Received: shape \(2, 0\)"),
        (
            dict(temperature=float("inf")),
            "`temperature` must be a number >= 0 \\(0: greedy\\). Received: temperature=inf",
        ),
        (dict(temperature="1"), "Received: temperature='1'"),
        (dict(top_k=0), r"`top_k` must be a positive integer. Received: top_k=0"),
        (dict(max_new_tokens=-1), r"`max_new_tokens` must be an integer >= 0. Received: max_new_tokens=-1"),
    ],
)
def test_a_bad_argument_is_one_line(kwargs, message):
    arguments = dict(prompt_ids=[1, 2], max_new_tokens=3, temperature=1.0, top_p=None)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        zoo.generate(_gpt(), arguments.pop("prompt_ids"), arguments.pop("max_new_tokens"), **arguments)


@pytest.mark.one_backend  # the command's path; generation itself is checked on every backend above
def test_keras_tse_generate_reads_a_preset_folder_with_its_vocabulary_asset(tmp_path, capsys):
    """A language model saved as a preset with its words (`save_preset(assets=...)`, KerasHub's
    assets/tokenizer/vocabulary.txt): `keras-tse generate FOLDER` prints the greedy continuation in
    words, the one `zoo.generate` gives; a preset folder without the asset is one line."""
    from keras_tse.cli import main as cli
    from keras_tse.data.text import Vocabulary

    words = tmp_path / "vocabulary.txt"
    words.write_text("\n".join(["<eos>", "<unk>", *(f"w{i}" for i in range(GPT["vocab_size"] - 2))]) + "\n")
    model = _gpt()
    folder = zoo.save_preset(model, tmp_path / "lm", assets={"tokenizer/vocabulary.txt": str(words)})
    assert (tmp_path / "lm" / "assets" / "tokenizer" / "vocabulary.txt").read_text() == words.read_text()
    capsys.readouterr()
    assert cli.main(["generate", folder, "--prompt", "w1 w2", "--max-new-tokens", "4", "--temperature", "0"]) == 0
    vocab = Vocabulary.load(str(words))
    expected = vocab.decode(zoo.generate(model, vocab.encode(["w1 w2"])[:-1], 4, temperature=0))
    assert capsys.readouterr().out.strip().splitlines()[-1] == expected and len(expected.split()) == 6
    bare = zoo.save_preset(model, tmp_path / "bare")
    assert cli.main(["generate", bare, "--prompt", "w1"]) == 2
    assert "expected a language model's preset (it has no assets/tokenizer/vocabulary.txt)" in capsys.readouterr().err
    model.save(tmp_path / "bare.keras")  # Keras's own file: no words inside
    assert cli.main(["generate", str(tmp_path / "bare.keras"), "--prompt", "w1"]) == 2
    assert "expected a language model's .keras file with its tokenizer inside" in capsys.readouterr().err


def test_generation_from_an_image_model_is_one_line_naming_it():
    vit = zoo.vit(depth=1, image_size=8, patch_size=4, channels=1, hidden_dim=8, ffn_dim=8, num_heads=2, name="tiny")
    with pytest.raises(
        ValueError,
        match=r"^`model` must be a zoo language model \(token ids \[batch, T\] in, .* Received: tiny with inputs "
        r"\[\(None, 8, 8, 1\)\]$",
    ):
        zoo.generate(vit, [1, 2], 3)


def test_a_model_of_other_inputs_is_no_language_model():
    """Token ids [batch, T] in, one input: two inputs, float vectors or a 3-D int input are refused, as is
    something that is no model at all (named by its type)."""
    floats = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)], name="floats")
    grid = keras.Sequential(
        [keras.Input((5, 2), dtype="int32"), keras.layers.Flatten(), keras.layers.Dense(3)], name="grid"
    )
    a, b = keras.Input((5,), dtype="int32"), keras.Input((5,), dtype="int32")
    pair = keras.Model([a, b], keras.layers.Add()([a, b]), name="pair")
    for model, received in [
        (floats, r"floats with inputs \[\(None, 5\)\]"),
        (grid, r"grid with inputs \[\(None, 5, 2\)\]"),
        (pair, r"pair with inputs \[\(None, 5\), \(None, 5\)\]"),
        (object(), r"object with inputs \[\]"),
    ]:
        with pytest.raises(ValueError, match=f"must be a zoo language model .* Received: {received}$"):
            zoo.generate(model, [1, 2], 3)


@pytest.mark.parametrize(
    "temperature, top_k, top_p, expected",
    [
        (1.0, None, None, [0.5, 0.25, 0.15, 0.1]),
        (2.0, None, None, np.sqrt([0.5, 0.25, 0.15, 0.1]) / np.sqrt([0.5, 0.25, 0.15, 0.1]).sum()),  # p^(1/T)
        (0.5, None, None, np.square([0.5, 0.25, 0.15, 0.1]) / np.square([0.5, 0.25, 0.15, 0.1]).sum()),
        (1.0, 3, None, [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0.0]),
        (1.0, None, 0.75, [2 / 3, 1 / 3, 0.0, 0.0]),  # the fewest tokens whose probability reaches 0.75
        (1.0, None, 0.76, [0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0.0]),
        (1.0, 2, 0.9, [2 / 3, 1 / 3, 0.0, 0.0]),  # both: the top 2 inside a nucleus of 3
        (0.0005, None, None, [1.0, 0.0, 0.0, 0.0]),  # near 0: the most likely, the softmax still finite
    ],
)
def test_sampling_draws_from_the_tempered_restricted_distribution(temperature, top_k, top_p, expected):
    """softmax(log p / T), restricted to the top k and to the nucleus: 40,000 draws of one seeded sampler,
    each frequency within 0.01 of its probability (about four standard deviations)."""
    import importlib

    sample = importlib.import_module("keras_tse.zoo.generate")._sample
    log_probs = np.log(np.tile([0.5, 0.25, 0.15, 0.1], (40_000, 1)))
    picks = sample(log_probs, temperature, top_k, top_p, np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(picks, minlength=4) / len(picks), expected, atol=0.01)


def test_a_near_zero_temperature_draws_each_rows_most_likely_token_whatever_the_rows_scale():
    """Rows of different confidence at T = 0.0005: the logits reach -1,400 in one row and -61 in the other; each
    row's softmax is taken from its own maximum, so neither row underflows to nothing."""
    import importlib

    sample = importlib.import_module("keras_tse.zoo.generate")._sample
    log_probs = np.log([[0.1, 0.5, 0.25, 0.15], [0.01, 0.01, 0.01, 0.97]])
    assert sample(log_probs, 0.0005, None, None, np.random.default_rng(0)).tolist() == [1, 3]


def test_a_text_prompt_is_read_by_the_models_tokenizer_and_its_unknown_words_are_named(tmp_path):
    """`generate(lm, "The Company Said")`: gpt4_ptb's words are Penn Treebank's, lower case, so the prompt is
    lower-cased and read as the three known words (none `<unk>`), continued as `generate` continues their ids;
    a word the vocabulary lacks is read as `<unk>` and named in a warning; the tokenizer saves and loads."""
    from keras_tse.data import WordTokenizer

    lm = zoo.from_preset("gpt4_ptb")
    tokenizer = lm.tokenizer
    assert tokenizer.lowercase and tokenizer.unknown_words("The Company Said") == []
    ids = tokenizer.tokenize("The Company Said")
    assert tokenizer.detokenize(ids) == "the company said"
    text = zoo.generate(lm, "The Company Said", 4, temperature=0)
    assert text == tokenizer.detokenize(zoo.generate(lm, ids, 4, temperature=0)) and len(text.split()) == 7
    with pytest.warns(UserWarning, match=r"1 word\(s\) not in the vocabulary, read as <unk>: 'zyzzyva'"):
        unknown = tokenizer.tokenize("the zyzzyva said")
    assert unknown[1] == tokenizer.vocabulary.index["<unk>"]
    tokenizer.save(tmp_path / "words")
    again = WordTokenizer.load(str(tmp_path / "words"))
    assert again.lowercase and again.vocabulary.symbols == tokenizer.vocabulary.symbols
    cased = WordTokenizer(tokenizer.vocabulary)  # as written: "The" is no Penn Treebank word
    assert cased.unknown_words("The company") == ["The"]
    with pytest.raises(ValueError) as error:
        zoo.generate(_gpt(), "w1", 2)
    assert str(error.value) == (
        "A text prompt needs the model's words: load it with zoo.from_preset, or pass tokenizer="
        "keras_tse.data.WordTokenizer.load(run folder), or give token ids. Received: a model without one"
    )
    with pytest.raises(ValueError, match="A text prompt needs at least one word. Received: prompt='  '"):
        zoo.generate(lm, "  ", 2)
    # the sampling options reach the ids' generation: the same seed, the same words; the nucleus and top-k too
    options = dict(temperature=1.5, seed=7)
    assert zoo.generate(lm, "the company", 4, **options) == tokenizer.detokenize(
        zoo.generate(lm, tokenizer.tokenize("the company"), 4, **options)
    )
    greedy = zoo.generate(lm, "the company", 4, temperature=0)
    assert zoo.generate(lm, "the company", 4, top_k=1, seed=3) == greedy
    assert zoo.generate(lm, "the company", 4, top_p=1e-6, seed=3) == greedy
    seen = []
    zoo.generate(lm, "the company", 3, temperature=0, on_token=seen.append)
    assert [int(new[0]) for new in seen] == list(tokenizer.tokenize(greedy)[2:5])
