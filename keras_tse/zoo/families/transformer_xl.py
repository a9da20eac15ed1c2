"""The deep Transformer-XL language model of Yu & Zhang, Sec. 3.4 (WikiText-103, depth 60)."""

import inspect

import keras
import numpy as np

from keras_tse import _checks
from keras_tse.callbacks.reset_memory import ResetMemory, reset_memory
from keras_tse.layers import initializers
from keras_tse.layers.adaptive_embedding import AdaptiveEmbedding
from keras_tse.layers.quantization import config_dtype
from keras_tse.layers.stochastic_depth import linear_rates
from keras_tse.layouts import get_layout
from keras_tse.zoo.blocks import checked_layout_options, transformer_xl_block
from keras_tse.zoo.families.transformer_xl_presets import PRESETS
from keras_tse.zoo.registry import register_family


def _token_ids(config):
    return f"[{config['batch_size']}, {config['segment_len']}] token ids (fixed batch), memory {config['mem_len']}"


@register_family(
    "transformer_xl",
    _token_ids,
    task="text",
    tiny=dict(depth=2, vocab_size=40, hidden_dim=16, num_heads=2, head_dim=8, ffn_dim=32, cutoffs=(),
              batch_size=4, segment_len=8, mem_len=8),
    presets=PRESETS,
    title="Transformer-XL",
    smoke_preset="transformer_xl8_small",  # a CPU-sized model, end to end in about a minute per variant
)  # fmt: skip
@keras.saving.register_keras_serializable(package="keras_tse")
class TransformerXL(keras.Model):
    """Transformer-XL: token ids `[batch_size, segment_len]` to next-token log-probabilities.

    The base WikiText-103 model of Dai et al. 2019 with the changes of Yu &
    Zhang, Sec. 3.4 as defaults (depth 16 -> 60, FFN 2100 -> 820, batch
    60 -> 40, no dropout): adaptive input embedding scaled by
    `sqrt(hidden_dim)`, `depth` `TransformerXLBlock`s (relative positional
    attention with the biases `u`, `v`, sinusoidal relative encodings, the
    causal mask over memory plus segment, segment-level recurrence over
    `mem_len` cached states per block) and the tied adaptive softmax. The
    output is `[batch_size, segment_len, vocab_size]` float32
    log-probabilities; train with `keras_tse.losses.LogProbabilityCrossentropy`.

    The memory lives in non-trainable variables sized for `batch_size`, so
    every batch must have exactly that size, and the segments must come as
    an ordered stream (`keras_tse.data.lm_segments`): `fit` here defaults to
    `shuffle=False` and refuses `shuffle=True` while there is a memory. The
    memory is emptied at each epoch start and before each `evaluate` and
    `predict` (`keras_tse.callbacks.ResetMemory`, added by these methods).

    Where this differs from the reference code, and why: each block owns its
    `u`, `v` biases (the base script shares one pair across layers; one
    self-contained layer per block keeps probes and saving simple: 820
    parameters per block); the pre-norm variant has no final LayerNorm and
    the adaptive softmax ties every projection, as the reference's
    `pre_lnorm` and `div_val=1` configuration do.

    Args:
        depth: int, number of blocks. Defaults to `60` (Sec. 3.4).
        norm: `"post"`, `"pre"` or `"deescalate"` (post-norm with causal
            `DeEscalation(tau)` at each FFN input); for comparison also
            `"deepnorm"` (DeepNet's decoder-only constants `(2 depth)^(1/4)`,
            `(8 depth)^(-1/4)`), `"rezero"` and `"layerscale"` (CaiT's initial
            scale for `depth`); see `TransformerXLBlock`. Defaults to
            `"deescalate"`.
        vocab_size: int. Defaults to `267735` (WikiText-103 with `<eos>`).
        hidden_dim: int. Defaults to `410`.
        num_heads: int. Defaults to `10`.
        head_dim: int. Defaults to `41`.
        ffn_dim: int. Defaults to `820` (Sec. 3.4; the base model's 2100).
        segment_len: int, tokens per segment (`tgt_len`). Defaults to `150`.
        mem_len: int >= 0, cached positions per block. Defaults to `150`.
        batch_size: int, the fixed batch size. Defaults to `40`.
        cutoffs: adaptive softmax cluster bounds. Defaults to
            `(20000, 40000, 200000)`.
        div_val: int, adaptive embedding width divisor. Defaults to `1`.
        dropout: float, on embeddings, branches and the final states.
            Defaults to `0.0` (Sec. 3.4 disables it).
        attention_dropout: float, on P. Defaults to `0.0`.
        drop_path_rate: float in [0, 1), stochastic depth, block `i` at
            `drop_path_rate * i / (depth - 1)` (`StochasticDepth`). Defaults to `0.0`.
        tau: float in [0, 1], de-escalation strength. Defaults to `1.0`.
        trainable_tau: bool. Defaults to `False`.
        deescalate_at: `"pre_ffn"` (Sec. 3.4) or `"output"`, where
            `"deescalate"` applies eq. (21). Defaults to `"pre_ffn"`.
        deescalate_memory: bool, whether the causal mean also covers the
            memory positions. Defaults to `True`.
        initializer: weight scheme of every layer, one of
            `keras_tse.layers.initializers.INITIALIZERS`. Defaults to
            `"transformer_xl"`, the reference code's `N(0, 0.02)` (Sec. 3.4
            keeps the base model's settings; not re-measured here).
        name: model name. Defaults to `f"transformer_xl{depth}_{norm}"`.

    Example:

    >>> model = keras_tse.zoo.transformer_xl(depth=60, norm="deescalate")
    >>> sum(int(np.prod(w.shape)) for w in model.trainable_weights)  # 201,035,718
    >>> # (count_params() adds the memory, non-trainable state: 496,235,778)

    Reference:
        Dai et al. 2019, "Transformer-XL"; Yu & Zhang, Sec. 3.4.
    """

    # The keywords grouped by what they set, one group a line.
    # fmt: off
    def __init__(
        self, depth=60, norm="deescalate", vocab_size=267735,
        hidden_dim=410, num_heads=10, head_dim=41, ffn_dim=820,  # blocks
        segment_len=150, mem_len=150, batch_size=40,  # the segment stream and its memory
        cutoffs=(20000, 40000, 200000), div_val=1,  # adaptive input and softmax
        dropout=0.0, attention_dropout=0.0, drop_path_rate=0.0, initializer="transformer_xl",
        tau=1.0, trainable_tau=False, deescalate_at="pre_ffn", deescalate_memory=True,  # eq. (21)
        layout_options=None,  # the layout's own options (keras_tse.layouts), e.g. {"layer_scale_init": 1e-4}
        name=None, **kwargs,
    ):
        # fmt: on
        _checks.positive_int("depth", depth)
        layout = get_layout(norm)  # resolved here once: the blocks receive the `Layout` itself
        norm = layout.name
        _checks.positive_int("segment_len", segment_len)
        _checks.positive_int("batch_size", batch_size)
        _checks.dropout_rate("dropout", dropout)
        deescalating = (norm,) if layout.deescalates else ()
        eq21 = checked_layout_options(layout, layout_options, tau=tau, trainable_tau=trainable_tau)
        _checks.unused_options(norm, deescalating, dict(tau=tau, trainable_tau=trainable_tau), EQ_21_DEFAULTS)
        placement = dict(deescalate_at=deescalate_at, deescalate_memory=deescalate_memory)
        _checks.unused_options(norm, deescalating if layout.causal_mean else (), placement, EQ_21_DEFAULTS)
        # get_config returns the builder's keywords as given (`name` is the layer's own)
        config = {key: value for key, value in locals().items() if key in _BUILDER_KEYS}
        config.update(cutoffs=tuple(cutoffs), initializer=initializers.check(initializer))
        # a quantized model's policies by layer path (its config's `dtype`): each layer takes its own when built
        dtype = {"dtype": kwargs.pop("dtype")} if "dtype" in kwargs else {}
        embedding = AdaptiveEmbedding(
            vocab_size, hidden_dim, cutoffs=cutoffs, div_val=div_val, initializer=initializer, name="embedding", **dtype
        )
        blocks = [
            transformer_xl_block(
                layout, depth, eq21, **{k: config[k] for k in BLOCK_KEYS}, drop_path=rate, name=f"block_{i:02d}",
                **dtype,
            )
            for i, rate in enumerate(linear_rates(drop_path_rate, depth))
        ]
        token_ids = keras.Input((segment_len,), batch_size=batch_size, dtype="int32", name="token_ids")
        x = keras.layers.Dropout(dropout, name="embedding_dropout")(embedding(token_ids))
        for block in blocks:
            x = block(x)
        x = keras.layers.Dropout(dropout, name="output_dropout")(x)
        log_probs = embedding(x, reverse=True)  # tied adaptive softmax
        super().__init__(token_ids, log_probs, name=name or f"transformer_xl{depth}_{norm}", **kwargs)
        self._builder_config = config

    def reset_memory(self):
        """Empty every block's memory: the next segment starts a new text."""
        reset_memory(self)

    def fit(self, x=None, y=None, *, callbacks=None, shuffle=False, **kwargs):
        if shuffle and self._builder_config["mem_len"]:
            raise ValueError(
                "Transformer-XL with a memory trains on an ordered stream of segments (keras_tse.data."
                "lm_segments): each batch continues the previous one. Received: shuffle=True; pass "
                "shuffle=False (the default here), or build with mem_len=0."
            )
        self._check_ids(x, y)
        if isinstance(kwargs.get("validation_data"), (tuple, list)):
            self._check_ids(*kwargs["validation_data"][:2])
        return super().fit(x, y, callbacks=_with_reset(callbacks), shuffle=shuffle, **kwargs)

    def evaluate(self, x=None, y=None, *, callbacks=None, **kwargs):
        self._check_ids(x, y)
        return super().evaluate(x, y, callbacks=_with_reset(callbacks), **kwargs)

    def predict(self, x, *, callbacks=None, **kwargs):
        self._check_ids(x, None)
        return super().predict(x, callbacks=_with_reset(callbacks), **kwargs)

    def _check_ids(self, x, y):
        """Ids and targets given as arrays must be whole numbers in [0, vocab) in rows of `segment_len`.

        Out-of-range targets give a finite wrong loss or NaN, and out-of-range ids embed silently, so
        they are refused here, naming the first offending value and its position. (A PyDataset such as
        `SegmentStream` is checked where it is built.)
        """
        config = self._builder_config
        for name, array in (("x", x), ("y", y)):
            if array is None or not hasattr(array, "shape") or not hasattr(array, "dtype"):
                continue
            check_token_ids(name, np.asarray(array), config["vocab_size"], config["segment_len"])

    def get_config(self):
        config = {**self._builder_config, "cutoffs": list(self._builder_config["cutoffs"]), "name": self.name}
        sublayers = self._flatten_layers(include_self=False)
        if any(layer.quantization_mode for layer in sublayers):  # `model.quantize(mode)`: its layers' policies
            config["dtype"] = config_dtype(self, sublayers)
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)


