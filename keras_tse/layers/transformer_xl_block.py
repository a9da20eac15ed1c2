import keras
from keras import ops

from keras_tse.layers import _checks
from keras_tse.layers._residual import residual_stream
from keras_tse.layers._transformer_block import TransformerBlock
from keras_tse.layers.de_escalation import DeEscalation
from keras_tse.layers.relative_attention import TXL_INITIALIZER, RelativeAttention, filled_slots

NORMS = ("post", "pre", "deescalate")


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
    - `"deescalate"`: post-norm with `DeEscalation(tau)` (eq. 21) on the FFN
      input `Y2`, the paper's placement for this model (Sec. 3.4), in its
      causal form: position `t` subtracts `tau` times the mean of `Y2` over the
      memory and positions `<= t`. The `Y2` of the memory positions are kept in
      a second variable `ffn_input_memory`, so the mean covers the same context
      as the attention and reads no later token.

    Args:
        num_heads: int, number of heads.
        ffn_dim: int, inner width of the FFN.
        head_dim: int, width of each head. Defaults to `None`, meaning
            `hidden // num_heads`.
        mem_len: int >= 0, memory length in positions. `0` turns the
            recurrence off (and lifts the fixed batch size). Defaults to `0`.
        norm: `"post"`, `"pre"` or `"deescalate"`. Defaults to `"post"`.
        tau: float in [0, 1], de-escalation strength. Defaults to `1.0`.
        trainable_tau: bool, whether `tau` is learned. Defaults to `False`.
        dropout: float in [0, 1), on the branch outputs and FFN hidden layer.
        attention_dropout: float in [0, 1), on P.
        layer_norm_epsilon: float. Defaults to `1e-5`.
        kernel_initializer: initializer of every kernel. Defaults to
            `N(0, 0.02)`, the reference's.
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

    def __init__(self, num_heads, ffn_dim, head_dim=None, mem_len=0, norm="post", tau=1.0, trainable_tau=False,
                 kernel_initializer=TXL_INITIALIZER, **kwargs):
        causal = kwargs.pop("causal", True)
        if causal is not True:
            raise ValueError(f"A Transformer-XL block is always causal. Received: causal={causal!r}")
        super().__init__(num_heads, ffn_dim, head_dim=head_dim, causal=True, kernel_initializer=kernel_initializer,
                         **kwargs)
        if not isinstance(mem_len, int) or isinstance(mem_len, bool) or mem_len < 0:
            raise ValueError(f"`mem_len` must be an integer >= 0. Received: mem_len={mem_len!r}")
        self.mem_len = mem_len
        self.norm = _checks.one_of("norm", norm, NORMS)
        self.tau = _checks.unit_interval("tau", tau)
        self.trainable_tau = bool(trainable_tau)

    def _make_attention(self):
        return RelativeAttention(
            self.num_heads,
            self._head_dim,
            attention_dropout=self.attention_dropout,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="self_attention",
        )

    def build(self, input_shape):
        _checks.rank3(self, input_shape)
        self._head_dim = self.head_dim or input_shape[-1] // self.num_heads
        super().build(input_shape)
        self.de_escalation = None
        if self.norm == "deescalate":
            self.de_escalation = DeEscalation(self.tau, trainable_tau=self.trainable_tau, causal=True,
                                              dtype=self.dtype_policy, name="de_escalation")
            self.de_escalation.build(input_shape)
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
        if self.norm == "deescalate":
            self.ffn_input_memory = self.add_weight(name="ffn_input_memory", shape=(batch, self.mem_len, hidden),
                                                    **state)

    def reset_memory(self):
        """Forget the cached states (the next segment starts a new context)."""
        if self.mem_len:
            for variable in self._memory_variables():
                variable.assign(ops.zeros(variable.shape, variable.dtype))

    def _memory_variables(self):
        variables = [self.memory, self.memory_length]
        return variables + ([self.ffn_input_memory] if self.norm == "deescalate" else [])

    def call(self, inputs, training=None, return_attention_scores=False):
        memory, filled = self._read_memory(inputs)
        if self.norm == "pre":
            inputs = residual_stream(inputs)  # XLA:CPU gradient in linear time (see _residual.py)
            normed_memory = None if memory is None else self.attention_norm(memory)
            attended, scores = self._attention(self.attention_norm(inputs), training, return_attention_scores,
                                               memory=normed_memory, memory_length=filled)
            y2 = inputs + attended  # eq. (19)
            outputs = y2 + self._feed_forward(self.ffn_norm(y2), training)
        else:
            attended, scores = self._attention(inputs, training, return_attention_scores, memory=memory,
                                               memory_length=filled)
            y2 = self.attention_norm(inputs + attended)  # Algorithm 1, steps 1-2
            ffn_input = y2
            if self.norm == "deescalate":
                ffn_input = self._deescalate(y2, filled)  # eq. (21) at the FFN input (Sec. 3.4)
            outputs = self.ffn_norm(ffn_input + self._feed_forward(ffn_input, training))  # steps 3-4
            if self.mem_len and self.norm == "deescalate":
                self.ffn_input_memory.assign(self._newest(self.ffn_input_memory, y2))
        if self.mem_len:
            self.memory.assign(self._newest(self.memory, inputs))
            self.memory_length.assign(ops.minimum(filled + inputs.shape[1], self.mem_len))
        return (outputs, scores) if return_attention_scores else outputs

    def _read_memory(self, inputs):
        if not self.mem_len:
            return None, None
        if inputs.shape[0] is not None and inputs.shape[0] != self.memory.shape[0]:
            raise ValueError(
                f"{self.name} keeps a memory for batch size {self.memory.shape[0]}; every batch must have "
                f"that size (drop the remainder). Received: inputs.shape={tuple(inputs.shape)}"
            )
        return _snapshot(self.memory, inputs.dtype), ops.convert_to_tensor(self.memory_length)

    def _deescalate(self, y2, filled):
        """Causal eq. (21) over memory + segment: the mean at `t` covers the filled memory and `<= t`."""
        if not self.mem_len:
            return self.de_escalation(y2)
        memory = _snapshot(self.ffn_input_memory, y2.dtype)
        segment = y2.shape[1]
        mask = ops.concatenate([filled_slots(self.mem_len, filled), ops.ones((segment,), "bool")], axis=0)
        mask = ops.broadcast_to(mask[None], (ops.shape(y2)[0], self.mem_len + segment))
        return self.de_escalation(ops.concatenate([memory, y2], axis=1), mask=mask)[:, self.mem_len:]

    def _newest(self, memory, states):
        """The last `mem_len` positions of memory followed by `states`, without gradient."""
        joined = ops.concatenate([ops.cast(memory, states.dtype), states], axis=1)[:, -self.mem_len:]
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
        return {**config, "mem_len": self.mem_len, "norm": self.norm, "tau": self.tau,
                "trainable_tau": self.trainable_tau}


def _snapshot(variable, dtype):
    """The variable's value now, without gradient, and a copy: the call later overwrites the
    variable in place (PyTorch would then find a tensor saved for the backward pass modified)."""
    return ops.stop_gradient(ops.copy(ops.cast(variable, dtype)))
