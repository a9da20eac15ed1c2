import keras
from keras import ops

from keras_tse import _checks
from keras_tse.layers import initializers


@keras.saving.register_keras_serializable(package="keras_tse")
class PatchEmbedding(keras.layers.Layer):
    """ViT input: image patches to tokens, plus a class token and learned positions.

    Cuts an image `[batch, size, size, channels]` into non-overlapping
    `patch_size x patch_size` patches, projects each linearly to `hidden_dim`
    (a strided convolution, as in timm and KerasHub), prepends a learned class
    token, and adds a learned position embedding per token (Dosovitskiy et
    al. 2020, eq. 1). The output has `1 + (size / patch_size)^2` tokens.

    Args:
        image_size: int, height and width of the (square) input images.
        patch_size: int, side of a patch; must divide `image_size`.
        hidden_dim: int, width of the tokens.
        use_class_token: bool, whether to prepend a class token. Defaults to
            `True`.
        initializer: scheme of the projection's kernel and bias, one of
            `keras_tse.layers.initializers.INITIALIZERS`; `"torch"` is
            `nn.Conv2d`'s default (fan_in = patch_size^2 * channels).
            Defaults to `"glorot"`.
        embedding_initializer: `"timm"` (class token N(0, 0.02), positions
            truncated N(0, 0.02), as timm and KerasHub) or `"vit_pytorch"`
            (both `torch.randn`, N(0, 1), as the paper's code). Defaults to
            `"timm"`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: images `[batch, image_size, image_size, channels]`.

    Returns:
        tokens `[batch, num_patches (+ 1), hidden_dim]`, class token first.

    Example:

    >>> PatchEmbedding(32, 4, 192)(np.zeros((2, 32, 32, 3))).shape  # (2, 65, 192)

    Reference:
        Dosovitskiy et al., "An Image is Worth 16x16 Words", ICLR 2021.
    """

    def __init__(
        self,
        image_size,
        patch_size,
        hidden_dim,
        use_class_token=True,
        initializer="glorot",
        embedding_initializer="timm",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.initializer = initializers.check(initializer)
        self.embedding_initializer = _checks.one_of(
            "embedding_initializer", embedding_initializer, initializers.EMBEDDING_INITIALIZERS
        )
        self.image_size = _checks.positive_int("image_size", image_size)
        self.patch_size = _checks.positive_int("patch_size", patch_size)
        self.hidden_dim = _checks.positive_int("hidden_dim", hidden_dim)
        self.use_class_token = bool(use_class_token)
        if image_size % patch_size:
            raise ValueError(
                f"`patch_size` must divide `image_size`. Received: image_size={image_size}, patch_size={patch_size}"
            )
        self.num_patches = (image_size // patch_size) ** 2
        self.num_tokens = self.num_patches + int(self.use_class_token)

    def build(self, input_shape):
        if len(input_shape) != 4 or tuple(input_shape[1:3]) != (self.image_size, self.image_size):
            raise ValueError(
                f"PatchEmbedding expects images [batch, {self.image_size}, {self.image_size}, channels]. "
                f"Received: inputs.shape={tuple(input_shape)}"
            )
        self.projection = keras.layers.Conv2D(
            self.hidden_dim,
            self.patch_size,
            strides=self.patch_size,
            kernel_initializer=initializers.kernel_initializer(self.initializer),
            bias_initializer=initializers.bias_initializer(self.initializer, self.patch_size**2 * input_shape[-1]),
            dtype=self.dtype_policy,
            name="projection",
        )
        class_initializer, position_initializer = initializers.embeddings(self.embedding_initializer)
        self.projection.build(input_shape)
        if self.use_class_token:
            self.class_token = self.add_weight(
                name="class_token",
                shape=(1, 1, self.hidden_dim),
                initializer=class_initializer,
            )
        self.position_embedding = self.add_weight(
            name="position_embedding",
            shape=(1, self.num_tokens, self.hidden_dim),
            initializer=position_initializer,
        )
        self.built = True

    def call(self, inputs):
        patches = self.projection(inputs)  # [B, H/p, W/p, D]
        batch = ops.shape(patches)[0]
        tokens = ops.reshape(patches, (batch, self.num_patches, self.hidden_dim))  # [B, N, D], row-major
        if self.use_class_token:
            cls = ops.broadcast_to(ops.cast(self.class_token, tokens.dtype), (batch, 1, self.hidden_dim))
            tokens = ops.concatenate([cls, tokens], axis=1)
        return tokens + ops.cast(self.position_embedding, tokens.dtype)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_tokens, self.hidden_dim)

    def get_config(self):
        return {
            **super().get_config(),
            "image_size": self.image_size,
            "patch_size": self.patch_size,
            "hidden_dim": self.hidden_dim,
            "use_class_token": self.use_class_token,
            "initializer": self.initializer,
            "embedding_initializer": self.embedding_initializer,
        }
