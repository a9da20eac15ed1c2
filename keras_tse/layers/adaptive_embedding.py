import keras
from keras import ops

from keras_tse import _checks
from keras_tse.layers import initializers


@keras.saving.register_keras_serializable(package="keras_tse")
class AdaptiveEmbedding(keras.layers.Layer):
    """Adaptive input embedding and its tied adaptive log-softmax, in one layer.

    The vocabulary, ordered by frequency, is cut at `cutoffs` into a head
    (the `cutoffs[0]` most frequent words) and tail clusters. Cluster `i` has
    an embedding table `[size_i, embedding_dim // div_val**i]` and, when that
    width differs from `hidden_dim`, a projection to `hidden_dim` (Baevski &
    Auli 2019). Called on token ids, the layer looks each id up in its
    cluster and scales by `sqrt(hidden_dim)`, as Transformer-XL does.

    Called with `reverse=True` on hidden states, it returns the adaptive
    softmax's log-probabilities over the whole vocabulary (Grave et al. 2017),
    with the same tables and projections (tied weights, as in Transformer-XL's
    WikiText-103 configurations): the head scores its words plus one logit per
    tail cluster; a tail word's log-probability is its cluster's head
    log-probability plus its log-softmax within the cluster. The exponentials
    sum to 1 over the vocabulary. Each cluster adds an output bias.

    One layer holding both directions (like KerasHub's ReversibleEmbedding)
    keeps the tying inside one set of weights, so it survives saving.

    With `div_val=1` (the WikiText-103 base model) every table is
    `hidden_dim` wide and there is no projection: the parameters are one
    `vocab_size x hidden_dim` embedding, the biases, and the cluster logits.

    Args:
        vocab_size: int, number of tokens.
        hidden_dim: int, model width.
        cutoffs: increasing ints in `(0, vocab_size)`, the cluster bounds.
            Defaults to `()`, a plain tied softmax.
        div_val: int >= 1, width divisor from one cluster to the next.
            Defaults to `1`.
        embedding_dim: int, width of the head table. Defaults to `None`,
            meaning `hidden_dim`.
        initializer: weight scheme, one of
            `keras_tse.layers.initializers.INITIALIZERS`. Defaults to
            `"transformer_xl"`: tables `N(0, 0.02)`, projections `N(0, 0.01)`,
            the reference's (`"torch"`: tables `N(0, 1)` as `nn.Embedding`).
        embeddings_initializer: optional Keras initializer overriding the
            scheme's tables. Defaults to `None`.
        projection_initializer: optional Keras initializer overriding the
            scheme's projections. Defaults to `None`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: int ids `[batch, T]` in `[0, vocab_size)` (an id outside
            embeds to zeros: inside a compiled step there is no raising), or
            hidden states `[batch, T, hidden]` with `reverse=True`.
        reverse: bool, whether to compute log-probabilities. Defaults to
            `False`.

    Returns:
        `[batch, T, hidden]` embeddings, or float32 log-probabilities
        `[batch, T, vocab_size]`.

    Reference:
        Baevski & Auli 2019; Grave et al. 2017; Dai et al. 2019, Sec. 4.
    """

    def __init__(
        self,
        vocab_size,
        hidden_dim,
        cutoffs=(),
        div_val=1,
        embedding_dim=None,
        initializer="transformer_xl",
        embeddings_initializer=None,
        projection_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = _checks.positive_int("vocab_size", vocab_size)
        self.hidden_dim = _checks.positive_int("hidden_dim", hidden_dim)
        self.cutoffs = _check_cutoffs(cutoffs, vocab_size)
        self.div_val = _checks.positive_int("div_val", div_val)
        self.embedding_dim = _checks.positive_int("embedding_dim", embedding_dim or hidden_dim)
        widths = [self.embedding_dim // self.div_val**i for i in range(len(self.cutoffs) + 1)]
        if min(widths) < 1:
            raise ValueError(
                f"embedding_dim // div_val**i must stay >= 1 for each of the {len(widths)} clusters. "
                f"Received: embedding_dim={self.embedding_dim}, div_val={div_val}, cutoffs={self.cutoffs}"
            )
        self.initializer = initializers.check(initializer)
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or initializers.embedding_table(initializer)
        )
        self.projection_initializer = keras.initializers.get(
            projection_initializer or initializers.projection(initializer)
        )

    @property
    def bounds(self):
        return (0, *self.cutoffs, self.vocab_size)

    def build(self, input_shape=None):
        self.tables, self.projections, self.biases = [], [], []
        for i, (low, high) in enumerate(zip(self.bounds[:-1], self.bounds[1:])):
            width = self.embedding_dim // self.div_val**i
            self.tables.append(
                self.add_weight(
                    name=f"embeddings_{i}",
                    shape=(high - low, width),
                    initializer=initializers.clone(self.embeddings_initializer),
                )
            )
            self.projections.append(
                None
                if width == self.hidden_dim
                else self.add_weight(
                    name=f"projection_{i}",
                    shape=(width, self.hidden_dim),
                    initializer=initializers.clone(self.projection_initializer),
                )
            )
            self.biases.append(self.add_weight(name=f"bias_{i}", shape=(high - low,), initializer="zeros"))
        if self.cutoffs:  # one head logit per tail cluster
            self.cluster_kernel = self.add_weight(
                name="cluster_kernel",
                shape=(len(self.cutoffs), self.embedding_dim),
                initializer=initializers.clone(self.embeddings_initializer),
            )
            self.cluster_bias = self.add_weight(name="cluster_bias", shape=(len(self.cutoffs),), initializer="zeros")
        self.built = True

    def call(self, inputs, reverse=False):
        return self._log_probabilities(inputs) if reverse else self._embed(inputs)

    def _embed(self, ids):
        ids = ops.cast(ids, "int32")
        total = None
        for low, high, table, projection in zip(self.bounds[:-1], self.bounds[1:], self.tables, self.projections):
            vectors = ops.take(table, ops.clip(ids - low, 0, high - low - 1), axis=0)
            if projection is not None:
                vectors = ops.matmul(vectors, projection)
            inside = ops.cast(ops.logical_and(ids >= low, ids < high), vectors.dtype)[..., None]
            total = vectors * inside if total is None else total + vectors * inside
        return total * ops.cast(self.hidden_dim**0.5, total.dtype)

    def _cluster_logits(self, hidden, i):
        projected = hidden if self.projections[i] is None else ops.matmul(hidden, ops.transpose(self.projections[i]))
        return ops.matmul(projected, ops.transpose(self.tables[i])) + self.biases[i], projected

    def _log_probabilities(self, hidden):
        shortlist, projected = self._cluster_logits(hidden, 0)
        if not self.cutoffs:
            return ops.log_softmax(ops.cast(shortlist, "float32"), axis=-1)
        clusters = ops.matmul(projected, ops.transpose(self.cluster_kernel)) + self.cluster_bias
        head = ops.log_softmax(ops.cast(ops.concatenate([shortlist, clusters], axis=-1), "float32"), axis=-1)
        head_size = self.cutoffs[0]
        parts = [head[..., :head_size]]
        for i in range(1, len(self.tables)):
            # log p(w) = log p(cluster i | h) + log p(w | cluster i, h)
            tail = ops.log_softmax(ops.cast(self._cluster_logits(hidden, i)[0], "float32"), axis=-1)
            parts.append(tail + head[..., head_size + i - 1 : head_size + i])
        return ops.concatenate(parts, axis=-1)

    def compute_output_spec(self, inputs, reverse=False):
        if reverse:
            return keras.KerasTensor((*inputs.shape[:-1], self.vocab_size), "float32")
        return keras.KerasTensor((*inputs.shape, self.hidden_dim), self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "hidden_dim": self.hidden_dim,
            "cutoffs": list(self.cutoffs),
            "div_val": self.div_val,
            "embedding_dim": self.embedding_dim,
            "initializer": self.initializer,
            "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            "projection_initializer": keras.initializers.serialize(self.projection_initializer),
        }


def _check_cutoffs(cutoffs, vocab_size):
    cutoffs = tuple(cutoffs)
    valid = all(_checks.is_integer(c) for c in cutoffs)
    cutoffs = tuple(int(c) for c in cutoffs) if valid else cutoffs
    valid = valid and all(a < b for a, b in zip((0, *cutoffs), (*cutoffs, vocab_size)))
    if not valid:
        raise ValueError(
            f"`cutoffs` must be increasing integers strictly between 0 and vocab_size={vocab_size}. "
            f"Received: cutoffs={cutoffs!r}"
        )
    return cutoffs
