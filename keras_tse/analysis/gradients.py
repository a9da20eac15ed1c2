"""The norm of the loss gradient with respect to each block's weights (Fig. 1, the depth study)."""

import keras
import numpy as np
from keras import ops


class _GradientNorms(keras.optimizers.SGD):
    """An optimizer that only records the squared norm of each variable's gradient (learning rate 0).

    Keras has no backend-neutral gradient call; `fit` computes gradients on every backend, and with
    `run_eagerly=True` they reach `apply` as concrete values.
    """

    def __init__(self):
        super().__init__(learning_rate=0.0)
        self.squared_norms = {}

    def apply(self, grads, trainable_variables=None):
        variables = trainable_variables if trainable_variables is not None else self._trainable_variables
        for grad, variable in zip(grads, variables):
            self.squared_norms[variable.path] = float(
                ops.convert_to_numpy(ops.sum(ops.square(ops.cast(grad, "float32"))))
            )
        return super().apply(grads, trainable_variables)


def block_gradient_norms(model, x, y, loss, block_names):
    """`||d loss / d W_block||` (Frobenius, all of the block's weights) for each name, on one batch.

    Works on a functional wrapper sharing `model`'s layers, so `model`'s own compile state and
    weights are left as they are (the recorder's learning rate is 0).
    """
    wrapper = keras.Model(model.inputs, model.outputs)
    recorder = _GradientNorms()
    wrapper.compile(recorder, loss, run_eagerly=True)
    wrapper.train_on_batch(x, y)
    return np.array(
        [
            np.sqrt(sum(v for path, v in recorder.squared_norms.items() if path.startswith(name + "/")))
            for name in block_names
        ]
    )
