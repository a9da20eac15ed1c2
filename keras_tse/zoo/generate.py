"""Text generation from the zoo's language models: prompts' ids continued one token at a time.

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

A batch of prompts of different lengths advances one position a step for every row: a row still inside its
prompt is given its next prompt id, the others draw theirs. Each row's ids sit at their own positions from 0,
with their own cache (or memory), so a row continues as it would alone. `keras_tse.zoo.sampling` chooses
the tokens (KerasHub's samplers by name, or beam search).
"""

import weakref

import keras
import numpy as np

from keras_tse import _checks
from keras_tse._weights import assign_copy
from keras_tse.zoo import sampling

JIT_COMPILE = ("auto", True, False)


def generate(
    model, prompt_ids, max_new_tokens, *, sampler=None, temperature=1.0, top_k=None, top_p=None, num_beams=None,
    seed=None, stop_token_ids="auto", strip_prompt=False, skip_special_tokens=True, jit_compile="auto",
    on_token=None, tokenizer=None,
):  # fmt: skip
    """Prompts continued by up to `max_new_tokens` ids each: token ids, or text continued as text.

    Args:
        model: a zoo language model: `keras_tse.zoo.gpt(...)` or a `TransformerXL`, trained or not.
        prompt_ids: ints in `[0, vocab_size)`: `[T]`, `[batch, T]`, or a list of rows of different lengths
            (each at least one id); or a string or a list of strings, read by `tokenizer` (a warning names
            the words the vocabulary lacks, read as `<unk>`).
        max_new_tokens: int >= 0.
        sampler: how each token is chosen: "greedy", "random", "top_k", "top_p" or "beam" (KerasHub's names;
            `top_k`, `top_p` and `num_beams` default to KerasHub's 5, 0.1 and 5), or a `keras_hub.samplers`
            object; `None`: from `temperature`, `top_k` and `top_p` alone (greedy at temperature 0).
        temperature: float >= 0; `0` takes the most likely token (greedy). Defaults to `1.0`.
        top_k: int, keep the `top_k` most likely tokens, or `None` for all.
        top_p: float in (0, 1], keep the fewest most likely tokens whose probability reaches it.
        num_beams: int, beam search's width (`sampler="beam"`); width 1 is greedy.
        seed: int, the sampler's seed, or `None` for a fresh one.
        stop_token_ids: ids that end a row (kept as its last id); "auto": the tokenizer's end token
            (`<eos>`) where the model or the call has a tokenizer, else none; `None` or `()`: none.
            Generation ends when every row has stopped.
        strip_prompt: bool, return only the new ids (or text). Defaults to `False`.
        skip_special_tokens: bool, text without the tokenizer's special tokens (`<eos>`). Defaults to `True`.
        jit_compile: "auto", `True` or `False`: the cached decode step compiled as Keras's `predict_on_batch`
            compiles ("auto": XLA on JAX and TensorFlow, eager on PyTorch, whose `torch.compile` took 40-55 s
            on a 2-core CPU before the first token, a one-off cost repaid after thousands of tokens there),
            compiled on every backend (`True`), or every step eager (`False`).
        on_token: a function called with each step's new ids (int32 `[batch]`, -1 for a row that draws
            none that step: still reading its prompt, or stopped) as soon as they are drawn, to stream them
            (`keras-tse generate` prints each word so), or `None`. Not with beam search, whose beams settle
            only at the end.
        tokenizer: a `keras_tse.data.WordTokenizer` for a text prompt; `None`: the model's own (a preset's,
            `from_preset` gives it one).

    Returns:
        For a `[T]` prompt, NumPy int32 `[T + n]`, `n <= max_new_tokens` the ids drawn (ending at a stop token);
        for `[batch, T]`, `[batch, T + n]`, `n` the most any row drew, a row that stopped earlier repeating
        its stop token; for rows of different lengths, a list of each row's ids; with `strip_prompt`, only the
        new ids. For text, the text (a list for a list of prompts).
    """
    if isinstance(prompt_ids, str) or (isinstance(prompt_ids, (list, tuple)) and prompt_ids
                                       and all(isinstance(p, str) for p in prompt_ids)):  # fmt: skip
        return _generate_text(
            model, prompt_ids, max_new_tokens, tokenizer or getattr(model, "tokenizer", None),
            dict(sampler=sampler, temperature=temperature, top_k=top_k, top_p=top_p, num_beams=num_beams, seed=seed,
                 stop_token_ids=stop_token_ids, strip_prompt=strip_prompt, jit_compile=jit_compile,
                 on_token=on_token),
            skip_special_tokens,
        )  # fmt: skip
    _check_language_model(model)
    rows, form = _rows(prompt_ids, _vocab_size(model))
    _checks.non_negative_int("max_new_tokens", max_new_tokens)
    draw, beams = sampling.choose(sampler, temperature, top_k, top_p, num_beams)
    if beams is not None and on_token is not None:
        raise ValueError("`on_token` streams each drawn token; beam search settles its tokens only at the end. "
                         f"Received: on_token={on_token!r} with {beams} beams")  # fmt: skip
    if jit_compile not in JIT_COMPILE:
        raise ValueError(f"`jit_compile` must be 'auto', True or False. Received: jit_compile={jit_compile!r}")
    stop = _stop_ids(stop_token_ids, tokenizer or getattr(model, "tokenizer", None), _vocab_size(model))
    batch = len(rows) * (beams or 1)
    read = _transformer_xl_reader(model, batch) if _is_transformer_xl(model) else gpt_reader(model, jit_compile)
    if beams is None:
        rng = np.random.default_rng(seed)
        ids, drawn = _continue(read, rows, max_new_tokens, lambda log_probs: draw(log_probs, rng), stop, on_token)
    else:
        ids, drawn = _beam_search(read, rows, max_new_tokens, beams, stop)
    return _shaped(ids, rows, drawn, form, strip_prompt)