# The builder keywords that get_config returns, and those each block receives as they are.
_BUILDER_KEYS = tuple(
    k for k in inspect.signature(TransformerXL.__init__).parameters if k not in ("self", "name", "kwargs")
)
EQ_21_DEFAULTS = dict(tau=1.0, trainable_tau=False, deescalate_at="pre_ffn", deescalate_memory=True)
BLOCK_KEYS = ("num_heads", "ffn_dim", "head_dim", "mem_len", "dropout")
BLOCK_KEYS += ("attention_dropout", "initializer", "deescalate_at", "deescalate_memory")


def check_token_ids(name, ids, vocab_size, segment_len=None):
    """Raise a ValueError naming the first id of `ids` that is not an integer in [0, vocab_size), or a bad shape."""
    if not (
        np.issubdtype(ids.dtype, np.integer) or (np.issubdtype(ids.dtype, np.floating) and np.all(np.mod(ids, 1) == 0))
    ):
        where = (
            tuple(int(i) for i in np.argwhere(np.mod(ids, 1) != 0)[0]) if np.issubdtype(ids.dtype, np.floating) else ()
        )
        raise ValueError(
            f"`{name}` must hold integer token ids. Received: dtype {ids.dtype}"
            + (f", {ids[where].item()!r} at position {where}" if where else "")
        )
    if segment_len is not None and (ids.ndim != 2 or ids.shape[1] != segment_len):
        raise ValueError(
            f"`{name}` must be [batch, segment_len={segment_len}] token ids (keras_tse.data.lm_segments "
            f"cuts them). Received: {name}.shape={ids.shape}"
        )
    bad = (ids < 0) | (ids >= vocab_size)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"`{name}` holds token id {ids[where].item()!r} at position {where}; ids must be in "
            f"[0, vocab_size={vocab_size})."
        )


def _with_reset(callbacks):
    """The callbacks plus a ResetMemory, unless there is one (or Keras passes its own CallbackList)."""
    if isinstance(callbacks, keras.callbacks.CallbackList):  # fit's validation: fit added it already
        return callbacks
    callbacks = list(callbacks or [])
    if not any(isinstance(c, ResetMemory) for c in callbacks):
        callbacks.insert(0, ResetMemory())
    return callbacks


def transformer_xl(depth=60, norm="deescalate", **kwargs):
    """Build a `TransformerXL` (see its docstring for every keyword and default)."""
    return TransformerXL(depth=depth, norm=norm, **kwargs)
