import keras
import numpy as np
from keras import ops

from keras_tse import _checks


@keras.saving.register_keras_serializable(package="keras_tse")
class ScannedBlocks(keras.layers.Layer):
    """`depth` copies of one Transformer block run as one loop, `keras.ops.scan` over their weights
    stacked along a leading depth axis.

    The stack computes what `depth` separate blocks of the same configuration compute, but a compiler
    sees one block: the 80-block ViT's train step compiles several times faster on JAX
    (`recipes/lab/scan_compile_time.py`; zoo/speed.md has the measurement). Each block's weights are
    drawn as that block's own would be; `from_blocks` stacks the weights of built blocks instead (a
    trained unrolled model's, for example).

    What a block keeps from call to call while training (sigma-reparam's power-iteration vector) is kept, each
    block's row of the stack its own. No dropout (its seed generator would advance once for the whole stack)
    and no memory (Transformer-XL's, read and written within a call): it is for the ViT's blocks.

    Args:
        block: a built or unbuilt block layer (`PostNormBlock`, `PreNormBlock`, `DeepNormBlock`,
            `ReZeroBlock`, `LayerScaleBlock`), or its serialized config. Used as the template: its
            own weights are not the stack's.
        depth: int, the number of blocks.
        initial_stack: `None` (draw the weights), or one NumPy array per template variable, stacked
            along the depth axis (`from_blocks` passes them). Not part of the config: the weights
            are saved.

    Call arguments:
        inputs: tokens `[batch, tokens, hidden]`.
        return_block_outputs: bool; `True` returns every block's output, `[depth, batch, tokens,
            hidden]`, first block first (the per-block probes use it). Defaults to `False`: the
            last block's output.

    Example:

    >>> blocks = keras_tse.layers.ScannedBlocks(keras_tse.layers.PostNormBlock(8, 384, deescalate="output"), 80)
    >>> model = keras_tse.zoo.vit(depth=80, norm="deescalate", scan=True)  # the same, inside the zoo's ViT
    """

    def __init__(self, block, depth, initial_stack=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(block, keras.layers.Layer):
            block = keras.saving.deserialize_keras_object(block)
        rates = {k: v for k, v in block.get_config().items() if k.endswith("dropout") and v}
        if rates:
            raise ValueError(
                "ScannedBlocks runs blocks without dropout (its random state advances per call). "
                f"Received: a block with {', '.join(f'{k}={v}' for k, v in rates.items())}"
            )
        object.__setattr__(self, "template", block)  # not tracked: its weights are not the stack's
        self.depth = _checks.positive_int("depth", depth)
        self.initial_stack = initial_stack

    @classmethod
    def from_blocks(cls, blocks, **kwargs):
        """A stack holding the weights of `blocks`, built blocks of one configuration, in order."""
        return cls(blocks[0], len(blocks), initial_stack=_stacked(blocks), **kwargs)

    def build(self, input_shape):
        if not self.template.built:
            self.template.build(input_shape)
        initial = self.initial_stack if self.initial_stack is not None else self._drawn(input_shape)
        self.stacked = [
            self.add_weight(
                shape=value.shape,
                initializer=keras.initializers.Constant(value),
                trainable=variable.trainable,
                # each block's own constraint, element-wise on the stack (a learned tau stays in [0, 1], eq. 21)
                constraint=variable.constraint,
                name=variable.path.split("/", 1)[1].replace("/", "_"),
            )
            for variable, value in zip(self.template.variables, initial)
        ]
        self.initial_stack = None  # held by the weights now

    def _drawn(self, input_shape):
        """Every block's weights drawn by its own initializers: `depth` fresh blocks of the template's
        configuration, built and stacked."""
        config = self.template.get_config()
        blocks = []
        for _ in range(self.depth):
            block = self.template.__class__.from_config(config)
            block.build(input_shape)
            blocks.append(block)
        return _stacked(blocks)

    def call(self, inputs, return_block_outputs=False, training=None):
        pairs = list(zip(self.stacked, self.template.variables))
        trainable = [w.value for w, v in pairs if v.trainable]
        frozen = [w for w, v in pairs if not v.trainable]
        keeps = bool(training) and bool(frozen) and not return_block_outputs

        def step(carry, weights):
            tokens = carry[0] if keeps else carry
            outputs, kept = self.template.stateless_call(list(weights[0]), list(weights[1]), tokens, training=training)
            if not keeps:
                return outputs, outputs if return_block_outputs else None
            return (outputs, carry[1] + 1, *_rows_set(carry[2:], carry[1], kept)), None

        # what a block keeps from call to call while training (sigma-reparam's `u`) rides in the loop's carry, the
        # whole stack, each block writing its own row (TensorFlow's scan stacks only outputs shaped as the carry)
        init = (inputs, ops.convert_to_tensor(0, "int32"), *(w.value for w in frozen)) if keeps else inputs
        carry, every = ops.scan(step, init, (trainable, [w.value for w in frozen]))
        if not keeps:
            return every if return_block_outputs else carry
        for variable, value in zip(frozen, carry[2:]):
            variable.assign(value)
        return carry[0]

    def get_config(self):
        return {
            **super().get_config(),
            "block": keras.saving.serialize_keras_object(self.template),
            "depth": self.depth,
        }


def _rows_set(stacks, index, rows):
    """Each stack with its row `index` replaced by the row given (state, not differentiated: TensorFlow has no
    gradient for the update)."""
    return [
        ops.stop_gradient(
            ops.slice_update(
                stack, (index, *[0] * (len(stack.shape) - 1)), ops.expand_dims(ops.cast(row, stack.dtype), 0)
            )
        )
        for stack, row in zip(stacks, rows)
    ]


def _stacked(blocks):
    """Per variable of the first block, its values in every block stacked along a new first axis,
    in the first block's variable order (variables matched by their path inside the block)."""
    names = [v.path.split("/", 1)[1] for v in blocks[0].variables]
    per_block = [{v.path.split("/", 1)[1]: v for v in block.variables} for block in blocks]
    return [np.stack([ops.convert_to_numpy(weights[name]) for weights in per_block]) for name in names]