def _generate_text(model, prompts, max_new_tokens, tokenizer, options, skip_special_tokens):
    """Text in, text out: each prompt read by `tokenizer`, its continuation written back."""
    if tokenizer is None:
        raise ValueError(
            "A text prompt needs the model's words: load it with zoo.from_preset, or pass tokenizer="
            "keras_tse.data.load_tokenizer(run folder), or give token ids. Received: a model without one"
        )
    texts = [prompts] if isinstance(prompts, str) else list(prompts)
    rows = [tokenizer.tokenize(text) for text in texts]
    for text, row in zip(texts, rows):
        if not len(row):
            raise ValueError(f"A text prompt needs at least one word. Received: prompt={text!r}")
    ids = generate(model, _Rows(rows), max_new_tokens, tokenizer=tokenizer, **options)
    written = [tokenizer.detokenize(row, skip_special_tokens=skip_special_tokens) for row in ids]
    return written[0] if isinstance(prompts, str) else written


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


class _Rows(list):
    """Prompts returned as rows, each trimmed to its own ids, whatever their lengths (text prompts' ids)."""


def _rows(prompt_ids, vocab_size):
    """(each prompt's ids as a 1-D int32 array, the prompts' form: "flat", "array" or "ragged"), checked."""
    listed = isinstance(prompt_ids, (list, tuple)) and len(prompt_ids) and all(np.ndim(p) == 1 for p in prompt_ids)
    if listed and (len({len(p) for p in prompt_ids}) > 1 or isinstance(prompt_ids, _Rows)):
        rows = [np.asarray(p) for p in prompt_ids]
        for i, row in enumerate(rows):
            if not len(row) or not np.issubdtype(row.dtype, np.integer):
                raise ValueError(f"`prompt_ids` rows must be ints, at least one each. Received: row {i} of shape "
                                 f"{row.shape}, dtype {row.dtype}")  # fmt: skip
        _check_range(np.concatenate(rows), vocab_size)
        return [row.astype("int32") for row in rows], "ragged"
    prompt = np.asarray(prompt_ids)
    flat = prompt.ndim == 1
    prompt = prompt[None] if flat else prompt
    if prompt.ndim != 2 or prompt.shape[1] == 0 or not np.issubdtype(prompt.dtype, np.integer):
        raise ValueError(
            f"`prompt_ids` must be ints, [batch, T] or [T] with T >= 1. Received: shape {prompt.shape}, "
            f"dtype {prompt.dtype}"
        )
    _check_range(prompt, vocab_size)
    return list(prompt.astype("int32")), "flat" if flat else "array"


def _check_range(ids, vocab_size):
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"`prompt_ids` must lie in [0, {vocab_size}). Received: ids from {ids.min()} to {ids.max()}")


def _stop_ids(stop_token_ids, tokenizer, vocab_size):
    """The ids that end a row, as an int32 array (empty: none)."""
    if isinstance(stop_token_ids, str) and stop_token_ids == "auto":
        end = getattr(tokenizer, "end_token_id", None)
        return np.asarray([] if end is None else [end], "int32")
    ids = np.asarray(() if stop_token_ids is None else stop_token_ids).reshape(-1)
    if ids.size and (not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"`stop_token_ids` must be 'auto', None or ids in [0, {vocab_size}). "
                         f"Received: stop_token_ids={stop_token_ids!r}")  # fmt: skip
    return ids.astype("int32")


