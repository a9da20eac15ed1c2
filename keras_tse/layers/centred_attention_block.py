import keras

from keras_tse.layers.centred_multi_head_attention import CentredMultiHeadAttention
from keras_tse.layers.wrapped_block import WrappedBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class CentredAttentionBlock(WrappedBlock):
    """A bidirectional Transformer block someone else wrote, its self-attention centred: each of its Keras
    `MultiHeadAttention` layers computes `(P - U) V` (`CentredMultiHeadAttention`), the place
    `norm="centred_attention"` acts in keras_tse's own blocks, every weight and the block's own code kept.
    `keras_tse.deescalate(model, norm="centred_attention")` wraps a model's blocks so.

    The attention layers are found among the block's own layers (KerasHub's `TransformerEncoder` holds one, ViT's
    `ViTEncoderBlock` one) and take the centred class once the block is built, the way a loaded block is rebuilt
    from its configuration; a block with none is refused in one line.

    Args:
        block: the block, a `keras.layers.Layer` taking `[batch, tokens, hidden]`.
    """

    def build(self, input_shape):
        super().build(input_shape)
        attentions = centrable_attentions(self.block)
        if not attentions:
            raise ValueError(
                "CentredAttentionBlock centres Keras's `MultiHeadAttention` inside a block, and block "
                f"{self.block.name!r} ({type(self.block).__name__}) holds none."
            )
        for attention in attentions:  # the same weights and configuration: only `_compute_attention` differs
            attention.__class__ = CentredMultiHeadAttention


def centrable_attentions(block):
    """The layers of `block` (itself not among them) that are Keras's `MultiHeadAttention` exactly or centred
    already: a subclass (KerasHub's cached attention, DeBERTa's) computes its own way."""
    kinds = (keras.layers.MultiHeadAttention, CentredMultiHeadAttention)
    return [layer for layer in block._flatten_layers(include_self=False) if type(layer) in kinds]
