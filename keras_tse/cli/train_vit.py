"""Yu & Zhang, Sec. 3.3: an 80-block ViT on CIFAR-10, post-norm vs pre-norm vs de-escalated post-norm.

The paper (Fig. 6, 150 epochs on one V100, mean of >= 3 trials): plain post-norm trains far worse
than the other two; de-escalated post-norm (tau = 1 at every block output) reaches a slightly lower
training loss than pre-norm. Settings (Sec. 3.3, Table 1): depth 80, hidden 192, FFN 384, 8 heads of
24, patches 4x4, class-token head; AdamW (0.9, 0.999), weight decay 0.1; learning rate 1e-4
(5e-5 for post-norm), x0.2 at 70% and 90% of training; batch 128; RandAugment; 150 epochs.

Run (one folder per variant under --out; rerun the same command to resume after an interruption):

    KERAS_BACKEND=jax keras-tse train vit --norm all --data-dir ~/data/cifar10
    keras-tse train vit --smoke --norm all      # the whole recipe on local synthetic data, CPU

CIFAR-10 comes from --data-dir (cifar-10-python.tar.gz or its extracted cifar-10-batches-py/), or is
downloaded there and checked against its MD5. Your own images (`--dataset folder`, read with Pillow)
or arrays (`--dataset npz`) are checked before any model is built, and their fingerprint is part of
the run's settings: a rerun on other data into the same --out is refused.

Other data sets: `--dataset fashion_mnist` or `--dataset mnist` (28x28 grey: image size 28,
one channel, the same 4x4 patches, so 49 patches + class token; normalised by the data set's own
mean and std; no RandAugment, whose colour operations mean little on grey garments and digits:
`--augment` defaults to crop_flip, a padded random crop and a flip, on Fashion-MNIST and your own
images, and to none on MNIST and the digits, where a flip changes the class).
`--smoke` on those reads a real slice (the first 512 training and 256 test images) instead of
synthetic images. A CPU budget: `--depth`, `--hidden-dim` (FFN 2x), `--num-heads` (8), `--head-dim`
(the width is heads x this), `--patch-size` (4), `--test-size` (a class-balanced test subset, the same
for every seed), `--train-size` (a class-balanced seeded subset of the training split), `--batch-size`,
`--epochs`:

    KERAS_BACKEND=jax keras-tse train vit --dataset fashion_mnist --depth 24 --hidden-dim 64 \
        --train-size 12000 --epochs 3 --norm all --seed 0 --out runs/fmnist_vit24/seed_0

Speed and scale (keras_tse.training.scale): --mixed-precision (mixed_bfloat16), --jit-compile (torch.compile on
PyTorch), --data-parallel (JAX, keras.distribution.DataParallel over every visible device):

    KERAS_BACKEND=jax keras-tse train vit --norm deescalate --mixed-precision --data-parallel   # several GPUs

`--scan` runs the 80 blocks as one loop over stacked weights (`zoo.vit(scan=True)`): the same model,
compiled as one block (zoo/speed.md measures the compile time); its run folders are its own.
"""

import dataclasses
import functools
import os
import sys
import time

import numpy as np

import keras_tse
from keras_tse import data, training
from keras_tse._checks import InputError
from keras_tse.cli import flags, trainer
from keras_tse.layouts import get_layout, layout_names
from keras_tse.norms import PAPER_NORMS
from keras_tse.run_files import read_history
from keras_tse.training import TrainConfig

# The name a run folder's manifest records (`run_files.claim_folder`): the name of the recipe that
# first wrote such folders, kept so that they resume under `keras-tse train vit` too.
TASK = "cifar10_vit"

# Keras, its backend, the models and the training loop (2-4 s to import) load in `run`, after the flags
# are read, so `--help` and a bad flag answer at once: `data` and `training` load their names on first
# use, and so does `keras_tse` its `zoo`.

# === Model: each layout's preset of the family (keras_tse/zoo/vit_presets.py) at its recipe's rate ===
# what an image family's builder must take: the data's geometry and the layout
NEEDED = ("image_size", "channels", "num_classes", "norm")


