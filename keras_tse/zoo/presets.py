"""Named model configurations: plain dicts of builder keywords, with a description.

`from_preset(name, **overrides)` builds one; `presets()` lists them. Each preset has a model card in
`zoo/<name>.md` with its settings, the command that trains it and the results measured so far.
"""

import copy
import inspect

from keras_tse.zoo.transformer_xl import TransformerXL
from keras_tse.zoo.vit import vit

BUILDERS = {"vit": vit, "transformer_xl": TransformerXL}

# initializer "torch": the paper's ViT ran on vit-pytorch (Sec. 3.3), nn.Linear / nn.Conv2d defaults; the
# depth study (zoo/depth_study.md) measures it against Glorot.
_PAPER_VIT = dict(
    depth=80, image_size=32, patch_size=4, hidden_dim=192, ffn_dim=384, num_heads=8, num_classes=10, initializer="torch"
)

PRESETS = {
    "vit80_cifar10_post": {
        "builder": "vit",
        "config": {**_PAPER_VIT, "norm": "post"},
        "description": "Yu & Zhang Sec. 3.3: 80-block post-norm ViT on CIFAR-10 (Algorithm 1), the one that fails.",
    },
    "vit80_cifar10_pre": {
        "builder": "vit",
        "config": {**_PAPER_VIT, "norm": "pre"},
        "description": "Yu & Zhang Sec. 3.3: 80-block pre-norm ViT on CIFAR-10 (eq. 19), the usual fix.",
    },
    "vit80_cifar10_deescalate": {
        "builder": "vit",
        "config": {**_PAPER_VIT, "norm": "deescalate", "tau": 1.0, "deescalate_at": "output"},
        "description": "Yu & Zhang Sec. 3.3: 80-block post-norm ViT with de-escalation (tau=1) at each block output.",
    },
    "vit12_cifar10_small": {
        "builder": "vit",
        "config": dict(
            depth=12,
            image_size=32,
            patch_size=4,
            hidden_dim=64,
            ffn_dim=128,
            num_heads=4,
            num_classes=10,
            norm="deescalate",
            initializer="torch",
        ),
        "description": "CPU-sized 12-block de-escalated ViT for CIFAR-shaped 32x32x3 inputs (smoke runs, tests).",
    },
    "vit24_digits": {
        "builder": "vit",
        "config": dict(
            depth=24,
            image_size=8,
            patch_size=2,
            channels=1,
            hidden_dim=64,
            ffn_dim=128,
            num_heads=4,
            num_classes=10,
            norm="deescalate",
            initializer="torch",
        ),
        "description": "24-block ViT for scikit-learn's 8x8 digits: the `keras-tse demo` model (CPU, minutes).",
    },
    "transformer_xl60_wt103_post": {
        "builder": "transformer_xl",
        "config": {"depth": 60, "norm": "post"},
        "description": "Yu & Zhang Sec. 3.4: 60-block post-norm Transformer-XL on WikiText-103, the one that fails.",
    },
    "transformer_xl60_wt103_pre": {
        "builder": "transformer_xl",
        "config": {"depth": 60, "norm": "pre"},
        "description": "Yu & Zhang Sec. 3.4: 60-block pre-norm Transformer-XL (the reference's pre_lnorm).",
    },
    "transformer_xl60_wt103_deescalate": {
        "builder": "transformer_xl",
        "config": {"depth": 60, "norm": "deescalate", "tau": 1.0},
        "description": (
            "Yu & Zhang Sec. 3.4: 60-block post-norm Transformer-XL with causal de-escalation at each FFN input."
        ),
    },
    "transformer_xl16_wt103_base": {
        "builder": "transformer_xl",
        "config": {"depth": 16, "norm": "post", "ffn_dim": 2100, "batch_size": 60, "dropout": 0.1},
        "description": "Dai et al. 2019: the 16-block base WikiText-103 Transformer-XL (151 M parameters).",
    },
    "transformer_xl8_small": {
        "builder": "transformer_xl",
        "config": dict(
            depth=8,
            norm="deescalate",
            vocab_size=4000,
            hidden_dim=64,
            num_heads=4,
            head_dim=16,
            ffn_dim=128,
            segment_len=32,
            mem_len=32,
            batch_size=8,
            cutoffs=(1000, 2000),
        ),
        "description": "CPU-sized 8-block de-escalated Transformer-XL (the offline corpus, smoke runs, tests).",
    },
}


def presets():
    """Name -> {"builder", "config", "description"} for every preset (a copy: edit freely)."""
    return copy.deepcopy(PRESETS)


def from_preset(preset, **overrides):
    """Build the model of preset `preset`, with any builder keyword overridden.

    Example: `from_preset("vit80_cifar10_deescalate", tau=0.5, num_classes=100)`.
    """
    if preset not in PRESETS:
        raise ValueError(f"Unknown preset; choose from {sorted(PRESETS)}. Received: preset={preset!r}")
    entry = PRESETS[preset]
    builder = BUILDERS[entry["builder"]]
    accepted = set(inspect.signature(builder).parameters)
    unknown = sorted(set(overrides) - accepted)
    if unknown:
        raise ValueError(
            f"Preset {preset!r} builds `{entry['builder']}`, which accepts {sorted(accepted)}. "
            f"Received unknown overrides: {unknown}"
        )
    return builder(**{**entry["config"], "name": preset, **overrides})
