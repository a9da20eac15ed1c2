"""The ViT family's presets (`keras_tse.zoo.vit`): builder keywords with metadata, kept beside the family as
KerasHub keeps a model's presets. `keras_tse.zoo.from_preset`, `keras-tse presets` and the training command
read them from the family (`keras_tse.zoo.registry`). A preset with a `learning_rate` is one the training
command builds for its layout (`keras-tse train vit --norm NAME`), at that rate."""

from keras_tse.zoo.registry import preset

# initializer "torch": the paper's ViT ran on vit-pytorch (Sec. 3.3), nn.Linear / nn.Conv2d defaults; the
# depth study (zoo/depth_study.md) measures it against Glorot.
_PAPER_VIT = dict(image_size=32, patch_size=4, hidden_dim=192, ffn_dim=384, num_heads=8, num_classes=10)
_PAPER_VIT.update(initializer="torch")
_SMALL_VIT = dict(hidden_dim=64, ffn_dim=128, num_heads=4, num_classes=10, norm="deescalate", initializer="torch")
_DIGITS = "pixels / 16, then the training split's mean and std (keras_tse.data.digits.MEAN / STD)"
_CIFAR = "per-channel CIFAR-10 mean and std (keras_tse.data.cifar10.MEAN / STD), pixels first scaled to [0, 1]"
# Trained on the 2-core CPU and shipped inside the package (the lab's `ship_presets` trains, evaluates and
# writes each; its card gives the command and the test accuracy). Not the paper's sizes.
_SHIPPED_VIT = dict(depth=6, hidden_dim=64, ffn_dim=128, num_heads=4, norm="deescalate", initializer="torch")


def _vit80(norm, description, learning_rate, **config):
    config = {**_PAPER_VIT, "depth": 80, "norm": norm, **config}
    return preset(config, description, _CIFAR, "vit80_cifar10", learning_rate=learning_rate)


def _shipped(name, dataset, config, description, normalization):
    config = {**_SHIPPED_VIT, **config}
    return preset(config, description, normalization, name, weights=f"weights/{name}", dataset=dataset)


PRESETS = {
    "vit80_cifar10_post": _vit80(
        "post",
        "Yu & Zhang Sec. 3.3: 80-block post-norm ViT on CIFAR-10 (Algorithm 1), the one that fails.",
        5e-5,  # the paper's smaller rate for post-norm, "to obtain a meaningful reduction"
    ),
    "vit80_cifar10_pre": _vit80(
        "pre", "Yu & Zhang Sec. 3.3: 80-block pre-norm ViT on CIFAR-10 (eq. 19), the usual fix.", 1e-4
    ),
    "vit80_cifar10_deescalate": _vit80(
        "deescalate",
        "Yu & Zhang Sec. 3.3: 80-block post-norm ViT with de-escalation (tau=1) at each block output.",
        1e-4,
        tau=1.0,
        deescalate_at="output",
    ),
    # The paper has no baselines; these two were the strongest of the depth study (zoo/depth_study.md),
    # trained at the paper's rate for its stable variants.
    "vit80_cifar10_deepnorm": _vit80(
        "deepnorm",
        "Wang et al. 2022's DeepNorm (alpha = (2N)^(1/4), beta = (8N)^(-1/4)) on the 80-block ViT: a baseline.",
        1e-4,
    ),
    "vit80_cifar10_layerscale": _vit80(
        "layerscale",
        "Touvron et al. 2021's LayerScale (CaiT's eps for its depth) on the 80-block pre-norm ViT: a baseline.",
        1e-4,
    ),
    "vit12_cifar10_small": preset(
        {**_SMALL_VIT, "depth": 12, "image_size": 32, "patch_size": 4},
        "CPU-sized 12-block de-escalated ViT for CIFAR-shaped 32x32x3 inputs (smoke runs, tests).",
        _CIFAR,
        "vit12_cifar10_small",
    ),
    "vit24_digits": preset(
        {**_SMALL_VIT, "depth": 24, "image_size": 8, "patch_size": 2, "channels": 1},
        "24-block ViT for scikit-learn's 8x8 digits: the `keras-tse demo` model (CPU, minutes).",
        _DIGITS,
        "vit24_digits",
    ),
    "vit6_fashion_mnist": _shipped(
        "vit6_fashion_mnist",
        "fashion_mnist",
        dict(image_size=28, patch_size=4, channels=1),
        "A 6-block de-escalated ViT trained on Fashion-MNIST (CPU, minutes): weights included.",
        "pixels / 255, then Fashion-MNIST's mean and std (keras_tse.data.mnist.FASHION_MEAN / FASHION_STD)",
    ),
    "vit6_digits": _shipped(
        "vit6_digits",
        "digits",
        dict(image_size=8, patch_size=2, channels=1),
        "A 6-block de-escalated ViT trained on scikit-learn's 8x8 digits (CPU, a minute): weights included.",
        _DIGITS,
    ),
}
