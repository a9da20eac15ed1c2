"""`keras_tse.zoo.generate`: greedy generation is the model's own argmax step by step, the Transformer-XL's
memory carries the text as one pass over it would, sampling is seeded, and bad arguments are one line."""

import keras
import numpy as np
import pytest

from keras_tse import zoo
from keras_tse.layouts import get_layout, layout_names
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
@pytest.mark.parametrize("norm", [n for n in layout_names(measurement=True) if get_layout(n).causal])
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
    """`jit_compile=False` (every step eager, kept to measure against) reads as the compiled reader does, from the
    cache and past the window, in float64, with the model's dropout off."""
    import importlib

    generation = importlib.import_module("keras_tse.zoo.generate")
    keras.utils.set_random_seed(3)
    model = zoo.gpt(norm="deescalate", **{**GPT, "dropout": 0.5})
    ids = np.random.default_rng(2).integers(0, GPT["vocab_size"], (2, 11)).astype("int32")
    compiled, eager = generation.gpt_reader(model), generation.gpt_reader(model, jit_compile=False)
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

    def watched(model, jit_compile="auto"):
        reread = window_reader(model, jit_compile)
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
    reader = generation._transformer_xl_reader(model, 3)
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
    words, the one `zoo.generate` gives (to `<eos>`, hidden); the sampler flags reach it; a preset folder without
    the asset is one line."""
    import importlib

    from keras_tse.cli import main as cli
    from keras_tse.cli.commands import generate as generate_command
    from keras_tse.data import WordTokenizer
    from keras_tse.data.text import Vocabulary

    words = tmp_path / "vocabulary.txt"
    words.write_text("\n".join(["<eos>", "<unk>", *(f"w{i}" for i in range(GPT["vocab_size"] - 2))]) + "\n")
    model = _gpt()
    folder = zoo.save_preset(model, tmp_path / "lm", assets={"tokenizer/vocabulary.txt": str(words)})
    assert (tmp_path / "lm" / "assets" / "tokenizer" / "vocabulary.txt").read_text() == words.read_text()
    capsys.readouterr()
    assert cli.main(["generate", folder, "--prompt", "w1 w2", "--max-new-tokens", "4", "--temperature", "0"]) == 0
    vocab = Vocabulary.load(str(words))
    tokenizer = WordTokenizer(vocab)
    expected = zoo.generate(model, "w1 w2", 4, temperature=0, tokenizer=tokenizer)  # to <eos>, which is not shown
    assert capsys.readouterr().out.strip().splitlines()[-1] == expected and expected.startswith("w1 w2")
    # the samplers by name, beam search's width, no stop at <eos>; a bad combination is one line before any text
    flags = ["--prompt", "w1 w2", "--max-new-tokens", "5", "--sampler", "beam", "--num-beams", "2", "--no-stop"]
    assert cli.main(["generate", folder, *flags, "--show-special"]) == 0
    beams = zoo.generate(model, "w1 w2", 5, sampler="beam", num_beams=2, stop_token_ids=None, tokenizer=tokenizer,
                         skip_special_tokens=False)  # fmt: skip
    assert capsys.readouterr().out.strip().splitlines()[-1] == beams and len(beams.split()) == 7
    assert cli.main(["generate", folder, "--prompt", "w1", "--sampler", "top_k", "--num-beams", "3"]) == 2
    said = capsys.readouterr()
    assert said.out == "" and "`num_beams` is beam search's width; sampler='top_k' keeps no beams" in said.err
    assert generate_command.SAMPLERS == importlib.import_module("keras_tse.zoo.sampling").NAMES
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

    sample = importlib.import_module("keras_tse.zoo.sampling").sample
    log_probs = np.log(np.tile([0.5, 0.25, 0.15, 0.1], (40_000, 1)))
    picks = sample(log_probs, temperature, top_k, top_p, np.random.default_rng(0))
    np.testing.assert_allclose(np.bincount(picks, minlength=4) / len(picks), expected, atol=0.01)


def test_a_near_zero_temperature_draws_each_rows_most_likely_token_whatever_the_rows_scale():
    """Rows of different confidence at T = 0.0005: the logits reach -1,400 in one row and -61 in the other; each
    row's softmax is taken from its own maximum, so neither row underflows to nothing."""
    import importlib

    sample = importlib.import_module("keras_tse.zoo.sampling").sample
    log_probs = np.log([[0.1, 0.5, 0.25, 0.15], [0.01, 0.01, 0.01, 0.97]])
    assert sample(log_probs, 0.0005, None, None, np.random.default_rng(0)).tolist() == [1, 3]