def _continue(read, rows, max_new_tokens, draw, stop, on_token):
    """Every row one position a step, from the shortest prompt's end: a row inside its prompt takes its next
    prompt id, a drawing row its drawn id, a stopped row its stop token again. Returns (the ids `[batch,
    longest prompt + max_new_tokens]`, how many ids each row drew)."""
    lengths = np.array([len(row) for row in rows])
    ids = np.zeros((len(rows), lengths.max() + max_new_tokens), "int32")
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    drawn, stopped = np.zeros(len(rows), "int64"), np.zeros(len(rows), bool)
    for t in range(lengths.min(), ids.shape[1]):
        if np.all(stopped | (drawn == max_new_tokens)):
            break
        chosen = draw(read(ids[:, :t]))
        drawing = (t >= lengths) & (drawn < max_new_tokens) & ~stopped
        ids[:, t] = np.where(drawing, chosen, np.where(stopped, ids[:, t - 1], ids[:, t]))
        drawn += drawing
        stopped |= drawing & np.isin(chosen, stop)
        if on_token is not None:
            on_token(np.where(drawing, chosen, -1).astype("int32"))
    return ids, drawn


def _beam_search(read, rows, max_new_tokens, num_beams, stop):
    """`num_beams` beams a prompt (`sampling.beam_step`), all advanced one position a step as `_continue`
    advances rows, the reader's state reordered to follow the beams kept. Returns (each prompt's best beam,
    how many ids it drew up to its stop token)."""
    lengths = np.repeat([len(row) for row in rows], num_beams)
    ids = np.zeros((len(lengths), lengths.max() + max_new_tokens), "int32")
    for i, row in enumerate(rows):
        ids[i * num_beams : (i + 1) * num_beams, : len(row)] = row
    scores = np.tile(np.r_[0.0, np.full(num_beams - 1, -np.inf)], len(rows))  # one beam until the first draw
    drawn, finished = np.zeros(len(lengths), "int64"), np.zeros(len(lengths), bool)
    for t in range(lengths.min(), ids.shape[1]):
        if finished.all():
            break
        drawing = (t >= lengths) & (t < lengths + max_new_tokens)  # every beam of a prompt at once
        log_probs, order, tokens = read(ids[:, :t]), np.arange(len(lengths)), ids[:, t].copy()
        for first in np.flatnonzero(drawing[::num_beams]) * num_beams:
            beams = slice(first, first + num_beams)
            parents, tokens[beams], scores[beams] = sampling.beam_step(
                scores[beams], log_probs[beams], finished[beams], ids[beams, t - 1]
            )
            order[beams] = first + parents
        ids, finished, drawn = ids[order], finished[order], drawn[order]
        read.reorder(order)
        ids[:, t] = tokens
        drawn += drawing & ~finished
        finished |= drawing & np.isin(tokens, stop)
    best = np.arange(len(rows)) * num_beams  # each prompt's beams are kept best first
    return ids[best], drawn[best]


def _shaped(ids, rows, drawn, form, strip_prompt):
    """What `generate` returns for prompts of `form`: each row's prompt and drawn ids, stopped rows padded with
    their stop token where the rows share one array."""
    lengths = [len(row) for row in rows]
    if form == "ragged":
        return [ids[i, (n if strip_prompt else 0) : n + d] for i, (n, d) in enumerate(zip(lengths, drawn))]
    kept = ids[:, lengths[0] if strip_prompt else 0 : lengths[0] + int(drawn.max())]
    return kept[0] if form == "flat" else kept


class Reader:
    """ids `[batch, t]` -> the next token's log-probabilities `[batch, vocab]` (float64), reading the ids given
    since its last call; `reorder(rows)` makes its row `i` what row `rows[i]` was (beam search keeps the beams
    it continues)."""

    def __init__(self, read, reorder=None):
        self.read, self._reorder = read, reorder

    def __call__(self, ids):
        return self.read(ids)

    def reorder(self, rows):
        if self._reorder is not None:
            self._reorder(rows)