def variant_of(args, norm):
    """A layout's preset in the run's family (`--model`) and its learning rate: the family's own preset of
    the layout, or (a layout without one, such as ReZero or a registered one) its de-escalated preset with
    that layout over it, at the paper's rate for its stable variants. A family without presets of its own
    builds from its builder's defaults (preset None), at the vit's rate for the layout."""
    own = keras_tse.zoo.registry.has_training_presets(args.model)
    preset, learning_rate, overridden = keras_tse.zoo.registry.preset_for_layout(args.model if own else "vit", norm)
    if not own:
        return {"preset": None, "learning_rate": learning_rate, "norm": norm}
    return {"preset": preset, "learning_rate": learning_rate, **({"norm": norm} if overridden else {})}


def base_config(args, norm):
    """Every builder keyword of a variant before this run's changes: its preset's, or its family's defaults."""
    return keras_tse.zoo.full_config(variant_of(args, norm)["preset"] or args.model)


# === Optimisation: Sec. 3.3 ===
TRAIN = TrainConfig(epochs=150, batch_size=128)
BATCH_HELP = "override the batch size (default: 128, Sec. 3.3; 64 with --smoke)"
HIDDEN_HELP = "override the width (FFN 2x) (default: 192, Table 1)"
INIT_HELP = "weight scheme (default: the preset's, torch: the paper's code, nn.Linear/nn.Conv2d)"

# === Smoke: everything shrunk to run end to end in about a minute on a CPU ===
SMOKE_MODEL = dict(depth=4, hidden_dim=32, ffn_dim=64, num_heads=4)
SMOKE_TRAIN = dataclasses.replace(TRAIN, epochs=3, batch_size=64, learning_rate=1e-3)
SMOKE_DATA = dict(num_train=256, num_test=128)
SMOKE_SLICE = (512, 256)  # --smoke on a real data set: its first training and test images
SMOKE_HELP = "tiny model, 3 epochs; synthetic images for cifar10, a real slice otherwise"
PROBE_SIZE = 64  # test images on which TokenSimilarityMetric measures each block

# === Data sets: the registry's image sets (keras_tse.data.list_datasets("images")), each with its loader,
# geometry and the normalisation each model sees; a user's own (folder, npz) are read from --data-dir ===


def spec(args):
    return data.get_dataset(args.dataset)


def own_data(args):
    return spec(args).own


FOLDER_IMAGE_SIZE = 32  # --dataset folder's images are resized to CIFAR-10's size unless --image-size says


def load_data(args):
    """(train, test) of --dataset: a slice of each with --smoke, else the --train-size and --test-size subsets."""
    if own_data(args):
        train, test = spec(args).load_data(args.data_dir, image_size=args.image_size, seed=args.seed)
    elif args.smoke:  # CIFAR-10 cannot be fetched offline: synthetic images; the others a real slice
        if args.dataset == "cifar10":
            return data.synthetic_cifar10(**SMOKE_DATA, seed=args.seed)
        (n_train, n_test) = SMOKE_SLICE
        (x, y), (x_test, y_test) = _benchmark(args)
        return (x[:n_train], y[:n_train]), (x_test[:n_test], y_test[:n_test])
    else:
        train, test = _benchmark(args)
    if args.smoke:
        (n_train, n_test) = SMOKE_SLICE
        return (train[0][:n_train], train[1][:n_train]), (test[0][:n_test], test[1][:n_test])
    return _subset(train, args.train_size, args.seed, "--train-size"), _subset(test, args.test_size, 0, "--test-size")


def _benchmark(args):
    return spec(args).load_data(
        args.data_dir, download=not args.no_download, source=args.data_source, tfds_dir=args.tfds_dir
    )


def _subset(split, size, seed, flag):
    """A class-balanced subset of `size` examples (seeded), or the split whole when `size` is None. The
    test subset takes seed 0, the same images for every seed: the variants are compared on them."""
    if size is None:
        return split
    keep = data.balanced_subset(split[1], size, seed, flag)
    return split[0][keep], split[1][keep]