def test_a_text_prompt_is_read_by_the_models_tokenizer_and_its_unknown_words_are_named(tmp_path):
    """`generate(lm, "The Company Said")`: gpt4_ptb's words are Penn Treebank's, lower case, so the prompt is
    lower-cased and read as the three known words (none `<unk>`), continued as `generate` continues their ids;
    a word the vocabulary lacks is read as `<unk>` and named in a warning; the tokenizer saves and loads."""
    from keras_tse.data import WordTokenizer, load_tokenizer

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
    again = load_tokenizer(str(tmp_path / "words"))
    assert again.lowercase and again.vocabulary.symbols == tokenizer.vocabulary.symbols
    cased = WordTokenizer(tokenizer.vocabulary)  # as written: "The" is no Penn Treebank word
    assert cased.unknown_words("The company") == ["The"]
    with pytest.raises(ValueError) as error:
        zoo.generate(_gpt(), "w1", 2)
    assert str(error.value) == (
        "A text prompt needs the model's words: load it with zoo.from_preset, or pass tokenizer="
        "keras_tse.data.load_tokenizer(run folder), or give token ids. Received: a model without one"
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
    drawn = zoo.generate(lm, tokenizer.tokenize("the company"), 3, temperature=0)[2:]
    assert [int(new[0]) for new in seen] == drawn.tolist()
    # a batch of texts of equal length: each continued as alone, to its own <eos> (shown once, where asked)
    texts = ["the company", "stocks fell"]
    both = zoo.generate(lm, texts, 12, temperature=0)
    assert both == [zoo.generate(lm, text, 12, temperature=0) for text in texts]
    shown = zoo.generate(lm, texts, 12, temperature=0, skip_special_tokens=False)
    assert [text.replace(" <eos>", "") for text in shown] == both and [t.count("<eos>") for t in shown] == [1, 1]
    assert zoo.generate(lm, texts, 12, temperature=0, strip_prompt=True) == [b.split(" ", 2)[2] for b in both]


def _randomised_gpt():
    from tests.helpers import randomise_weights

    model = _gpt()
    randomise_weights(model, seed=4, scale=0.3)  # peaked enough that greedy rows differ and stop tokens recur
    return model


RAGGED = [[5], [1, 2, 3, 4], [7, 6, 5, 4, 3, 2, 1, 0, 9]]  # lengths 1, 4 and 9: the last past the window of 8


@pytest.mark.parametrize("family", ["gpt", "transformer_xl"])
def test_a_batch_of_prompts_of_different_lengths_gives_each_row_what_it_gives_alone(family):
    """Prompts of 1, 4 and 9 ids in one call, greedy: each row the ids it gets alone (its own positions, cache or
    memory, the GPT's window sliding for the long one), returned as a list of rows; `strip_prompt` keeps the
    new ids alone; each step's streamed ids are -1 for the rows still reading their prompt."""
    keras.utils.set_random_seed(4)
    model = _randomised_gpt() if family == "gpt" else tiny_transformer_xl(norm="deescalate", batch_size=1)
    seen = []
    together = zoo.generate(model, RAGGED, 5, temperature=0, on_token=lambda new: seen.append(np.array(new)))
    assert isinstance(together, list) and [len(row) for row in together] == [6, 9, 14]
    for prompt, row in zip(RAGGED, together):
        assert row.dtype == np.int32 and row.tolist() == zoo.generate(model, prompt, 5, temperature=0).tolist()
    new = zoo.generate(model, RAGGED, 5, temperature=0, strip_prompt=True)
    assert [row.tolist() for row in new] == [row[len(prompt) :].tolist() for prompt, row in zip(RAGGED, together)]
    streamed = np.stack(seen, axis=1)  # [3, steps]: positions 1 to 13 for every row
    assert streamed.shape == (3, 13) and streamed[1, :3].tolist() == [-1] * 3 and streamed[0, 5:].tolist() == [-1] * 8
    assert [row[row >= 0].tolist() for row in streamed] == [row.tolist() for row in new]


def test_generation_stops_at_a_stop_token_and_a_stopped_row_repeats_it():
    """A later id of the greedy continuation as the stop token: one prompt ends there (kept as its last id), not
    drawing on; in a batch, the other row draws on, the stopped one repeats its stop token, and the array ends when
    every row has stopped; a ragged batch trims each row after its stop; `None` stops nowhere."""
    model = _randomised_gpt()
    greedy = zoo.generate(model, [1, 2, 3], 6, temperature=0).tolist()
    at = next(k for k in range(4, 9) if greedy[k] not in greedy[3:k])  # not the first new id, first drawn there
    stop = greedy[at]
    assert zoo.generate(model, [1, 2, 3], 6, temperature=0, stop_token_ids=[stop]).tolist() == greedy[: at + 1]
    assert zoo.generate(model, [1, 2, 3], 6, temperature=0, stop_token_ids=None).tolist() == greedy
    other = zoo.generate(model, [3, 2, 1], 6, temperature=0).tolist()
    batch = zoo.generate(model, [[1, 2, 3], [3, 2, 1]], 6, temperature=0, stop_token_ids=(stop, 39))
    ends = [next((i for i in range(3, 9) if row[i] in (stop, 39)), 8) for row in (greedy, other)]
    assert batch.shape == (2, max(ends) + 1)
    for row, alone, end in zip(batch.tolist(), (greedy, other), ends):
        assert row[: end + 1] == alone[: end + 1] and set(row[end:]) == {alone[end]}
    ragged = zoo.generate(model, [[1, 2, 3], [4]], 6, temperature=0, stop_token_ids=[stop])
    assert ragged[0].tolist() == greedy[: at + 1]


@pytest.mark.parametrize("family", ["gpt", "transformer_xl"])
def test_beam_search_of_width_1_is_greedy_and_of_the_whole_vocabulary_finds_the_most_likely_pair(family, monkeypatch):
    """Width 1 keeps greedy's ids (for ragged prompts too); for two new ids a width of the vocabulary's size keeps
    every first id, so its best beam is the most likely pair of all vocab^2, found here by brute force (each
    first id's continuation read on its own); over more ids, the beams' caches (or memories) follow the beams kept."""
    keras.utils.set_random_seed(4)
    model = _randomised_gpt() if family == "gpt" else tiny_transformer_xl(norm="deescalate", batch_size=1)
    for prompt in ([1, 2, 3], RAGGED):
        beams = zoo.generate(model, prompt, 5, sampler="beam", num_beams=1, stop_token_ids=None)
        greedy = zoo.generate(model, prompt, 5, temperature=0, stop_token_ids=None)
        assert [np.asarray(r).tolist() for r in beams] == [np.asarray(r).tolist() for r in greedy]
    vocab = 40
    prompt = np.array([2, 7, 1], "int32")
    import importlib

    generation = importlib.import_module("keras_tse.zoo.generate")
    reader = generation.gpt_reader if family == "gpt" else generation._transformer_xl_reader
    first = reader(model) if family == "gpt" else reader(model, 1)
    firsts = first(prompt[None])[0]
    pairs = np.concatenate([np.tile(prompt, (vocab, 1)), np.arange(vocab, dtype="int32")[:, None]], axis=1)
    second = (reader(model) if family == "gpt" else reader(model, vocab))(pairs)
    totals = firsts[:, None] + second  # [first id, second id]
    best = np.unravel_index(np.argmax(totals), totals.shape)
    found = zoo.generate(model, prompt, 2, sampler="beam", num_beams=vocab)
    assert found.tolist() == [*prompt, *map(int, best)]
    assert found.tolist() != zoo.generate(model, prompt, 2, temperature=0).tolist() or np.argmax(firsts) == best[0]
    # past two ids the beams' histories differ: each beam's cache (memory) must be the one of the beam it continues,
    # as a reader holding nothing (every call reading each beam's ids afresh) finds
    kept = [np.asarray(r).tolist() for r in zoo.generate(model, RAGGED, 6, sampler="beam", num_beams=3)]
    monkeypatch.setattr(generation, "gpt_reader", lambda model, jit_compile: generation.window_reader(model))
    afresh = generation.Reader(lambda ids: reader(model, ids.shape[0])(ids)) if family != "gpt" else None
    monkeypatch.setattr(generation, "_transformer_xl_reader", lambda model, batch: afresh)
    assert [np.asarray(r).tolist() for r in zoo.generate(model, RAGGED, 6, sampler="beam", num_beams=3)] == kept


def test_the_samplers_by_name_are_keras_hubs_and_its_objects_draw_as_it_does():
    """ "greedy" is temperature 0, "top_k" with k 1 and "top_p" with a tiny nucleus are greedy, "random" draws as
    the settings alone do; a keras_hub GreedySampler and TopKSampler(k=1) give greedy's ids, a BeamSampler beam
    search of its width; its ContrastiveSampler is one line."""
    keras_hub = pytest.importorskip("keras_hub")
    model = _randomised_gpt()
    greedy = zoo.generate(model, [1, 2], 6, temperature=0).tolist()
    assert zoo.generate(model, [1, 2], 6, sampler="greedy").tolist() == greedy
    assert zoo.generate(model, [1, 2], 6, sampler="top_k", top_k=1, seed=2).tolist() == greedy
    assert zoo.generate(model, [1, 2], 6, sampler="top_p", top_p=1e-6, seed=2).tolist() == greedy
    drawn = zoo.generate(model, [1, 2], 6, sampler="random", temperature=2.0, seed=2).tolist()
    assert drawn == zoo.generate(model, [1, 2], 6, temperature=2.0, seed=2).tolist() != greedy
    assert zoo.generate(model, [1, 2], 6, sampler=keras_hub.samplers.GreedySampler()).tolist() == greedy
    assert zoo.generate(model, [1, 2], 6, sampler=keras_hub.samplers.TopKSampler(k=1, seed=1)).tolist() == greedy
    beams = zoo.generate(model, [1, 2], 6, sampler="beam", num_beams=3).tolist()
    assert zoo.generate(model, [1, 2], 6, sampler=keras_hub.samplers.BeamSampler(num_beams=3)).tolist() == beams
    with pytest.raises(ValueError, match=r"^`sampler`: keras_hub.samplers.ContrastiveSampler is not supported: it "):
        zoo.generate(model, [1, 2], 6, sampler=keras_hub.samplers.ContrastiveSampler())


@pytest.mark.parametrize("jit_compile", [True, False])
def test_the_compiled_decode_step_runs_its_python_only_to_compile_on_every_backend(jit_compile, monkeypatch):
    """A count, not a clock: the decode step's Python `call` runs while the backend traces it (once or twice:
    Keras's symbolic build, then JAX's jit or TensorFlow's function) and never again however many tokens follow;
    eager (`jit_compile=False`), once an id read. PyTorch's dynamo replays a traced call's Python side effects, so
    there the count skips the calls made while it compiles, and none is left outside it (`torch.compile`, its graph
    run by dynamo's eager backend: the same capture without Inductor's C++ build, 28 s against 37-47 s for this
    one-block step on the 2-core CI machine)."""
    import importlib

    generation = importlib.import_module("keras_tse.zoo.generate")
    if keras.backend.backend() == "torch":
        import torch

        compile_ = torch.compile
        monkeypatch.setattr(torch, "compile", lambda function, **kw: compile_(function, **{**kw, "backend": "eager"}))
        compiling = torch.compiler.is_compiling
    else:
        compiling = lambda: False  # noqa: E731
    calls, call = [], generation.DecodeStep.call

    def counted(self, inputs):
        if not compiling():
            calls.append(1)
        return call(self, inputs)

    monkeypatch.setattr(generation.DecodeStep, "call", counted)
    keras.utils.set_random_seed(3)
    model = zoo.gpt(norm="deescalate", **{**GPT, "depth": 1})
    ids = zoo.generate(model, [1, 2], 5, temperature=0, jit_compile=jit_compile)
    assert ids.tolist() == _argmax_steps(model, [1, 2], 5)
    if jit_compile:  # PyTorch: none, every run of it inside dynamo's trace or its compiled graph
        assert len(calls) in ((0,) if keras.backend.backend() == "torch" else (1, 2)), calls
    else:
        assert len(calls) == 2 + 5 - 1  # every id read: the prompt's 2, then each new one but the last
