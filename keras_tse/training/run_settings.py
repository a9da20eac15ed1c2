"""A run's settings (by the flags' names) mapped to what they set: the builder keywords of its model
(`model_keywords`, the one map from settings to keywords, checked against the family's builder by
`taken_by`) and the option fields of its training settings (`kit_settings`)."""

from keras_tse import layouts
from keras_tse._checks import InputError
from keras_tse.training.configs import options_of

# setting -> (builder keyword, its value from the setting's, None for none): only settings given (not None,
# not False) set a keyword, so that a run folder made before a setting existed still matches
KEYWORDS = {
    "depth": ("depth", lambda value: value),
    "num_heads": ("num_heads", lambda value: value),
    "patch_size": ("patch_size", lambda value: value),
    "init": ("initializer", lambda value: value),
    "tau": ("tau", lambda value: value),
    "learn_tau": ("trainable_tau", lambda value: True),
    "deescalate_at": ("deescalate_at", lambda value: value),
    "segment_mean": ("deescalate_memory", lambda value: False),  # the mean over the segment only, not the memory
    "scan": ("scan", lambda value: True),
    "drop_path_rate": ("drop_path_rate", lambda value: value or None),  # 0: no stochastic depth, the default
    "remat": ("remat", lambda value: True),
}
# builder keyword -> the flag that sets it: a family whose builder lacks the keyword refuses the flag
FLAGS = {
    **{keyword: "--" + setting.replace("_", "-") for setting, (keyword, _) in KEYWORDS.items()},
    "initializer": "--init", "trainable_tau": "--learn-tau", "drop_path_rate": "--drop-path",
    "hidden_dim": "--hidden-dim", "layout_options": "--layout-option",
}  # fmt: skip


def model_keywords(settings, norm, heads=None, ffn_ratio=None, accepts=lambda keyword: True):
    """The builder keywords `settings` set for layout `norm`: each of `KEYWORDS` given; the width
    (`hidden_dim`, or `head_dim` x `heads`) with the FFN `ffn_ratio` times it and the head size it leaves
    (where the builder `accepts` them); the layout's own options, checked against `norm` before any data."""
    keywords = {}
    for setting, (keyword, value_of) in KEYWORDS.items():
        value = getattr(settings, setting, None)
        if value is not None and value is not False and value_of(value) is not None:
            keywords[keyword] = value_of(value)
    hidden = getattr(settings, "hidden_dim", None)
    head_dim = getattr(settings, "head_dim", None)
    if hidden is None and head_dim is not None and heads:  # a head size, with the heads: the width
        hidden = head_dim * heads
    if hidden is not None:
        keywords["hidden_dim"] = hidden
        width = {"ffn_dim": ffn_ratio * hidden} if ffn_ratio else {}
        width.update({"head_dim": hidden // heads} if heads and head_dim is None else {})
        keywords.update({key: value for key, value in width.items() if accepts(key)})
    options = dict(getattr(settings, "layout_option", None) or ())
    if options:
        try:
            keywords["layout_options"] = layouts.check_layout_options(norm, options)
        except ValueError as error:
            pairs = ",".join(f"{key}={value}" for key, value in options.items())
            raise InputError("--layout-option", pairs, f"options of --norm {norm} ({error})") from None
    return keywords


def taken_by(family, overrides):
    """`overrides`, a run's builder keywords, if `family`'s builder takes each (its signature: the overrides a
    family declares); a keyword it lacks is one line naming the flag that set it."""
    from keras_tse.zoo.registry import accepts  # Keras-free; the zoo has registered its families by then

    refused = [key for key in overrides if not accepts(family, key)]
    if refused:
        flag = FLAGS.get(refused[0], refused[0])
        raise InputError(flag, f"with --model {family}", "a family whose builder takes it")
    return overrides


def kit_settings(settings, defaults):
    """The option fields of `defaults`' training settings that `settings` give (not None), by field."""
    given = {field.name: getattr(settings, field.name, None) for field in options_of(defaults)}
    return {field: value for field, value in given.items() if value is not None}


def check_updates(config, batches):
    """A run whose `grad_accum` exceeds its `batches` would never update the weights (one update per
    `grad_accum` batches): refused before any model is built, naming both numbers."""
    if config.grad_accum > batches:
        raise InputError(
            "--grad-accum",
            config.grad_accum,
            f"at most the run's {batches} batches (one update per {config.grad_accum} batches: the weights "
            "would never change)",
        )


def check_lora(settings):
    """`--lora-rank` adapts a trained model (--from-preset), on one device."""
    if settings.lora_rank is not None and settings.from_preset is None:
        expected = "--from-preset MODEL too (adapters train on a trained model)"
        raise InputError("--lora-rank", settings.lora_rank, expected)
    if settings.lora_rank is not None and settings.data_parallel:
        raise InputError("--lora-rank", settings.lora_rank, "no --data-parallel with it")