def own_geometry(args):
    """(image size, channels, classes) of --dataset folder or npz, every check made, no image read."""
    if args.dataset == "folder":
        _, names = data.image_folder_layout(args.data_dir, seed=args.seed)
        return args.image_size, 3, len(names)
    return data.npz_description(args.data_dir)


def own_labels(args):
    """(training labels, test labels) of --dataset folder or npz, no image read."""
    if args.dataset == "folder":
        layout, _ = data.image_folder_layout(args.data_dir, seed=args.seed)
        return tuple(np.array([label for _, label in layout[split]]) for split in ("train", "test"))
    with np.load(args.data_dir) as arrays:
        return arrays["y_train"].reshape(-1), arrays["y_test"].reshape(-1)


def data_files(args):
    """The files a user's image folder trains and tests on, or None for a .npz (the file itself)."""
    if args.dataset != "folder":
        return None
    layout, _ = data.image_folder_layout(args.data_dir, seed=args.seed)
    return sorted(file for split in layout.values() for file, _ in split)


def normalization_of(args, x_train):
    """The per-channel mean and std each model sees: the benchmark's constants, or a user's training images'."""
    if not own_data(args):
        dataset = spec(args)
        mean, std = np.asarray(dataset.mean, "float32"), np.asarray(dataset.std, "float32")
        return dict(mean=mean, std=std, value_range=dataset.value_range)
    pixels = x_train.reshape(-1, x_train.shape[-1]).astype("float64") / 255.0  # image_dataset's units
    return dict(mean=tuple(pixels.mean(0)), std=tuple(np.maximum(pixels.std(0), 1e-6)))


def class_names_of(args):
    """What each label stands for: a folder's class folders, an .npz's `class_names` array, the data set's
    names; the labels' numbers where none is given."""
    if args.dataset == "folder":
        return data.image_folder_layout(args.data_dir, seed=args.seed)[1]
    if args.dataset == "npz":
        with np.load(args.data_dir) as arrays:
            if "class_names" in arrays:
                return [str(name) for name in arrays["class_names"]]
    classes = own_geometry(args)[2] if own_data(args) else spec(args).classes
    return list(spec(args).class_names) or [str(label) for label in range(classes)]


def with_preprocessor(model, preprocessing):
    """`model` taking raw images: its first layer an `ImagePreprocessor` to its input's size and channels, with
    the training data's statistics and class names (`preprocessing`), which it replaces where it had one."""
    from keras_tse.zoo import preprocessing as zoo_preprocessing  # Keras: once a model is built, not for --help

    core = zoo_preprocessing.core_of(model)
    size, channels = core.input.shape[1], core.input.shape[-1]
    preprocessor = keras_tse.layers.ImagePreprocessor(size, channels, **preprocessing, name="image_preprocessor")
    return zoo_preprocessing.with_preprocessing(model, preprocessor)


def model_overrides(args, norm):
    """The preset's keywords this run changes: smoke size, data geometry, the CPU budget, the init. The
    family's builder takes each flag's keyword or refuses the flag; the smoke sizes go where it takes them."""
    accepts = functools.partial(keras_tse.zoo.registry.accepts, args.model)
    smoke = dict(SMOKE_MODEL, name=f"smoke_{norm}") if args.smoke else {}
    overrides = {key: value for key, value in smoke.items() if accepts(key)}
    if own_data(args):
        image_size, channels, classes = own_geometry(args)
        overrides.update(image_size=image_size, channels=channels, num_classes=classes)
    else:  # the data set's geometry where it differs from the preset's (CIFAR-10's)
        dataset, preset = spec(args), base_config(args, norm)
        geometry = dict(image_size=dataset.image_size, channels=dataset.channels, num_classes=dataset.classes)
        overrides.update({key: value for key, value in geometry.items() if value != preset.get(key)})
    if "norm" in variant_of(args, norm):  # a layout trained in another layout's preset
        overrides["norm"] = norm
    if args.depth is not None:
        overrides["depth"] = args.depth
    if args.num_heads is not None:
        overrides["num_heads"] = args.num_heads
    if args.patch_size is not None:
        overrides["patch_size"] = args.patch_size
    hidden_dim = args.hidden_dim
    if args.head_dim is not None and hidden_dim is None:  # a head size, with the heads: the width
        hidden_dim = args.head_dim * (args.num_heads or base_config(args, norm)["num_heads"])
    if hidden_dim is not None:
        overrides.update(hidden_dim=hidden_dim, ffn_dim=2 * hidden_dim)  # the paper's FFN ratio (Table 1)
    if args.init:
        overrides["initializer"] = args.init
    if args.tau is not None:
        overrides["tau"] = args.tau
    if args.learn_tau:
        overrides["trainable_tau"] = True
    if args.scan:
        overrides["scan"] = True
    overrides.update(flags.model_kit_overrides(args, norm))
    return flags.taken_by(args.model, overrides)


