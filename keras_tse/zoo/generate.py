"""Text generation from the zoo's language models: a prompt's ids continued one token at a time.

The two families generate as they read (Sec. 3.4's settings unchanged):

- the GPT decodes with a key/value cache (`TransformerBlock.decode`): the prompt is read once, then
  each new token runs every block on its one position against the keys and values kept for the
  earlier ones, and a causal de-escalation takes its running mean over them (`DeEscalation`'s
  memory): the same log-probabilities as the whole sequence through the model, for one position's
  work a token. Past `segment_len` ids (the rows of its position table) every position's absolute
  position would shift, so the text slides: each new token reads the last `segment_len` ids, the
  whole window again. A layout whose eq. (21) mean reads later positions (the leaky global mean)
  reads the window every token too, right-padded to the fixed input length (the causal mask keeps
  the padding out of every position read).
- the Transformer-XL reads one token a step and carries its memory, as the reference code evaluates:
  a copy of the model with `segment_len=1` and a memory of the trained `segment_len + mem_len`
  positions (so it sees as far back as training did), the same weights.

Sampling, on the host from the float32 log-probabilities: `temperature=0` is greedy; otherwise the
log-probabilities divided by `temperature`, kept to the `top_k` most likely and to the smallest set
whose probability reaches `top_p` (nucleus sampling), then drawn with NumPy's generator seeded by
`seed`: the same seed, the same text, on any backend whose model gives the same probabilities.
"""

import weakref

import keras
import numpy as np

from keras_tse import _checks
from keras_tse._weights import assign_copy


def generate(
    model, prompt_ids, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, seed=None, on_token=None,
    tokenizer=None,
):  # fmt: skip
    """`prompt_ids` (`[batch, T]` or `[T]` ints) followed by `max_new_tokens` generated ids each; or a text
    prompt continued as text.

    Args:
        model: a zoo language model: `keras_tse.zoo.gpt(...)` or a `TransformerXL`, trained or not.
        prompt_ids: ints in `[0, vocab_size)`, at least one a row; or a string, read by `tokenizer` (a
            warning names its words the vocabulary lacks, read as `<unk>`).
        max_new_tokens: int >= 0.
        temperature: float >= 0; `0` takes the most likely token (greedy). Defaults to `1.0`.
        top_k: int, keep the `top_k` most likely tokens, or `None` for all.
        top_p: float in (0, 1], keep the fewest most likely tokens whose probability reaches it.
        seed: int, the sampler's seed, or `None` for a fresh one.
        on_token: a function called with each step's new ids (int32 `[batch]`) as soon as they are drawn,
            to stream them (`keras-tse generate` prints each word so), or `None`.
        tokenizer: a `keras_tse.data.WordTokenizer` for a text prompt; `None`: the model's own (a preset's,
            `from_preset` gives it one).

    Returns:
        NumPy int32 `[batch, T + max_new_tokens]` (`[T + max_new_tokens]` for a 1-D prompt); for a text
        prompt, the text: its words as the vocabulary spells them, then the new ones.
    """
    if isinstance(prompt_ids, str):
        tokenizer = tokenizer or getattr(model, "tokenizer", None)
        if tokenizer is None:
            raise ValueError(
                "A text prompt needs the model's words: load it with zoo.from_preset, or pass tokenizer="
                "keras_tse.data.WordTokenizer.load(run folder), or give token ids. Received: a model without one"
            )
        ids = tokenizer.tokenize(prompt_ids)
        if not len(ids):
            raise ValueError(f"A text prompt needs at least one word. Received: prompt={prompt_ids!r}")
        options = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, on_token=on_token)
        return tokenizer.detokenize(generate(model, ids, max_new_tokens, **options))
    _check_language_model(model)
    prompt = np.asarray(prompt_ids)
    flat = prompt.ndim == 1
    prompt = prompt[None] if flat else prompt
    vocab_size = _vocab_size(model)
    _check(prompt, vocab_size, max_new_tokens, temperature, top_k, top_p)
    next_log_probs = _transformer_xl_reader(model, prompt) if _is_transformer_xl(model) else gpt_reader(model)
    rng = np.random.default_rng(seed)
    ids = prompt.astype("int32")
    for _ in range(max_new_tokens):
        chosen = _sample(next_log_probs(ids), temperature, top_k, top_p, rng)
        ids = np.concatenate([ids, chosen[:, None]], axis=1)
        if on_token is not None:
            on_token(ids[:, -1])
    return ids[0] if flat else ids


