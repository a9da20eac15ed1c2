import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_tse")
class SigmaReparamDense(keras.layers.Dense):
    """A Dense layer whose kernel is sigma-reparametrised (Zhai et al., ICML 2023, "Stabilizing Transformer
    Training by Preventing Attention Entropy Collapse"): `W_hat = (gamma / sigma(W)) W`, `sigma(W)` the
    kernel's spectral norm and `gamma` one learned scalar.

    The paper bounds the attention entropy from below by a function that falls exponentially in the spectral norm
    of `W_K W_Q^T`; a learned `gamma` over the normalised kernel lets that norm grow only as the loss asks. As in
    the authors' code (apple/ml-sigma-reparam): `sigma(W)` is one power-iteration step a call from the stored
    vector `u` (`v = K^T u / |K^T u|`, `u' = K v / |K v|`, `sigma = u'^T K v`, the gradient through `K` only),
    `u` kept only while training; at build, `u` is the kernel's leading singular vector and `gamma` its largest
    singular value, so the layer starts as the plain Dense layer of the same kernel. The power iteration runs in
    the variables' dtype (float32 under a mixed policy), as the authors' float32 wrapper does, and the kernel it
    gives is cast to the compute dtype.

    Keras's quantization and LoRA rewrite the kernel a Dense layer multiplies by: they are refused.

    Args: those of `keras.layers.Dense`.

    Weights: `kernel`, `bias` (if `use_bias`), `gamma` (a trainable scalar), `u` (non-trainable, `[input dim]`).
    """

    def __init__(self, units, **kwargs):
        kwargs.setdefault("autocast", False)  # the power iteration reads the float32 kernel
        super().__init__(units, **kwargs)

    def build(self, input_shape):
        super().build(input_shape)
        left, singular, _ = ops.svd(ops.cast(self.kernel, "float32"), full_matrices=False)
        self.u = self.add_weight(
            name="u", shape=(self.kernel.shape[0],), initializer=_constant(left[:, 0]), trainable=False
        )
        self.gamma = self.add_weight(name="gamma", shape=(), initializer=_constant(singular[0]))

    def effective_kernel(self, training=False):
        """`(gamma / sigma(W)) W`, `sigma` from one power-iteration step; `u` moves on only while training."""
        kernel = ops.convert_to_tensor(self.kernel)
        fixed = ops.stop_gradient(kernel)
        v = _unit(ops.matmul(ops.stop_gradient(ops.convert_to_tensor(self.u)), fixed))
        u = _unit(ops.matmul(fixed, v))
        if training:
            self.u.assign(u)
        sigma = ops.sum(u * ops.matmul(kernel, v))
        return ops.convert_to_tensor(self.gamma) * kernel / sigma

    def call(self, inputs, training=None):
        outputs = ops.matmul(inputs, ops.cast(self.effective_kernel(training), self.compute_dtype))
        if self.use_bias:
            outputs = ops.add(outputs, ops.cast(self.bias, self.compute_dtype))
        return outputs if self.activation is None else self.activation(outputs)

    @property
    def variable_serialization_spec(self):
        """Dense's saved variables, then `gamma` and `u` (Keras's Dense saves its own by this list)."""
        return {None: [*super().variable_serialization_spec[None], "gamma", "u"]}

    def enable_lora(self, *args, **kwargs):
        raise ValueError(
            f"{self.name}: a sigma-reparametrised kernel takes no LoRA adapters (the adapted kernel would be "
            "normalised by a spectral norm it does not have). Received: enable_lora on SigmaReparamDense"
        )

    def quantize(self, mode=None, *args, **kwargs):
        raise ValueError(
            f"{self.name}: a sigma-reparametrised kernel is computed at every call and cannot be stored "
            f"quantized. Received: quantize({mode!r}) on SigmaReparamDense"
        )


def _unit(x):
    return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x))), 1e-12)


def _constant(value):
    """An initializer giving `value` (a tensor computed at build), whatever the shape asked (the same)."""
    return lambda shape, dtype=None: ops.cast(ops.reshape(value, shape), dtype or "float32")
