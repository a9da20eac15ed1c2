"""`keras-tse probe MODEL.keras`: the per-block similarity profile and attention diagnostics of a saved model."""

import keras
import numpy as np

from keras_tse.analysis.diagnostics import block_diagnostics, reads_attention
from keras_tse.analysis.similarity import (
    as_graph,
    block_outputs_model,
    blocks_of,
    cosine_similarity,
    measure_blocks,
    token_similarity,
)


def random_inputs(model, batch_size=8, seed=0):
    """`(warmup or None, probe)` inputs `model` accepts: N(0, 1) floats, or uniform token ids; for a model of
    KerasHub's named inputs (a backbone or task taking a dict), those inputs (`named_inputs`).

    A model with a fixed batch size (Transformer-XL) gets that size, and a warm-up batch that fills
    its memory first; token ids need the vocabulary size from the model's config (`vocab_size`).
    """
    rng = np.random.default_rng(seed)
    model = as_graph(model)
    if isinstance(model.input, dict):
        return None, named_inputs(model, batch_size, rng)
    spec = model.inputs[0]
    batch = spec.shape[0] or batch_size
    shape = (batch, *spec.shape[1:])
    if "int" not in keras.backend.standardize_dtype(spec.dtype):
        return None, rng.standard_normal(shape).astype("float32")
    vocab = model.get_config().get("vocab_size")
    if vocab is None:
        raise ValueError(
            f"Model {model.name!r} takes integer inputs but its config has no `vocab_size`; "
            f"probe it from Python with your own token ids. Received: input dtype {spec.dtype}"
        )
    warmup, probe = (rng.integers(0, vocab, shape).astype(spec.dtype) for _ in range(2))
    return (warmup if spec.shape[0] else None), probe


# A sequence of KerasHub's variable length gets this many tokens: short enough for any position table, long
# enough for a token mean (the paper's measures average over the tokens).
PROBE_TOKENS = 32
MASKED = 4  # a masked-word task's positions a sequence


def named_inputs(model, batch_size, rng):
    """KerasHub's named inputs, drawn: `token_ids` uniform over the backbone's vocabulary, every token real
    (`padding_mask` ones), one segment (`segment_ids` zeros), `mask_positions` (a masked-word task) distinct
    positions among the tokens; any other input, or a model with no `vocabulary_size`, is one line."""
    backbone = getattr(model, "backbone", model)
    vocab = getattr(backbone, "vocabulary_size", None)
    if vocab is None:
        raise ValueError(
            f"Model {model.name!r} takes named inputs {sorted(model.input)} but has no `vocabulary_size` (KerasHub's "
            "backbones do); probe it from Python with your own inputs"
        )
    length = min(PROBE_TOKENS, getattr(backbone, "max_sequence_length", None) or PROBE_TOKENS)
    draw = {
        "token_ids": lambda: rng.integers(0, vocab, (batch_size, length)),
        "padding_mask": lambda: np.ones((batch_size, length)),
        "segment_ids": lambda: np.zeros((batch_size, length)),
        "mask_positions": lambda: np.stack([rng.permutation(length)[:MASKED] for _ in range(batch_size)]),
    }
    unknown = sorted(set(model.input) - set(draw))
    if unknown:
        raise ValueError(
            f"Model {model.name!r} takes inputs {unknown} that the probe cannot draw (it draws {sorted(draw)}); "
            "probe it from Python with your own inputs"
        )
    return {name: draw[name]().astype(spec.dtype) for name, spec in model.input.items()}


def probe_model(model, inputs=None, warmup_inputs=None, batch_size=8, seed=0, layers=None):
    """One row per block: t_sim, t_cos, head-mean attention entropy, QK variance and xi.

    `layers` names the blocks of a model not built from blocks of a known kind (see `block_outputs_model`);
    the attention columns are NaN there, and for a model whose blocks' attention the diagnostics do not read
    (DeBERTa's: `reads_attention`).
    """
    if inputs is None:
        warmup_inputs, inputs = random_inputs(model, batch_size, seed)
    tsim, tcos = measure_blocks(
        block_outputs_model(model, layers), inputs, (token_similarity, cosine_similarity), warmup_inputs
    )
    unknown = {"entropy": [np.nan], "mean": [np.nan], "variance": [np.nan], "xi": np.array([np.nan])}
    readable = layers is None and all(map(reads_attention, blocks_of(model)))
    attention = block_diagnostics(model, inputs, warmup_inputs) if readable else [unknown] * len(tsim)
    return [
        {
            "block": i,
            "t_sim": float(tsim[i]),
            "t_cos": float(tcos[i]),
            "entropy": float(np.mean(a["entropy"])),
            "qk_mean": float(np.mean(a["mean"])),
            "qk_variance": float(np.mean(a["variance"])),
            "qk_xi": _finite_mean(a["xi"]),
        }
        for i, a in enumerate(attention)
    ]


def _finite_mean(values):
    """Mean over the heads where xi is defined (tr(W^2) > 0); NaN if it is nowhere."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")


def format_rows(rows):
    header = f"{'block':>5} {'t_sim':>8} {'t_cos':>8} {'entropy':>8} {'qk_mean':>9} {'qk_var':>9} {'qk_xi':>8}"
    lines = [header]
    for r in rows:
        lines.append(
            f"{r['block']:>5} {r['t_sim']:>8.4f} {r['t_cos']:>8.4f} {r['entropy']:>8.4f} "
            f"{r['qk_mean']:>9.4g} {r['qk_variance']:>9.4g} {r['qk_xi']:>8.4f}"
        )
    return "\n".join(lines)