def _check_language_model(model):
    """One line for a model that is no zoo language model (a ViT: images in, class logits out)."""
    if _is_transformer_xl(model):
        return
    inputs = getattr(model, "inputs", None) or []
    if len(inputs) != 1 or len(inputs[0].shape) != 2 or "int" not in str(inputs[0].dtype):
        shapes, name = [tuple(i.shape) for i in inputs], getattr(model, "name", type(model).__name__)
        raise ValueError(
            "`model` must be a zoo language model (token ids [batch, T] in, next-token log-probabilities out: "
            f"zoo.gpt or a TransformerXL). Received: {name} with inputs {shapes}"
        )


def _is_transformer_xl(model):
    from keras_tse.zoo.families.transformer_xl import TransformerXL

    return isinstance(model, TransformerXL)


def _vocab_size(model):
    shape = model.output_shape if not _is_transformer_xl(model) else None
    return model.get_config()["vocab_size"] if shape is None else shape[-1]


def _check(prompt, vocab_size, max_new_tokens, temperature, top_k, top_p):
    if prompt.ndim != 2 or prompt.shape[1] == 0 or not np.issubdtype(prompt.dtype, np.integer):
        raise ValueError(
            f"`prompt_ids` must be ints, [batch, T] or [T] with T >= 1. Received: shape {prompt.shape}, "
            f"dtype {prompt.dtype}"
        )
    if prompt.min() < 0 or prompt.max() >= vocab_size:
        raise ValueError(
            f"`prompt_ids` must lie in [0, {vocab_size}). Received: ids from {prompt.min()} to {prompt.max()}"
        )
    _checks.non_negative_int("max_new_tokens", max_new_tokens)
    if not (isinstance(temperature, (int, float)) and 0 <= temperature < float("inf")):
        raise ValueError(f"`temperature` must be a number >= 0 (0: greedy). Received: temperature={temperature!r}")
    _checks.positive_int("top_k", top_k, allow_none=True)
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1] or None. Received: top_p={top_p!r}")


def gpt_reader(model, compiled=True):
    """ids -> the next token's log-probabilities `[batch, vocab]`, each step compiled once (Keras's
    `predict_on_batch`: XLA on JAX and TensorFlow): from the key/value cache while the ids fit the position
    table, from the window of the last ids after (or always, for a layout whose mean reads later positions).
    `compiled=False`: every step eager (what generation did before, kept to measure against)."""
    window = model.input.shape[1]
    decodes = all(block.decodes for block in _blocks(model))
    cached = decode_step(model).reader(compiled) if decodes else None
    reread = window_reader(model, compiled)

    def next_log_probs(ids):
        if cached is not None and ids.shape[1] <= window:
            return cached(ids)
        return reread(ids)

    return next_log_probs


def window_reader(model, compiled=True):
    """ids -> the next token's log-probabilities from one pass over the last `window` ids, right-padded to the
    model's fixed length (the causal mask keeps the padding out of the last id's position); compiled
    (`predict_on_batch`) or eager."""
    window = model.input.shape[1]
    run = _runner(model, compiled)

    def next_log_probs(ids):
        context = ids[:, -window:]
        length = context.shape[1]
        padded = np.pad(context, ((0, 0), (0, window - length)))
        return np.asarray(run(padded)[:, length - 1], "float64")

    return next_log_probs


def _blocks(model):
    from keras_tse.layers.transformer_block import TransformerBlock

    return [layer for layer in model.layers if isinstance(layer, TransformerBlock)]


_STEPS = weakref.WeakKeyDictionary()  # a language model's DecodeStep, compiled at its first use, kept with it


def decode_step(model):
    """`model`'s `DecodeStep`, the same one every call (its compiled program is reused)."""
    if model not in _STEPS:
        _STEPS[model] = DecodeStep(model)
    return _STEPS[model]


