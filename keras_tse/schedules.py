"""Learning-rate warmup in front of any schedule: linear from `target / warmup_steps` to `target` over
the first `warmup_steps` optimizer steps, then the schedule (Goyal et al. 2017's gradual warmup; the
remedy for post-norm of Xiong et al. 2020). Keras warms up its cosine decay itself
(`CosineDecay(warmup_target=, warmup_steps=)`); this is for the others (the paper's step decay, a
constant rate). Registered, so a checkpoint's optimizer loads with it.
"""

import keras
from keras import ops

from keras_tse import _checks

__all__ = ["LinearWarmup"]


@keras.saving.register_keras_serializable(package="keras_tse")
class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """`target * (step + 1) / warmup_steps` for `step < warmup_steps`, then `after(step)`.

    Args:
        after: the schedule that follows (a `LearningRateSchedule`, or a float for a constant rate).
        warmup_steps: int > 0.
        target: the rate the warmup reaches: `after(warmup_steps)`'s level. Defaults to `after(0)`.
    """

    def __init__(self, after, warmup_steps, target=None):
        self.after = after
        self.warmup_steps = _checks.positive_int("warmup_steps", warmup_steps)
        self.target = float(target if target is not None else (after if isinstance(after, (int, float)) else after(0)))

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warm = self.target * (step + 1.0) / self.warmup_steps
        rest = self.after(step) if callable(self.after) else ops.convert_to_tensor(self.after, "float32")
        return ops.where(step < self.warmup_steps, warm, ops.cast(rest, "float32"))

    def get_config(self):
        after = keras.saving.serialize_keras_object(self.after) if callable(self.after) else self.after
        return {"after": after, "warmup_steps": self.warmup_steps, "target": self.target}

    @classmethod
    def from_config(cls, config):
        after = config["after"]
        if isinstance(after, dict):
            after = keras.saving.deserialize_keras_object(after)
        return cls(after, config["warmup_steps"], config["target"])
