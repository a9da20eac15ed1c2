"""The optimizer and learning-rate schedule of every training run, from its settings (`TrainConfig`,
`LMTrainConfig`): Adam, or AdamW with weight decay; the paper's step decay (Sec. 3.3), cosine decay
(Transformer-XL's, Sec. 3.4) or a constant rate, each after an optional linear warmup; and Keras's own
gradient clipping, weight EMA and gradient accumulation. At their defaults the settings build the
optimizers the two recipes always had."""

import keras

from keras_tse.schedules import LinearWarmup


def learning_rate_schedule(config, total_steps):
    """`config`'s schedule over `total_steps` batches (with gradient accumulation, the optimizer counts
    batches too), after `config.warmup_steps` of linear warmup."""
    rate, warmup = config.learning_rate, config.warmup_steps
    if config.schedule == "cosine":  # Keras's cosine decay warms up by itself
        alpha = config.min_learning_rate / rate
        if not warmup:
            return keras.optimizers.schedules.CosineDecay(rate, decay_steps=total_steps, alpha=alpha)
        decay_steps = max(1, total_steps - warmup)
        return keras.optimizers.schedules.CosineDecay(
            0.0, decay_steps, alpha=alpha, warmup_target=rate, warmup_steps=warmup
        )
    schedule = rate
    if config.schedule == "step":  # x decay_factor at each fraction `decay_at` of training
        boundaries = [max(1, int(round(f * total_steps))) for f in config.decay_at]
        values = [rate * config.decay_factor**i for i in range(len(boundaries) + 1)]
        schedule = keras.optimizers.schedules.PiecewiseConstantDecay(boundaries, values)
    return LinearWarmup(schedule, warmup, rate) if warmup else schedule


def make_optimizer(config, total_steps):
    """Adam (AdamW where `config.weight_decay` > 0) on `learning_rate_schedule`, with the clipping,
    EMA and accumulation `config` asks for."""
    kit = dict(
        beta_1=config.beta_1,
        beta_2=config.beta_2,
        epsilon=config.epsilon,
        clipnorm=config.clipnorm,
        global_clipnorm=config.global_clipnorm,
        use_ema=config.ema is not None,
        ema_momentum=config.ema if config.ema is not None else 0.99,
        gradient_accumulation_steps=config.grad_accum if config.grad_accum > 1 else None,
    )
    schedule = learning_rate_schedule(config, total_steps)
    if not config.weight_decay:
        return keras.optimizers.Adam(schedule, **kit)
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=config.weight_decay, **kit)
    optimizer.exclude_from_weight_decay(var_names=["tau"])  # a learned tau is not a weight to shrink
    return optimizer


def ema_callbacks(config):
    """With weight EMA, validation and checkpoints read the averaged weights (Keras's SwapEMAWeights)."""
    return [keras.callbacks.SwapEMAWeights(swap_on_epoch=True)] if config.ema is not None else []