class DecodeStep(keras.Model):
    """The GPT's cached decoding as one function of fixed shapes (`keras_tse.zoo.gpt`'s layers in its order,
    each block through `decode`): `[new ids, position, *caches]` -> `[log-probabilities of the next token,
    *caches]`, the caches (each block's keys, values and, where it de-escalates, the rows eq. (21)'s causal
    mean reads) `window` positions long whatever is filled, the position an input. It reads one id a call,
    the prompt's too: Keras compiles it once (for a batch size), and every token, whatever the prompt's
    length, reuses that program."""

    def __init__(self, lm, **kwargs):
        super().__init__(name=f"{lm.name}_decode_step", **kwargs)
        self.lm = lm

    def call(self, inputs):
        from keras_tse.layers.self_attention import DecodingCache

        ids, position, *state = inputs
        start, window = position[0], self.lm.input.shape[1]
        caches, state = [], list(state)
        for block in _blocks(self.lm):
            keys, values = state.pop(0), state.pop(0)
            eq21 = state.pop(0) if block.de_escalation is not None else None
            caches.append(DecodingCache(window, start, keys, values, eq21))
        x = self.lm.get_layer("position_embedding")(self.lm.get_layer("embedding")(ids), start=start)
        for block, cache in zip(_blocks(self.lm), caches):
            x = block.decode(x, cache)
        embedding = self.lm.get_layer("embedding")
        log_probs = embedding(self.lm.get_layer("final_norm")(x[:, -1:]), reverse=True)[:, 0]
        kept = [t for c in caches for t in (c.keys, c.values, c.eq21_inputs) if t is not None]
        return [log_probs, *kept]

    def empty_caches(self, batch):
        """Zeros of each cache's shape for `batch` sequences, in `call`'s order."""
        window, caches = self.lm.input.shape[1], []
        for block in _blocks(self.lm):
            attention = block.self_attention
            inner = attention.query_key_value_kernels()[1].shape[1]
            heads = (batch, window, attention.num_heads, inner // attention.num_heads)
            caches += [np.zeros(heads, block.compute_dtype)] * 2
            if block.de_escalation is not None:
                caches.append(np.zeros((batch, window, block.self_attention.query_key_value_kernels()[0].shape[0]),
                                       block.compute_dtype))  # fmt: skip
        return caches

    def reader(self, compiled=True):
        """ids -> the next token's log-probabilities, reading the ids appended since the last call one by one;
        compiled (`predict_on_batch`) or eager."""
        held, run = {"read": 0, "caches": None}, _runner(self, compiled)

        def next_log_probs(ids):
            if held["caches"] is None:
                held["caches"] = self.empty_caches(ids.shape[0])
            for start in range(held["read"], ids.shape[1]):
                position = np.full((ids.shape[0],), start, "int32")
                inputs = [ids[:, start : start + 1].astype("int32"), position, *held["caches"]]
                log_probs, *held["caches"] = run(inputs)
            held["read"] = ids.shape[1]
            return np.asarray(log_probs, "float64")

        return next_log_probs


def _runner(model, compiled):
    """inputs -> NumPy outputs of `model`: compiled once a shape (Keras's `predict_on_batch`), or eager."""
    if compiled:
        return model.predict_on_batch
    return lambda inputs: keras.tree.map_structure(keras.ops.convert_to_numpy, model(inputs, training=False))


def _transformer_xl_reader(model, prompt):
    """ids -> the next token's log-probabilities, from a one-token copy of `model` carrying its memory:
    the first call reads the prompt token by token, each later one the token appended since."""
    config = model.get_config()
    memory = config["segment_len"] + config["mem_len"]
    reader = type(model).from_config({**config, "segment_len": 1, "batch_size": prompt.shape[0], "mem_len": memory})
    reader(np.zeros((prompt.shape[0], 1), "int32"))
    trained = {w.path.split("/", 1)[-1]: w for w in model.trainable_weights}
    for weight in reader.trainable_weights:
        assign_copy(weight, trained[weight.path.split("/", 1)[-1]])
    reader.reset_memory()
    read = [0]  # how many ids the memory holds

    def next_log_probs(ids):
        for t in range(read[0], ids.shape[1] - 1):
            reader(ids[:, t : t + 1], training=False)
        read[0] = ids.shape[1]
        return keras.ops.convert_to_numpy(reader(ids[:, -1:], training=False)[:, 0]).astype("float64")

    return next_log_probs


def _sample(log_probs, temperature, top_k, top_p, rng):
    """One id per row of `[batch, vocab]` log-probabilities."""
    if temperature == 0:
        return np.argmax(log_probs, axis=-1).astype("int32")
    logits = log_probs / temperature
    order = np.argsort(-logits, axis=-1, kind="stable")
    ranked = np.take_along_axis(logits, order, axis=-1)
    keep = np.ones_like(ranked, dtype=bool)
    if top_k is not None:
        keep[:, top_k:] = False
    probs = np.exp(ranked - ranked.max(axis=-1, keepdims=True))
    probs = probs / probs.sum(axis=-1, keepdims=True)
    if top_p is not None:
        before = np.cumsum(probs, axis=-1) - probs  # the probability of the tokens ranked above each
        keep &= before < top_p
    probs = np.where(keep, probs, 0.0)
    probs = probs / probs.sum(axis=-1, keepdims=True)
    picks = [rng.choice(probs.shape[-1], p=row) for row in probs]
    return np.take_along_axis(order, np.asarray(picks)[:, None], axis=-1)[:, 0].astype("int32")
