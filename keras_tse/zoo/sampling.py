"""How generation chooses each next token from a language model's log-probabilities: KerasHub's samplers by
name (`keras_hub.samplers.get`'s names and defaults), a `keras_hub.samplers` object itself, and beam search.

The token samplers run on the host, on float32-or-wider log-probabilities: `temperature=0` (or "greedy") takes
the most likely token; otherwise the log-probabilities are divided by `temperature`, kept to the `top_k` most
likely and to the smallest set whose probability reaches `top_p` (nucleus sampling), and drawn with NumPy's
generator seeded by `seed`: the same seed, the same text, on any backend whose model gives the same
probabilities. A KerasHub sampler object draws with its own `compute_probabilities` and `get_next_token`
(its own seed generator).

Beam search keeps, for each prompt, the `num_beams` continuations of highest total log-probability (no length
penalty, as KerasHub's `BeamSampler`), and returns the best: one beam is greedy decoding. A beam that has
reached a stop token stays as it is at no cost, so finished and unfinished beams compete on their totals; a
total only falls as a beam grows, so an early stop often wins (`gpt4_ptb`, 4 beams: "stocks" continued by
`<eos>` alone). `stop_token_ids=None` searches the full length.
"""

import numpy as np

from keras_tse import _checks

NAMES = ("greedy", "random", "top_k", "top_p", "beam")
# KerasHub's own defaults (TopKSampler(k=5), TopPSampler(p=0.1), BeamSampler(num_beams=5)), for the same names
DEFAULTS = {"top_k": 5, "top_p": 0.1, "num_beams": 5}
REFUSED = {  # KerasHub samplers that need more than the next token's probabilities
    "ContrastiveSampler": "it scores candidates by their hidden states, which the zoo's readers do not return",
    "SpeculativeSampler": "it needs a draft model",
}


def choose(sampler, temperature, top_k, top_p, num_beams):
    """(a function `(log_probs [batch, vocab], rng) -> ids [batch]`, None) or (None, the beam width)."""
    _check_settings(temperature, top_k, top_p, num_beams)
    if sampler is None:  # the settings alone: greedy at temperature 0, else sampled from what they keep
        return _drawn(temperature, top_k, top_p), None
    if not isinstance(sampler, str):
        return _keras_hub_sampler(sampler)
    if sampler not in NAMES:
        raise ValueError(f"`sampler` must be one of {', '.join(NAMES)} or a keras_hub.samplers object. "
                         f"Received: sampler={sampler!r}")  # fmt: skip
    if sampler == "beam":
        return None, num_beams or DEFAULTS["num_beams"]
    if num_beams is not None:
        raise ValueError(f"`num_beams` is beam search's width; sampler={sampler!r} keeps no beams. "
                         f"Received: num_beams={num_beams!r}")  # fmt: skip
    if sampler == "greedy":
        return _drawn(0, None, None), None
    if sampler == "top_k":
        return _drawn(temperature, top_k or DEFAULTS["top_k"], top_p), None
    if sampler == "top_p":
        return _drawn(temperature, top_k, top_p or DEFAULTS["top_p"]), None
    return _drawn(temperature, top_k, top_p), None


def _check_settings(temperature, top_k, top_p, num_beams):
    if not (isinstance(temperature, (int, float)) and 0 <= temperature < float("inf")):
        raise ValueError(f"`temperature` must be a number >= 0 (0: greedy). Received: temperature={temperature!r}")
    _checks.positive_int("top_k", top_k, allow_none=True)
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"`top_p` must be in (0, 1] or None. Received: top_p={top_p!r}")
    _checks.positive_int("num_beams", num_beams, allow_none=True)


def _drawn(temperature, top_k, top_p):
    return lambda log_probs, rng: sample(log_probs, temperature, top_k, top_p, rng)


def _keras_hub_sampler(sampler):
    kind = type(sampler).__name__
    if kind in REFUSED:
        raise ValueError(f"`sampler`: keras_hub.samplers.{kind} is not supported: {REFUSED[kind]}. Received: {kind}")
    if kind == "BeamSampler":
        return None, sampler.num_beams
    if not (hasattr(sampler, "get_next_token") and hasattr(sampler, "compute_probabilities")):
        raise ValueError(f"`sampler` must be one of {', '.join(NAMES)} or a keras_hub.samplers object. "
                         f"Received: {kind}")  # fmt: skip

    def draw(log_probs, rng):
        import keras

        chosen = sampler.get_next_token(sampler.compute_probabilities(log_probs.astype("float32")))
        return keras.ops.convert_to_numpy(chosen).astype("int32").reshape(-1)

    return draw, None


def sample(log_probs, temperature, top_k, top_p, rng):
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


def beam_step(scores, log_probs, finished, last):
    """One prompt's beams one token on: `scores [beams]` their totals, `log_probs [beams, vocab]` the next token's,
    `finished [beams]` those past a stop token (kept as they are, their `last` token again at no cost).
    Returns (the beam each new beam continues, its token, its total), the new beams best first."""
    candidates = scores[:, None] + np.where(finished[:, None], -np.inf, log_probs)
    rows = np.flatnonzero(finished)
    candidates[rows, last[rows]] = scores[rows]
    best = np.argsort(-candidates, axis=None, kind="stable")[: len(scores)]
    parents, tokens = np.divmod(best, log_probs.shape[-1])
    return parents, tokens.astype("int32"), candidates.reshape(-1)[best]
