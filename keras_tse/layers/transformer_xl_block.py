import functools

import keras
from keras import ops

from keras_tse import _checks
from keras_tse.layers.relative_attention import RelativeAttention, filled_slots
from keras_tse.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class TransformerXLBlock(TransformerBlock):
    """A Transformer-XL layer: relative attention over a memory of the previous segment, then an FFN.

    Segment-level recurrence (Dai et al. 2019, Sec. 3.2): the block keeps its
    last `mem_len` input states in a non-trainable variable `memory`
    `[batch_size, mem_len, hidden]`; a call attends over that memory plus the
    segment (causally, relative positions), then stores its own inputs as the
    newest memory. The memory is read through `stop_gradient`, so no gradient
    crosses a segment boundary, and it is kept across calls, `fit` batches
    included: the batch size is therefore fixed at build time, and the stream
    of segments must come in order (`reset_memory()` empties it).

    `norm` picks the layout, with `Y = RelAttn(X, memory)`:

    - `"post"` (the reference's default): `Y2 = LN(X + Y)`,
      `out = LN(Y2 + FFN(Y2))` (Algorithm 1);
    - `"pre"` (the reference's `pre_lnorm`): attention reads `LN` of memory
      and segment, `Y2 = X + RelAttn(LN(X), LN(memory))`,
      `out = Y2 + FFN(LN(Y2))` (eq. 19);
    - `"deepnorm"` (DeepNet, Wang et al. 2022): post-norm with each residual
      multiplied by `residual_scale` (alpha) and the value, output and FFN
      kernels drawn Xavier-normal with gain `init_gain` (beta);
    - `"rezero"` (Bachlechner et al. 2021): no LayerNorm,
      `Y2 = X + a * RelAttn(X, memory)`, `out = Y2 + a * FFN(Y2)`, scalar `a` = 0
      at initialisation;
    - `"layerscale"` (CaiT, Touvron et al. 2021): `"pre"` with per-channel
      scales, initialised at `layer_scale_init`, on both branches;
    - `"deescalate"`: post-norm with `DeEscalation(tau)` (eq. 21) on the FFN
      input `Y2`, the paper's placement for this model (Sec. 3.4), in its
      causal form: position `t` subtracts `tau` times the mean of `Y2` over the
      memory and positions `<= t`. The `Y2` of the memory positions are kept in
      a second variable `ffn_input_memory`, so the mean covers the same context
      as the attention and reads no later token. `deescalate_at="output"`
      moves it to the block output (the ViT's placement, Sec. 3.3; memory
      variable `output_memory`), and `deescalate_memory=False` takes the
      causal mean over the segment's positions `<= t` only, not the memory.
    - `"deescalate_leaky_global"`: **leaks future tokens; for measurement
      only.** The literal eq. (21), `Y2 - tau * mean(Y2)` with the mean over
      all `T` positions of the segment (no memory), so position `t` reads
      positions after `t` through the mean and the next-token loss can fall
      for a reason that is not language modelling. It exists to measure how
      much of a training curve that leak explains; never use it to
      report a perplexity.

    Args:
        num_heads: int, number of heads.
        ffn_dim: int, inner width of the FFN.
        head_dim: int, width of each head. Defaults to `None`, meaning
            `hidden // num_heads`.
        mem_len: int >= 0, memory length in positions. `0` turns the
            recurrence off (and lifts the fixed batch size). Defaults to `0`.
        norm: one of `"post"`, `"pre"`, `"deescalate"`, `"deepnorm"`,
            `"rezero"`, `"layerscale"`. Defaults to `"post"`.
        tau: float in [0, 1], de-escalation strength. Defaults to `1.0`.
        trainable_tau: bool, whether `tau` is learned. Defaults to `False`.
        deescalate_at: `"pre_ffn"` (Sec. 3.4, the default) or `"output"`,
            where `"deescalate"` applies eq. (21).
        deescalate_memory: bool, whether the causal mean of `"deescalate"`
            also covers the memory positions. Defaults to `True`.
        residual_scale: float > 0, DeepNet's alpha (`"deepnorm"` only).
            Defaults to `1.0`.
        init_gain: float > 0, DeepNet's beta (`"deepnorm"` only). Defaults to
            `1.0`.
        layer_scale_init: float > 0, LayerScale's initial value
            (`"layerscale"` only). Defaults to `0.1`.
        dropout: float in [0, 1), on the branch outputs and FFN hidden layer.
        attention_dropout: float in [0, 1), on P.
        layer_norm_epsilon: float. Defaults to `1e-5`.
        initializer: weight scheme of every kernel and bias, one of
            `keras_tse.layers.initializers.INITIALIZERS`. Defaults to
            `"transformer_xl"`: `N(0, 0.02)` kernels, zero biases, the
            reference's.
        kernel_initializer: optional Keras initializer overriding the
            scheme's kernels. Defaults to `None`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `[batch, T, hidden]`.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return P `[batch, heads, T, M + T]`.

    Returns:
        `[batch, T, hidden]`, or `(outputs, P)`.

    Reference:
        Dai et al. 2019, Secs. 3.2-3.3; Yu & Zhang, Sec. 3.4 and eq. (21).
    """

    def __init__(
        self,
        num_heads,
        ffn_dim,
        head_dim=None,
        mem_len=0,
        norm="post",
        deescalate_at="pre_ffn",
        deescalate_memory=True,
        initializer="transformer_xl",
        kernel_initializer=None,
        **kwargs,
    ):
        causal = kwargs.pop("causal", True)
        if causal is not True:
            raise ValueError(f"A Transformer-XL block is always causal. Received: causal={causal!r}")
        super().__init__(
            num_heads,
            ffn_dim,
            head_dim=head_dim,
            norm=norm,
            causal=True,
            initializer=initializer,
            kernel_initializer=kernel_initializer,
            deescalate_at=deescalate_at,
            **kwargs,
        )
        self.mem_len = _checks.non_negative_int("mem_len", mem_len)
        self.deescalate_memory = bool(deescalate_memory)
        if not self.layout.causal_mean and self.deescalate_at != "pre_ffn":
            raise ValueError(
                "The leaky global mean is measured at the FFN input only. "
                f"Received: norm={self.norm!r}, deescalate_at={deescalate_at!r}"
            )

    def _make_attention(self):
        return RelativeAttention(
            self.num_heads,
            self._head_dim,
            attention_dropout=self.attention_dropout,
            initializer=self.initializer,
            kernel_initializer=self.kernel_initializer,
            centred=self.layout.centred_attention,
            sub_norm=self.layout.sub_norm,
            layer_norm_epsilon=self.layer_norm_epsilon,
            sigma_reparam=self.layout.sigma_reparam,
            dtype=self.dtype_policy,
            name="self_attention",
        )

    def build(self, input_shape):
        super().build(input_shape)
        self.deescalation_memory = None
        if self.mem_len:
            self._build_memory(input_shape)

    def _build_memory(self, input_shape):
        batch, hidden = input_shape[0], input_shape[-1]
        if batch is None:
            raise ValueError(
                f"{self.name}: a memory (mem_len={self.mem_len}) needs a fixed batch size; build the model "
                f"with `keras.Input(..., batch_size=...)`. Received: input_shape={tuple(input_shape)}"
            )
        state = dict(initializer="zeros", trainable=False)
        self.memory = self.add_weight(name="memory", shape=(batch, self.mem_len, hidden), **state)
        self.memory_length = self.add_weight(name="memory_length", shape=(), dtype="int32", **state)
        if self._remembers_deescalation_input():
            self.deescalation_memory = self.add_weight(
                name="ffn_input_memory" if self.deescalate_at == "pre_ffn" else "output_memory",
                shape=(batch, self.mem_len, hidden),
                **state,
            )

    def _remembers_deescalation_input(self):
        """Causal eq. (21) over memory and segment keeps the memory positions' inputs to eq. (21)."""
        return self.layout.deescalates and self.layout.causal_mean and self.deescalate_memory and self.mem_len > 0

    def reset_memory(self):
        """Forget the cached states (the next segment starts a new context)."""
        if self.mem_len:
            for variable in self._memory_variables():
                variable.assign(ops.zeros(variable.shape, variable.dtype))

    def reorder_memory(self, rows):
        """Sequence `i`'s cached states become sequence `rows[i]`'s (the filled length is every sequence's)."""
        if self.mem_len:
            for variable in self._memory_variables():
                if len(variable.shape):
                    variable.assign(ops.take(variable, ops.convert_to_tensor(rows, "int32"), axis=0))

    def _memory_variables(self):
        variables = [self.memory, self.memory_length]
        return variables + ([self.deescalation_memory] if self.deescalation_memory is not None else [])

    def call(self, inputs, training=None, return_attention_scores=False):
        memory, filled = self._read_memory(inputs)
        if memory is not None and self.layout.body == "pre":  # the reference's pre_lnorm: LN of memory too
            memory = self._normalize(self.attention_norm, memory)
        steps = self._body_steps(
            inputs, training, return_attention_scores, self._deescalation(filled), memory=memory, memory_length=filled
        )
        if self.mem_len:
            self._remember(inputs, steps, filled)
        return (steps["outputs"], steps["scores"]) if return_attention_scores else steps["outputs"]

    def _deescalation(self, filled):
        """Eq. (21) as the layout takes it: causal over memory and segment (or the segment alone), the
        leaky global mean, or `None` for a layout that does not de-escalate."""
        if self.de_escalation is None or self.deescalation_memory is None:
            return self.de_escalation
        memory = _snapshot(self.deescalation_memory, self.compute_dtype)
        return functools.partial(self.de_escalation, memory=memory, memory_mask=filled_slots(self.mem_len, filled))

    def _remember(self, inputs, steps, filled):
        """The newest `mem_len` inputs (and, de-escalated over the memory, the inputs of eq. (21): `Y2` at
        the FFN input, `Y4` at the output) as memory."""
        self.memory.assign(self._newest(self.memory, inputs))
        self.memory_length.assign(ops.minimum(filled + inputs.shape[1], self.mem_len))
        if self.deescalation_memory is not None:
            placed = steps["eq21_inputs"][self.deescalate_at]
            self.deescalation_memory.assign(self._newest(self.deescalation_memory, placed))

    def _read_memory(self, inputs):
        if not self.mem_len:
            return None, None
        if inputs.shape[0] is not None and inputs.shape[0] != self.memory.shape[0]:
            raise ValueError(
                f"{self.name} keeps a memory for batch size {self.memory.shape[0]}; every batch must have "
                f"that size (drop the remainder). Received: inputs.shape={tuple(inputs.shape)}"
            )
        return _snapshot(self.memory, inputs.dtype), ops.convert_to_tensor(self.memory_length)

    def _newest(self, memory, states):
        """The last `mem_len` positions of memory followed by `states`, without gradient."""
        joined = ops.concatenate([ops.cast(memory, states.dtype), states], axis=1)[:, -self.mem_len :]
        return ops.cast(ops.stop_gradient(joined), memory.dtype)

    def compute_output_spec(self, inputs, training=None, return_attention_scores=False):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        keys = inputs.shape[1] + self.mem_len
        return outputs, keras.KerasTensor((inputs.shape[0], self.num_heads, inputs.shape[1], keys), "float32")

    def get_config(self):
        config = super().get_config()
        config.pop("causal")
        return {**config, "mem_len": self.mem_len, "deescalate_memory": self.deescalate_memory}


def _snapshot(variable, dtype):
    """The variable's value now, without gradient, and a copy: the call later overwrites the
    variable in place (PyTorch would then find a tensor saved for the backward pass modified)."""
    return ops.stop_gradient(ops.copy(ops.cast(variable, dtype)))