def check_args(args):
    """Every flag against the others and the data's geometry: one line per bad input, before any image
    is read or model built (a user's data is checked here through its file names and array headers)."""
    if args.from_preset is not None:
        check_from_preset(args)
    check_model(args)
    for norm in args.norm:
        flags.model_kit_overrides(args, norm)  # each variant's layout takes every --layout-option
    own = own_data(args)
    if own and args.data_dir is None:
        raise InputError(
            "--data-dir",
            "nothing",
            f"the {'folder' if args.dataset == 'folder' else '.npz file'} that --dataset {args.dataset} reads",
        )
    if own and (args.data_source != "auto" or args.tfds_dir is not None):
        raise InputError(
            "--data-source/--tfds-dir", f"--dataset {args.dataset}", "a benchmark data set, which they fetch"
        )
    plain = [norm for norm in args.norm if not get_layout(norm).deescalates]
    if plain and (args.tau is not None or args.learn_tau):
        flag, value = ("--tau", args.tau) if args.tau is not None else ("--learn-tau", True)
        raise InputError(flag, value, f"de-escalating layouts only (--norm has {', '.join(plain)})")
    if args.epochs is not None and args.epochs != int(args.epochs):  # Keras fits whole epochs
        raise InputError("--epochs", args.epochs, "a whole number of passes over the images")
    if args.scan and args.drop_path_rate:
        raise InputError(
            "--drop-path", args.drop_path_rate, "no --scan (scanned blocks are identical; each drops at its own rate)"
        )
    if args.dataset != "folder" and args.image_size is not None:
        raise InputError("--image-size", args.image_size, "--dataset folder (the other data sets have their size)")
    batch = args.batch_size or (SMOKE_TRAIN if args.smoke else TRAIN).batch_size
    if args.num_processes and batch % args.num_processes:
        raise InputError("--batch-size", batch, f"a multiple of --num-processes {args.num_processes} (each a part)")
    size, _, classes = own_geometry(args) if own else (spec(args).image_size, None, spec(args).classes)
    preset = {**base_config(args, args.norm[0]), **(SMOKE_MODEL if args.smoke else {})}
    patch = args.patch_size or preset.get("patch_size") or 1  # a family without patches: any size
    if size % patch:
        flag, value = (
            ("--image-size", size) if args.dataset == "folder" and not args.patch_size else ("--patch-size", patch)
        )
        raise InputError(flag, value, f"an image size divisible by the patch size (image {size}, patch {patch})")
    heads = args.num_heads or preset.get("num_heads") or 1
    if args.hidden_dim is not None and args.head_dim is not None and args.hidden_dim != heads * args.head_dim:
        raise InputError("--head-dim", args.head_dim, f"--hidden-dim / heads = {args.hidden_dim} / {heads}")
    width = args.hidden_dim or (args.head_dim * heads if args.head_dim else preset.get("hidden_dim") or heads)
    if width % heads:
        flag, value = ("--hidden-dim", width) if args.hidden_dim else ("--num-heads", heads)
        raise InputError(flag, value, f"a width divisible by the heads (width {width}, {heads} heads)")
    for flag, size in (("--train-size", args.train_size), ("--test-size", args.test_size)):
        if size is not None and size % classes:
            raise InputError(flag, size, f"a multiple of {classes} (the classes), for a class-balanced subset")
    if own and (args.train_size or args.test_size):  # against the labels, read without the images
        for (flag, size, seed), labels in zip(
            (("--train-size", args.train_size, args.seed), ("--test-size", args.test_size, 0)), own_labels(args)
        ):
            if size is not None:
                data.balanced_subset(labels, size, seed, flag)


