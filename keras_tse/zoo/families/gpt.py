"""A GPT-style decoder: causal blocks of any residual layout over learned absolute positions."""

import keras

from keras_tse import _checks
from keras_tse.layers import AdaptiveEmbedding, PositionEmbedding, initializers
from keras_tse.layers.self_attention import resolve_head_dim
from keras_tse.layers.stochastic_depth import linear_rates
from keras_tse.layouts import get_layout
from keras_tse.norms import DEESCALATE_AT
from keras_tse.zoo.blocks import checked_layout_options, stack_block
from keras_tse.zoo.families.gpt_presets import PRESETS
from keras_tse.zoo.registry import register_family

BLOCK_KEYS = ("num_heads", "head_dim", "ffn_dim", "activation", "dropout", "attention_dropout", "initializer")


def _token_ids(config):
    batch = config["batch_size"] or "batch"
    return f"[{batch}, {config['segment_len']}] token ids (zoo.generate pads a shorter prompt)"


# The keywords grouped by what they set, one group a line.
# fmt: off
@register_family(
    "gpt",
    _token_ids,
    task="text",
    tiny=dict(depth=2, vocab_size=40, hidden_dim=16, num_heads=2, ffn_dim=32, cutoffs=(), segment_len=8),
    presets=PRESETS,
    title="GPT-style decoder",
    base_preset="gpt8_small",  # the language-model task's sizes, with Transformer-XL's memory taken out
)
def gpt(
    depth=12, norm="deescalate", *,
    vocab_size=10_000, segment_len=128, batch_size=None,  # input
    hidden_dim=128, num_heads=4, head_dim=None, ffn_dim=512, activation="gelu",  # blocks
    dropout=0.0, attention_dropout=0.0, drop_path_rate=0.0, cutoffs=(), div_val=1, initializer="transformer_xl",
    tau=1.0, trainable_tau=False, deescalate_at="pre_ffn",  # eq. (21)
    layout_options=None,  # the layout's own options (keras_tse.layouts), e.g. {"layer_scale_init": 1e-4}
    remat=False,  # recompute each block's activations in the backward pass (keras.RematScope)
    name=None,
):
    # fmt: on
    """A GPT-style language model: token ids `[batch, T]` to next-token log-probabilities.

    Token embedding and learned positions (`PositionEmbedding`, GPT-2's `wpe`), `depth` causal
    `TransformerBlock`s of layout `norm` (`keras_tse.layouts`: any of them, de-escalation in its
    causal form, the mean over positions `<= t`), a final LayerNorm and the output tied to the token
    embedding. The output is `[batch, T, vocab_size]` float32 log-probabilities; train with
    `keras_tse.losses.LogProbabilityCrossentropy`, as the Transformer-XL. With no memory and no
    fixed batch, it trains on shuffled or ordered segments alike.

    Where the paper is silent, the choices and why: the token embedding is Transformer-XL's tied
    `AdaptiveEmbedding` (a plain softmax with `cutoffs=()`; scaled by `sqrt(hidden_dim)` as there), so
    the two language models differ in their attention only (absolute positions and a causal softmax
    here, relative positions and a memory there); de-escalation sits at the FFN input, the paper's
    placement for its language model (Sec. 3.4); every layout keeps the final LayerNorm (GPT-2's
    `ln_f`), so the layouts differ in their blocks only, as in the zoo's ViT; GELU, GPT-2's
    activation; N(0, 0.02) weights, GPT-2's and Transformer-XL's.

    Args:
        depth: int, number of blocks. Defaults to `12`.
        norm: the residual layout, a name of `keras_tse.layouts.layout_names()`. Defaults to
            `"deescalate"`.
        vocab_size: int. Defaults to `10000` (Penn Treebank's).
        segment_len: int, the longest input, the rows of the position table. Defaults to `128`.
        batch_size: int or `None`, a fixed batch size for the input, or any. Defaults to `None`.
        hidden_dim, num_heads, head_dim, ffn_dim, activation: the blocks' widths and FFN activation.
        dropout: float, on the embeddings and in every block. Defaults to `0.0`.
        attention_dropout: float, on P. Defaults to `0.0`.
        drop_path_rate: float in [0, 1), stochastic depth, block `i` at `drop_path_rate * i / (depth - 1)`
            (`StochasticDepth`). Defaults to `0.0`.
        cutoffs, div_val: the adaptive softmax's cluster bounds and width divisor (`AdaptiveEmbedding`).
        initializer: weight scheme of every layer. Defaults to `"transformer_xl"` (N(0, 0.02)).
        tau, trainable_tau: eq. (21)'s strength, and whether it is learned (de-escalating layouts).
        deescalate_at: `"pre_ffn"` (Sec. 3.4, the default) or `"output"`.
        remat: bool, recompute each block's activations in the backward pass instead of keeping them
            (`keras.RematScope` on every block). Defaults to `False`.
        name: model name. Defaults to `f"gpt{depth}_{norm}"`.

    Returns:
        A functional `keras.Model`.

    Example:

    >>> model = keras_tse.zoo.gpt(depth=12, norm="deescalate", vocab_size=10_000)
    >>> model(np.zeros((2, 128), "int32")).shape  # (2, 128, 10000) log-probabilities
    >>> keras_tse.zoo.generate(model, [1, 2, 3], 20, temperature=0)  # the prompt and 20 ids, greedy

    The input is exactly `segment_len` ids (the position table's rows); `keras_tse.zoo.generate`
    right-pads a shorter prompt and slides over a longer text.
    """
    _checks.positive_int("depth", depth)
    _checks.positive_int("segment_len", segment_len)
    _checks.positive_int("batch_size", batch_size, allow_none=True)
    _checks.dropout_rate("dropout", dropout)
    _checks.one_of("deescalate_at", deescalate_at, DEESCALATE_AT)
    layout = get_layout(norm)  # resolved here once: the blocks receive the `Layout` itself
    norm = layout.name
    eq21 = dict(tau=tau, trainable_tau=trainable_tau, deescalate_at=deescalate_at)
    defaults = dict(tau=1.0, trainable_tau=False, deescalate_at="pre_ffn")
    _checks.unused_options(norm, (norm,) if layout.deescalates else (), eq21, defaults)
    resolve_head_dim(hidden_dim, num_heads, head_dim)  # a width that does not divide fails up front
    layout_options = checked_layout_options(layout, layout_options, tau=tau, trainable_tau=trainable_tau)
    options = {key: value for key, value in locals().items() if key in BLOCK_KEYS}
    embedding = AdaptiveEmbedding(
        vocab_size, hidden_dim, cutoffs=cutoffs, div_val=div_val, initializer=initializers.check(initializer),
        name="embedding",
    )
    token_ids = keras.Input((segment_len,), batch_size=batch_size, dtype="int32", name="token_ids")
    x = PositionEmbedding(segment_len, initializer=initializer, name="position_embedding")(embedding(token_ids))
    x = keras.layers.Dropout(dropout, name="embedding_dropout")(x)
    for i, rate in enumerate(linear_rates(drop_path_rate, depth)):
        block = stack_block(
            layout, depth, layout_options, causal=True, deescalate_at=deescalate_at,
            drop_path=rate, remat=remat, **options, name=f"block_{i:02d}",
        )
        x = block(x)
    x = keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")(x)
    log_probs = embedding(x, reverse=True)  # tied output
    return keras.Model(token_ids, log_probs, name=name or f"gpt{depth}_{norm}")