def gpt_reader(model, jit_compile="auto"):
    """The GPT's `Reader`: from the key/value cache while the ids fit the position table (`DecodeStep`), from
    the window of the last ids after (or always, for a layout whose mean reads later positions)."""
    window = model.input.shape[1]
    decodes = all(block.decodes for block in _blocks(model))
    cached = decode_step(model, jit_compile).reader() if decodes else None
    reread = window_reader(model, jit_compile)

    def next_log_probs(ids):
        if cached is not None and ids.shape[1] <= window:
            return cached(ids)
        return reread(ids)

    return Reader(next_log_probs, None if cached is None else cached.reorder)


def window_reader(model, jit_compile="auto"):
    """A `Reader` of one pass over the last `window` ids, right-padded to the model's fixed length (the causal
    mask keeps the padding out of the last id's position), holding nothing between calls. Compiled as the
    model's own `predict_on_batch` is, unless `jit_compile=False` (eager)."""
    window = model.input.shape[1]
    run = _runner(model, jit_compile is not False)

    def next_log_probs(ids):
        context = ids[:, -window:]
        length = context.shape[1]
        padded = np.pad(context, ((0, 0), (0, window - length)))
        return np.asarray(run(padded)[:, length - 1], "float64")

    return Reader(next_log_probs)


def _blocks(model):
    from keras_tse.layers.transformer_block import TransformerBlock

    return [layer for layer in model.layers if isinstance(layer, TransformerBlock)]


_STEPS = weakref.WeakKeyDictionary()  # a language model's DecodeSteps by `jit_compile`, compiled at first use


def decode_step(model, jit_compile="auto"):
    """`model`'s `DecodeStep` for `jit_compile`, the same one every call (its compiled program is reused);
    `True` compiles it on every backend (`Model.compile(jit_compile=True)`: `torch.compile` on PyTorch)."""
    steps = _STEPS.setdefault(model, {})
    if jit_compile not in steps:
        steps[jit_compile] = DecodeStep(model, eager=jit_compile is False)
        if jit_compile is True:
            steps[jit_compile].compile(jit_compile=True)
    return steps[jit_compile]


class DecodeStep(keras.Model):
    """The GPT's cached decoding as one function of fixed shapes (`keras_tse.zoo.gpt`'s layers in its order,
    each block through `decode`): `[new ids, position, *caches]` -> `[log-probabilities of the next token,
    *caches]`, the caches (each block's keys, values and, where it de-escalates, the rows eq. (21)'s causal
    mean reads) `window` positions long whatever is filled, the position an input. It reads one id a call,
    the prompt's too: Keras compiles it once (for a batch size), and every token, whatever the prompt's
    length, reuses that program."""

    def __init__(self, lm, eager=False, **kwargs):
        super().__init__(name=f"{lm.name}_decode_step", **kwargs)
        self.lm, self.eager = lm, eager  # eager: every step run eagerly, kept to measure against

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

    def reader(self):
        """A `Reader` of the ids appended since its last call, one by one: compiled (`predict_on_batch`), or
        eager for an `eager` step."""
        held, run = {"read": 0, "caches": None}, _runner(self, not self.eager)

        def next_log_probs(ids):
            if held["caches"] is None:
                held["caches"] = self.empty_caches(ids.shape[0])
            for start in range(held["read"], ids.shape[1]):
                position = np.full((ids.shape[0],), start, "int32")
                inputs = [ids[:, start : start + 1].astype("int32"), position, *held["caches"]]
                log_probs, *held["caches"] = run(inputs)
            held["read"] = ids.shape[1]
            return np.asarray(log_probs, "float64")

        def reorder(rows):
            held["caches"] = [cache[rows] for cache in held["caches"]]

        return Reader(next_log_probs, reorder)


def _runner(model, compiled):
    """inputs -> NumPy outputs of `model`: compiled once a shape (Keras's `predict_on_batch`), or eager."""
    if compiled:
        return model.predict_on_batch
    return lambda inputs: keras.tree.map_structure(keras.ops.convert_to_numpy, model(inputs, training=False))


def _transformer_xl_reader(model, batch):
    """The Transformer-XL's `Reader`, a one-token copy of `model` for `batch` sequences carrying its memory:
    the first call reads the prompt token by token, each later one the token appended since."""
    from keras_tse.callbacks.reset_memory import reorder_memory

    config = model.get_config()
    memory = config["segment_len"] + config["mem_len"]
    reader = type(model).from_config({**config, "segment_len": 1, "batch_size": batch, "mem_len": memory})
    reader(np.zeros((batch, 1), "int32"))
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

    return Reader(next_log_probs, lambda rows: reorder_memory(reader, rows))