# The flags that shape the model: a preset's trained weights fix every one of them (`--from-preset`).
MODEL_FLAGS = ("depth", "hidden_dim", "num_heads", "head_dim", "patch_size", "init", "tau", "learn_tau", "scan",
               "smoke", "drop_path_rate", "remat", "layout_option")  # fmt: skip


def check_from_preset(args):
    """`--from-preset`: a preset with trained weights, whose layout becomes the run's one variant and
    whose model no flag reshapes; its channels must be the data's. One line for each other case."""
    presets = keras_tse.zoo.presets()
    shipped = sorted(
        name
        for name, entry in presets.items()
        if entry["weights"] is not None and keras_tse.zoo.registry.get_family(entry["builder"]).task == "images"
    )
    if args.from_preset not in shipped:
        raise InputError(
            "--from-preset", repr(args.from_preset), f"an image preset with trained weights: {', '.join(shipped)}"
        )
    config = keras_tse.zoo.full_config(args.from_preset)
    if args.norm not in (None, (config["norm"],)):
        given = ",".join(args.norm)
        raise InputError("--norm", given, f"{config['norm']} or no --norm (--from-preset {args.from_preset}'s layout)")
    args.norm = (config["norm"],)
    given = [name for name in MODEL_FLAGS if getattr(args, name, None) not in (None, False, ())]
    if given:
        flag = "--" + given[0].replace("_", "-").replace("-rate", "")
        raise InputError(flag, getattr(args, given[0]), "no model flag with --from-preset (its weights fix the model)")


def check_model(args):
    """`--model`: an image family of the zoo's registry (its own or another package's entry point)."""
    families = keras_tse.zoo.list_families("images")
    if args.model not in families:
        raise InputError("--model", args.model, f"an image model family: {', '.join(families)}")
    if not all(keras_tse.zoo.registry.accepts(args.model, keyword) for keyword in NEEDED):
        raise InputError("--model", args.model, f"an image family whose builder takes {', '.join(NEEDED)}")
    if args.model != "vit" and args.from_preset is not None:
        raise InputError("--model", args.model, "vit or no --model with --from-preset (its weights are a ViT's)")


def fine_tune_overrides(args):
    """The preset's keywords a fine-tuning run changes: the image size and the channels, where the data's
    differ (the patch kernel adapted, `zoo.fine_tune`)."""
    size, channels, _ = own_geometry(args) if own_data(args) else (spec(args).image_size, spec(args).channels, 0)
    config = keras_tse.zoo.full_config(args.from_preset)
    given = {"image_size": size, "channels": channels}
    return {key: value for key, value in given.items() if value != config[key]}


def build_model(args, preset, overrides):
    """A variant's model: the preset with `overrides`; or (`--from-preset`) the preset's trained model adapted
    to the data's images, its head by the one rule (`zoo.fine_tune`): kept on the preset's own data set,
    fresh for any other's classes."""
    if args.model != "vit":  # another family: its preset, or its builder's defaults, with the run's changes
        config = {**(keras_tse.zoo.full_config(preset) if preset else {}), **overrides}
        name = f"{args.model}_{preset or args.dataset}_{overrides.get('norm', config.get('norm'))}"
        named = {"name": name} if keras_tse.zoo.registry.accepts(args.model, "name") else {}
        return keras_tse.zoo.create_model(args.model, **{**named, **config})
    if args.from_preset is None:
        return keras_tse.zoo.from_preset(preset, **overrides)
    classes = own_geometry(args)[2] if own_data(args) else spec(args).classes
    trained_on = keras_tse.zoo.get_family(args.model).presets[preset].get("dataset")
    other_classes = args.dataset != trained_on  # the head rule's "said so"
    return keras_tse.zoo.from_preset(preset, num_classes=classes, new_head=other_classes, **overrides)


