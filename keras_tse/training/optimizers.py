"""The optimizer and learning-rate schedule of every training run, from its settings (`TrainConfig`,
`LMTrainConfig`): Adam, or AdamW with weight decay; the paper's step decay (Sec. 3.3), cosine decay
(Transformer-XL's, Sec. 3.4) or a constant rate, each after an optional linear warmup; and Keras's own
gradient clipping, weight EMA and gradient accumulation. At their defaults the settings build the
optimizers the two recipes always had."""

import keras

from keras_tse.layers import PatchEmbedding, PositionEmbedding, ScannedBlocks
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


def no_decay_variables(model):
    """The variables timm's rule (and the ViT papers') keeps out of weight decay, by what they are: every
    weight of at most one dimension (biases, LayerNorm scales and offsets, tau, LayerScale's and ReZero's
    gains; in a scanned stack, each judged by its block's own weight) and the embeddings a model adds to
    its tokens (position tables, the class token)."""
    excluded, stacked = [], set()
    for layer in model.layers:
        if isinstance(layer, ScannedBlocks):  # one weight per block weight, stacked along depth
            for weight, per_block in zip(layer.stacked, layer.template.variables):
                stacked.add(id(weight))
                if len(per_block.shape) <= 1:
                    excluded.append(weight)
        elif isinstance(layer, PatchEmbedding):
            excluded += [layer.position_embedding, *([layer.class_token] if layer.use_class_token else [])]
        elif isinstance(layer, PositionEmbedding):
            excluded.append(layer.positions)
    known = {id(weight) for weight in excluded} | stacked
    return excluded + [w for w in model.trainable_weights if id(w) not in known and len(w.shape) <= 1]


def make_optimizer(config, total_steps, model=None):
    """Adam (AdamW where `config.weight_decay` > 0) on `learning_rate_schedule`, with the clipping,
    EMA and accumulation `config` asks for. Weight decay spares `model`'s `no_decay_variables` under
    `config.weight_decay_rule="timm"` (the default), and only a learned tau under `"all"`."""
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
    if config.weight_decay_rule == "timm" and model is not None:
        optimizer.exclude_from_weight_decay(var_list=no_decay_variables(model))
    else:
        optimizer.exclude_from_weight_decay(var_names=["tau"])  # a learned tau is not a weight to shrink
    return optimizer


def ema_callbacks(config):
    """With weight EMA, validation and checkpoints read the averaged weights (Keras's SwapEMAWeights)."""
    return [keras.callbacks.SwapEMAWeights(swap_on_epoch=True)] if config.ema is not None else []
