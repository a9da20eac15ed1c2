import keras
from keras import ops

from keras_tse import _checks
from keras_tse.layers._sequence_layer import SequenceLayer
from keras_tse.layouts.layout import eq21_options


class _UnitInterval(keras.constraints.Constraint):
    """Clips a weight into [0, 1] after each optimizer step."""

    def __call__(self, w):
        return ops.clip(w, 0.0, 1.0)


@keras.saving.register_keras_serializable(package="keras_tse")
class DeEscalation(SequenceLayer):
    """Removes a fraction `tau` of the token mean: `Y = (I - tau * 11^T/n) X`.

    Token similarity escalation (TSE) pushes the rows of a post-norm
    Transformer's hidden states towards their common mean, the component in
    `span{1}` (Yu & Zhang, Sec. 2). This layer subtracts a portion `tau` of
    that component, eq. (21): `tau = 0` is the identity, `tau = 1` centres
    every feature over the tokens (`Y = Pi_1^perp X`).

    With a padding `mask` the mean runs over real tokens only. With
    `causal=True` position `t` subtracts `tau` times the mean of positions
    `0..t`, so no output reads a later token (the form a language model
    needs: the global mean would leak the future into every position).
    A context of a single real token (position 0 of a causal sequence, a
    sequence with one real token) is left unchanged: its "mean" is the token
    itself, and removing it would only zero the token (see `token_mean`).

    With `trainable_tau=True`, `tau` is a scalar weight clipped into [0, 1]
    after every optimizer step (a constraint rather than a sigmoid, so that
    the paper's `tau = 1` is representable and still receives gradient).
    Weight decay pulls `tau` towards 0; exclude it from decay with
    `optimizer.exclude_from_weight_decay(var_names=["tau"])` if that is not
    wanted.

    Args:
        tau: float in [0, 1], the removed portion of the token mean (its
            initial value when trainable). Defaults to `1.0`, the value of
            every experiment in the paper.
        trainable_tau: bool, whether `tau` is learned. Defaults to `False`.
        causal: bool, whether position `t` uses the mean of positions
            `<= t` only. Defaults to `False`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor of shape `[batch, tokens, dim]`.
        mask: optional boolean tensor of shape `[batch, tokens]`, `True` for
            real tokens. Padded positions are excluded from the mean (they are
            shifted like the others; downstream layers ignore them).
        memory: optional tensor `[batch, mem_len, dim]` of earlier positions
            (causal only): every position's mean also covers the memory rows
            whose `memory_mask` is `True`, as Transformer-XL's context does.
        memory_mask: boolean `[mem_len]` or `[batch, mem_len]`, `True` for
            filled memory rows. Defaults to all `True`.

    Returns:
        A tensor of the input's shape.

    Example:

    >>> x = np.array([[[1.0], [3.0]]])
    >>> keras_tse.layers.DeEscalation(tau=1.0)(x)  # [[[-1.], [1.]]]

    Reference:
        Yu & Zhang, "Why 'Classic' Transformers Are Shallow and A
        Depth-Enabling Technique", Sec. 3.2, eq. (21).
    """

    def __init__(self, tau=1.0, trainable_tau=False, causal=False, **kwargs):
        super().__init__(**kwargs)
        options = eq21_options(tau, trainable_tau)
        self.tau, self.trainable_tau = options["tau"], options["trainable_tau"]
        self.causal = bool(causal)

    def build(self, input_shape):
        _checks.rank3(self, input_shape)
        if self.trainable_tau:
            self.tau_weight = self.add_weight(
                name="tau",
                shape=(),
                initializer=keras.initializers.Constant(self.tau),
                constraint=_UnitInterval(),
                trainable=True,
            )
        self.built = True

    def call(self, inputs, mask=None, memory=None, memory_mask=None):
        _checks.rank3(self, inputs.shape)
        _checks.token_mask(self, mask, inputs.shape)
        if memory is not None and not self.causal:
            raise ValueError(f"A memory of earlier positions needs causal=True. Received: causal={self.causal}")
        mean = token_mean(inputs, mask=mask, causal=self.causal, memory=memory, memory_mask=memory_mask)
        tau = self.tau_weight if self.trainable_tau else self.tau
        # eq. (21): Y = (I - tau * Pi_1) X, with Pi_1 X = 1 * mean^T.
        return inputs - ops.cast(tau, inputs.dtype) * mean

    def get_config(self):
        return {
            **super().get_config(),
            "tau": self.tau,
            "trainable_tau": self.trainable_tau,
            "causal": self.causal,
        }


def token_mean(x, mask=None, causal=False, memory=None, memory_mask=None):
    """Mean over the token axis of `x` `[batch, tokens, dim]`, kept as `[b, 1 or t, d]`.

    Only real tokens (`mask` True) count; `causal=True` gives the running
    mean over positions `0..t` instead, one row per position, to which a
    causal `memory` `[b, m, d]` of earlier positions adds its rows where
    `memory_mask` is True (one masked sum, not a running sum over m). Where fewer
    than two real tokens count, the mean is 0. Half-precision
    inputs are averaged in float32 (a running sum in bfloat16 loses digits
    within a few hundred tokens) and cast back.
    """
    dtype = keras.backend.standardize_dtype(x.dtype)
    if dtype in ("float16", "bfloat16"):
        x = ops.cast(x, "float32")
    if mask is None and not causal and x.shape[1] is not None:
        # Every token counts and the count is static: one reduction, the common case (the ViT)
        # and a measurable share of a small model's step on TensorFlow without XLA.
        mean = ops.mean(x, axis=1, keepdims=True) if x.shape[1] >= 2 else ops.zeros_like(x[:, :1])
        return ops.cast(mean, dtype)
    if mask is None:
        weights = ops.ones_like(x[:, :, :1])
    else:
        weights = ops.cast(mask, x.dtype)[:, :, None]
        x = x * weights
    if causal:
        total, count = ops.cumsum(x, axis=1), ops.cumsum(weights, axis=1)
        if memory is not None:
            memory_total, memory_count = _memory_sum(memory, memory_mask, x.dtype)
            total, count = total + memory_total, count + memory_count
    else:
        total = ops.sum(x, axis=1, keepdims=True)
        count = ops.sum(weights, axis=1, keepdims=True)
    # A context of fewer than two real tokens gets mean 0, so de-escalation leaves it as is: with
    # one token there is no common component to remove, only the token itself, and removing it
    # (tau = 1) would hand the next LayerNorm an exact zero vector, whose Jacobian is
    # 1/sqrt(epsilon) ~ 316. Position 0 of a causal stack hits this at every block, and a deep
    # stack's gradient overflows at the first step (measured: NaN from step 1 at depth >= 8).
    mean = ops.where(count >= 2.0, total / ops.maximum(count, 1.0), 0.0)
    return ops.cast(mean, dtype)


def _memory_sum(memory, memory_mask, dtype):
    """Sum and count of the filled memory rows, `[b, 1, d]` and `[b or 1, 1, 1]`."""
    memory = ops.cast(memory, dtype)
    if memory_mask is None:
        return ops.sum(memory, axis=1, keepdims=True), float(memory.shape[1])
    weights = ops.cast(memory_mask, dtype)
    weights = weights[None, :, None] if len(weights.shape) == 1 else weights[:, :, None]
    return ops.sum(memory * weights, axis=1, keepdims=True), ops.sum(weights, axis=1, keepdims=True)