def augment_before(args):
    """What a run folder made before the choice of augmentation and of the pipeline trained with: RandAugment
    where the data set's default is RandAugment (CIFAR-10), none elsewhere; tf.data where TensorFlow is
    installed, as the pipeline was then chosen (`training.defaults_of`'s `before`)."""
    pipeline = "tf" if data.tensorflow_if_installed() is not None else "numpy"
    return {"augment": "randaugment" if spec(args).augment == "randaugment" else "none", "data_pipeline": pipeline}


def pipeline_of(config):
    """A new run's input pipeline: NumPy's where it draws nothing but each epoch's order (the two pipelines then
    give the same batches, so the numbers are the same whatever is installed, and the run resumes anywhere);
    tf.data where it draws augmentation or mixing and TensorFlow is installed (its map runs them in
    TensorFlow's graph, faster), its draws then tf.data's own, recorded with the run."""
    draws = config.augment != "none" or config.mixup or config.cutmix
    return "tf" if draws and data.tensorflow_if_installed() is not None else "numpy"


def variant_settings(args, norm, train_config):
    """(preset, builder overrides, training settings, the run's settings known before any data) of a variant."""
    variant = variant_of(args, norm)
    variant = variant if args.from_preset is None else {**variant, "preset": args.from_preset}
    lr = variant["learning_rate"] if not args.smoke else train_config.learning_rate
    config = dataclasses.replace(
        train_config,
        learning_rate=args.learning_rate if args.learning_rate is not None else lr,
        similarity_every_n_batches=args.similarity_every,
    )
    config = training.as_started(
        os.path.join(args.out, norm), config, flags.kit_settings(args, TRAIN), augment_before(args)
    )
    if config.augment is None:  # a new run: the data set's own augmentation
        config = dataclasses.replace(config, augment=spec(args).augment)
    if config.data_pipeline is None:
        config = dataclasses.replace(config, data_pipeline=pipeline_of(config))
    overrides = model_overrides(args, norm) if args.from_preset is None else fine_tune_overrides(args)
    settings = {
        "preset": variant["preset"],
        **({"from_preset": args.from_preset} if args.from_preset else {}),
        **({"model": args.model} if args.model != "vit" else {}),
        "overrides": overrides,
        "smoke": args.smoke,
        "dataset": args.dataset,
        "seed": args.seed,
        **training.runner.backend_settings(config.jit_compile),
        "data_parallel": args.data_parallel,
        "processes": training.scale.process()[1],
        **({"data": args.fingerprint} if own_data(args) else {}),
    }
    return variant["preset"], overrides, config, settings


def one_setting(plans, field):
    """A setting of the data every variant trains on (its augmentation, its validation split): each
    variant's, which must agree (a variant resumed from a run begun before the setting existed may hold
    another)."""
    chosen = {norm: getattr(config, field) for norm, (_, _, config, _) in plans.items()}
    if len(set(chosen.values())) > 1:
        held = ", ".join(f"{norm}: {value}" for norm, value in chosen.items())
        flag = "--" + field.replace("_", "-")
        raise InputError(flag, f"no choice, while the variants' runs hold different ones ({held})", "one given")
    return next(iter(chosen.values()))


def run(args):
    """Train the chosen variants (`trainer.train`, with this module's hooks); returns {variant: summary}."""
    return trainer.train(sys.modules[__name__], args)


# === The hooks of the one training path (`keras_tse.cli.trainer`) ===


def shared(args):
    return {}


def variant_names():
    return layout_names()


def train_config(args, jit_compile):
    """The settings every variant starts from: Sec. 3.3's (or the smoke run's), with the flags'."""
    config = dataclasses.replace(SMOKE_TRAIN if args.smoke else TRAIN, jit_compile=jit_compile)
    if args.epochs is not None:
        config = dataclasses.replace(config, epochs=int(args.epochs))
    if args.batch_size is not None:
        config = dataclasses.replace(config, batch_size=args.batch_size)
    return dataclasses.replace(config, **flags.kit_settings(args, TRAIN))


def known(args, plan):
    _, _, config, settings = plan
    return {"train": training.recorded(config), **settings}


before = augment_before


def prepare(args, plans, config):
    """The images read once, as every variant trains on them: the pipelines, the probe, the step count."""
    start = time.perf_counter()
    pipeline = one_setting(plans, "data_pipeline")
    if pipeline == "tf" and data.tensorflow_if_installed() is None:
        raise InputError(
            "--data-pipeline",
            "tf (given, or the pipeline the run in --out trained with)",
            "numpy, or TensorFlow installed: tf.data draws its own augmentation, so the run cannot go on without it",
        )
    print(f"loading {args.dataset}{' (smoke slice)' if args.smoke else ''} ...", flush=True)
    (x_train, y_train), (x_test, y_test) = load_data(args)
    fraction = one_setting(plans, "validation_fraction")
    valid = data.validation_split(y_train, fraction, args.seed, training.scale.batch_divisor())
    if fraction and valid is None:
        print("no validation split: no class has two training images; the test split is scored each epoch")
    if valid is not None:  # held out of the training images, before their statistics are taken
        (x_train, y_train), (x_valid, y_valid) = (x_train[~valid], y_train[~valid]), (x_train[valid], y_train[valid])
    # a batch asked for that the data cannot fill: every epoch one short step, most of the batch missing
    if args.batch_size is not None and args.batch_size > len(y_train):
        raise InputError("--batch-size", config.batch_size, f"at most the {len(y_train):,} training images")
    held = "" if valid is None else f" ({len(y_valid):,} more held out for validation)"
    print(
        f"loaded {len(y_train):,} training{held} and {len(y_test):,} test images in "
        f"{time.perf_counter() - start:.1f} s; the first training step also compiles the model",
        flush=True,
    )
    normalization = normalization_of(args, x_train)
    in_model = one_setting(plans, "normalize_in_model")
    fed = {**normalization, "mean": None, "std": None} if in_model else normalization  # the pixels as they come
    train = data.image_dataset(
        x_train,
        y_train,
        config.batch_size,
        pipeline=pipeline,
        augment=one_setting(plans, "augment"),
        shuffle=True,
        seed=args.seed,
        mixup=config.mixup,
        cutmix=config.cutmix,
        num_classes=own_geometry(args)[2] if own_data(args) else spec(args).classes,
        shard=training.scale.process(),
        **fed,
    )
    scored = functools.partial(
        data.image_dataset, batch_size=config.batch_size, shard=training.scale.process(), pipeline=pipeline
    )
    test = scored(x_test, y_test, **fed)
    steps_per_epoch = -(-len(y_train) // config.batch_size)
    flags.check_updates(config, steps_per_epoch * config.epochs)
    held = {} if valid is None else {"valid_size": len(y_valid)}
    return dict(
        train=train,
        validation=None if valid is None else scored(x_valid, y_valid, **fed),
        test=test,
        probe=data.normalized(x_test[:PROBE_SIZE], **fed),
        preprocessing={**normalization, "class_names": class_names_of(args)} if in_model else None,
        steps_per_epoch=steps_per_epoch,
        sizes={"train_size": len(y_train), **held, "test_size": len(y_test)},
    )


def fit(args, norm, plan, prepared):
    """One variant built and trained into its folder (TensorFlow's MirroredStrategy: built, compiled and
    fitted in its scope)."""
    preset, overrides, config, settings = plan
    with training.scale.replica_scope():
        model = build_model(args, preset, overrides)
        if prepared["preprocessing"] is not None:
            model = with_preprocessor(model, prepared["preprocessing"])
        run_dir = os.path.join(args.out, norm)
        size = f"{model.count_params():,} parameters"
        print(f"\n=== {norm}: {model.name}, {size}, lr {config.learning_rate:g} -> {run_dir}")
        return training.fit_variant(
            model,
            prepared["train"],
            prepared["test"],
            run_dir,
            config,
            prepared["probe"],
            prepared["steps_per_epoch"],
            extra_config={**settings, **prepared["sizes"]},
            verbose=args.verbose,
            before=augment_before(args),
            validation=prepared["validation"],
        )


def finish(args, summaries):
    smoke_note = " - smoke run, synthetic data" if args.dataset == "cifar10" else " - smoke run, a real slice"
    name = os.path.basename(args.data_dir.rstrip("/")) if own_data(args) else spec(args).title
    title = f"ViT on {name} (Yu & Zhang Fig. 6 layout)" + (smoke_note if args.smoke else "")
    training.runner.finish_recipe(
        summaries, training.runner.summary_line, args.out, layout_names(), "history.csv", _plot_histories, title
    )


def _plot_histories(folders, path, title):
    training.plot_losses(
        {norm: read_history(os.path.join(folder, "history.csv")) for norm, folder in folders.items()}, path, title
    )


def parse_args(argv=None, prog="keras-tse train vit"):
    parser = flags.Parser(prog=prog, description=__doc__.splitlines()[0])
    flags.add_task_arguments(
        parser,
        "images",
        "vit",
        "cifar10",
        "cifar10 (the paper's run), fashion_mnist or mnist (28x28 grey); your own: folder (--data-dir holds one "
        "subfolder per class, or train/ and test/ of them) or npz (--data-dir is a .npz with x_train, y_train, "
        "x_test, y_test)",
        layout_names(),
        None,
        ". A layout without a preset of its own trains in the deescalate preset at lr 1e-4",
    )
    parser.add_argument(
        "--image-size",
        type=flags.positive_int,
        default=None,
        help="--dataset folder: the size images are resized to (default: 32)",
    )
    parser.add_argument("--patch-size", type=flags.positive_int, default=None, help="patch side (default: 4, Sec. 3.3)")
    parser.add_argument("--num-heads", type=flags.positive_int, default=None, help="attention heads (default: 8)")
    parser.add_argument(
        "--head-dim", type=flags.positive_int, default=None, help="head size; the width is heads x this (default: 24)"
    )
    flags.add_run_arguments(parser, HIDDEN_HELP, INIT_HELP, SMOKE_HELP, BATCH_HELP)
    flags.add_training_kit(parser, TRAIN)
    flags.add_distribution_arguments(parser)
    parser.add_argument(
        "--data-source",
        choices=data.tfds_source.SOURCES,
        default="auto",
        help="auto (default): --data-dir files, else a prepared TensorFlow Datasets copy, else download; "
        "files: never TFDS; tfds: TFDS only (its own shuffled order)",
    )
    parser.add_argument("--tfds-dir", default=None, help="TFDS's data folder (default: $TFDS_DATA_DIR or TFDS's own)")
    parser.add_argument(
        "--scan",
        action="store_true",
        help="run the blocks as one loop over stacked weights (zoo.vit(scan=True)): the same model, compiled "
        "as one block",
    )
    flags.add_tau_arguments(parser)
    parser.add_argument(
        "--train-size",
        type=flags.positive_int,
        default=None,
        help="train on a class-balanced seeded subset of this many images",
    )
    parser.add_argument(
        "--test-size",
        type=flags.positive_int,
        default=None,
        help="evaluate on a class-balanced subset of this many test images (the same for every seed)",
    )
    parser.add_argument(
        "--from-preset",
        default=None,
        metavar="PRESET",
        help="fine-tune a preset with trained weights (keras-tse presets): every weight kept but the classifier "
        "head, fresh for the data's classes; the position table resampled to the data's image size; the "
        "model and its layout are the preset's",
    )
    args = parser.parse_args(argv)
    if args.norm is None and args.from_preset is None:
        args.norm = PAPER_NORMS
    if args.dataset == "folder" and args.image_size is None:
        args.image_size = FOLDER_IMAGE_SIZE
    return args


def main(argv=None, prog="keras-tse train vit"):
    """The command: `run(parse_args(argv))` behind the edge every command shares (`flags.main_of`)."""
    return flags.main_of(prog, run, functools.partial(parse_args, prog=prog), argv)
