"""Image classification runs (`keras-tse train vit`, Yu & Zhang Sec. 3.3, Fig. 6): how a plan is made from
the settings, and how the images are read once and each variant fitted (`plans.RunKind`, `KIND`).

The paper's settings (Sec. 3.3, Table 1): depth 80, hidden 192, FFN 384, 8 heads of 24, patches 4x4,
class-token head; AdamW (0.9, 0.999), weight decay 0.1; learning rate 1e-4 (5e-5 for post-norm), x0.2 at 70%
and 90% of training; batch 128; RandAugment; 150 epochs. A family's presets hold the model, its
`learning_rate` the rate; a data set's spec its geometry, normalisation, augmentation and smoke stand-in.
"""

import dataclasses
import functools
import math
import os
import time

import numpy as np

import keras_tse
from keras_tse import data
from keras_tse._checks import InputError
from keras_tse.layouts import get_layout, layout_names
from keras_tse.norms import PAPER_NORMS
from keras_tse.run_files import read_history
from keras_tse.training import configs, plans
from keras_tse.training.configs import TrainConfig, options_of
from keras_tse.training.run_settings import check_lora, check_updates, kit_settings, model_keywords, taken_by

# The name a run folder's manifest records: the name of the recipe that first wrote such folders, kept so
# that they resume under `keras-tse train vit` too.
NAME = "cifar10_vit"
NEEDED = ("image_size", "channels", "num_classes", "norm")  # what an image family's builder must take

# === Optimisation: Sec. 3.3 ===
TRAIN = TrainConfig(epochs=150, batch_size=128)

# === Smoke: everything shrunk to run end to end in about a minute on a CPU ===
SMOKE_MODEL = dict(depth=4, hidden_dim=32, ffn_dim=64, num_heads=4)
SMOKE_TRAIN = dataclasses.replace(TRAIN, epochs=3, batch_size=64, learning_rate=1e-3)
SMOKE_SLICE = (512, 256)  # --smoke on a real data set: its first training and test images
PROBE_SIZE = 64  # test images on which TokenSimilarityMetric measures each block
FOLDER_IMAGE_SIZE = 32  # a set whose images are resized (an image folder): CIFAR-10's size unless asked

# The flags that shape the model: a preset's trained weights fix every one of them (`from_preset`).
MODEL_SETTINGS = ("depth", "hidden_dim", "num_heads", "head_dim", "patch_size", "init", "tau", "learn_tau", "scan",
                  "smoke", "drop_path_rate", "remat", "layout_option")  # fmt: skip

# Every setting of an image run, by its flag's name, at its default (`keras-tse train vit`'s flags).
DEFAULTS = {
    "norm": None, "model": "vit", "dataset": "cifar10", "epochs": None, "image_size": None, "patch_size": None,
    "num_heads": None, "head_dim": None, "data_dir": None, "no_download": False, "out": None, "depth": None,
    "hidden_dim": None, "learning_rate": None, "batch_size": None, "similarity_every": None, "seed": 0,
    "init": None, "layout_option": None, "mixed_precision": None, "jit_compile": False, "data_parallel": False,
    "compile_cache": None, "smoke": False, "verbose": None, "drop_path_rate": None, "remat": False,
    **{field.name: None for field in options_of(TRAIN)}, "model_parallel": 1, "coordinator": None,
    "num_processes": None, "process_id": None, "join_timeout": 180, "distributed": None, "data_source": "auto",
    "tfds_dir": None, "scan": False, "tau": None, "learn_tau": False, "train_size": None, "test_size": None,
    "from_preset": None, "lora_rank": None, "stream": False,
}  # fmt: skip


# === The plan ===


def resolve(settings):
    """The settings with what the others imply: a preset's one layout (`from_preset`), the paper's three
    otherwise; a resized set's image size."""
    spec = data.get_dataset(settings.dataset)
    if spec.own and settings.data_dir is None:
        raise InputError(
            "--data-dir", "nothing", f"the {spec.title.removeprefix('an ')} that --dataset {spec.name} reads"
        )
    if settings.stream and not spec.takes("stream"):
        streamed = " or ".join(name for name in data.list_datasets("images") if data.get_dataset(name).takes("stream"))
        raise InputError("--stream", f"with --dataset {spec.name}", f"--dataset {streamed} (read batch by batch)")
    norm = settings.norm
    if settings.from_preset is not None:
        norm = (_source_layout(settings),)
    elif norm is None:
        norm = PAPER_NORMS
    size = settings.image_size
    if size is None and spec.takes("image_size"):
        # a model without a builder to rebuild it at another size (a file, a folder, a run) takes its own size;
        # a shipped preset adapts to any (`zoo.fine_tune`), and a folder's images come at CIFAR-10's
        size = FOLDER_IMAGE_SIZE if not _fine_tunes_a_file(settings) else source(settings)[2][0]
    return settings.replace(norm=tuple(norm), image_size=size)


def source(settings):
    """(the trained model --from-preset names (`zoo.trained`), its blocks' layout, its image geometry `(size,
    channels, classes, class names)`): one line for a model that is no image classifier of the zoo's blocks."""
    from keras_tse.zoo.trained import image_geometry, layout_of, trained

    found = trained(settings.from_preset)
    config = found.model_config()
    layout, geometry = layout_of(config), image_geometry(config)
    if layout is None or geometry is None or geometry[2] is None:
        text = " (a language model: keras-tse train lm --from-preset)" if found.tokenizer() is not None else ""
        raise InputError("--from-preset", settings.from_preset, f"an image classifier of the zoo's blocks{text}")
    return found, layout, geometry


def _fine_tunes_a_file(settings):
    """Whether the run starts from a trained model that is not a shipped preset (its size and channels fixed)."""
    return settings.from_preset is not None and source(settings)[0].kind != "preset"


def _source_layout(settings):
    """The layout of the trained model the run starts from, its one variant: one line for another --norm."""
    _, layout, _ = source(settings)
    if settings.norm not in (None, (layout,)):
        given = ",".join(settings.norm)
        raise InputError("--norm", given, f"{layout} or no --norm (--from-preset {settings.from_preset}'s layout)")
    return layout


def geometry(plan_or_settings, survey=None):
    """(image size, channels, classes) of the run's images: the survey's for a user's own, else the spec's."""
    survey = survey if survey is not None else getattr(plan_or_settings, "survey", None)
    if survey is not None:
        return survey.geometry
    spec = data.get_dataset((getattr(plan_or_settings, "settings", None) or plan_or_settings).dataset)
    return spec.image_size, spec.channels, spec.classes


def variant_of(settings, norm):
    """A layout's preset in the run's family and its learning rate: the family's own preset of the layout, or
    (a layout without one, such as ReZero or a registered one) its default layout's preset with that layout
    over it, at the paper's rate for its stable variants. A family without presets of its own builds from its
    builder's defaults (preset None), at the vit's rate for the layout."""
    registry = keras_tse.zoo.registry
    own = registry.has_training_presets(settings.model)
    preset, learning_rate, overridden = registry.preset_for_layout(settings.model if own else DEFAULTS["model"], norm)
    if not own:
        return {"preset": None, "learning_rate": learning_rate, "norm": norm}
    return {"preset": preset, "learning_rate": learning_rate, **({"norm": norm} if overridden else {})}


def base_model(settings, norm):
    """Every builder keyword of a variant before this run's changes: its preset's, or its family's defaults."""
    return keras_tse.zoo.full_config(variant_of(settings, norm)["preset"] or settings.model)


def model_overrides(plan, norm):
    """The preset's keywords this run changes: smoke size, data geometry, the CPU budget, the init. The
    family's builder takes each setting's keyword or refuses it; the smoke sizes go where it takes them."""
    settings = plan.settings
    accepts = functools.partial(keras_tse.zoo.registry.accepts, settings.model)
    smoke = dict(SMOKE_MODEL, name=f"smoke_{norm}") if settings.smoke else {}
    overrides = {key: value for key, value in smoke.items() if accepts(key)}
    image_size, channels, classes = geometry(plan)
    given = dict(image_size=image_size, channels=channels, num_classes=classes)
    if plan.survey is None:  # the data set's geometry where it differs from the preset's (CIFAR-10's)
        preset = base_model(settings, norm)
        given = {key: value for key, value in given.items() if value != preset.get(key)}
    overrides.update(given)
    if "norm" in variant_of(settings, norm):  # a layout trained in another layout's preset
        overrides["norm"] = norm
    heads = settings.num_heads or base_model(settings, norm).get("num_heads")
    overrides.update(model_keywords(settings, norm, heads=heads, ffn_ratio=2, accepts=accepts))  # Table 1's FFN
    return taken_by(settings.model, overrides)


def fine_tune_overrides(plan):
    """The preset's keywords a fine-tuning run changes: the image size and the channels, where the data's
    differ (the patch kernel adapted, `zoo.fine_tune`)."""
    if _fine_tunes_a_file(plan.settings):
        return {}  # the data's geometry is the model's (`check`)
    size, channels, _ = geometry(plan)
    config = keras_tse.zoo.full_config(plan.settings.from_preset)
    given = {"image_size": size, "channels": channels}
    return {key: value for key, value in given.items() if value != config[key]}


def augment_before(settings):
    """What a run folder made before the choice of augmentation and of the pipeline trained with: RandAugment
    where the data set's default is RandAugment (CIFAR-10), none elsewhere; tf.data where TensorFlow is
    installed, as the pipeline was then chosen (`configs.defaults_of`'s `before`)."""
    pipeline = "tf" if data.tensorflow_installed() else "numpy"
    augment = data.get_dataset(settings.dataset).augment
    return {"augment": "randaugment" if augment == "randaugment" else "none", "data_pipeline": pipeline}


def pipeline_of(config, stream=False):
    """A new run's input pipeline: NumPy's where it draws nothing but each epoch's order (the two pipelines then
    give the same batches, so the numbers are the same whatever is installed, and the run resumes anywhere) or
    where it streams files (`--stream`: the pipeline that reads them batch by batch); tf.data where it draws
    augmentation or mixing and TensorFlow is installed (its map runs them in TensorFlow's graph, faster), its
    draws then tf.data's own, recorded with the run."""
    draws = config.augment != "none" or config.mixup or config.cutmix
    return "tf" if draws and not stream and data.tensorflow_if_installed() is not None else "numpy"


def base_config(settings, jit_compile):
    """The settings every variant starts from: Sec. 3.3's (or the smoke run's), with the given ones."""
    config = dataclasses.replace(SMOKE_TRAIN if settings.smoke else TRAIN, jit_compile=jit_compile)
    if settings.epochs is not None:
        config = dataclasses.replace(config, epochs=int(settings.epochs))
    if settings.batch_size is not None:
        config = dataclasses.replace(config, batch_size=settings.batch_size)
    return dataclasses.replace(config, **kit_settings(settings, TRAIN))


def variant(plan, norm, base):
    """A variant's `Variant`: preset, builder overrides, training settings as its run began, its record."""
    from keras_tse.training import runner, scale  # Keras: once the plan has chosen the backend

    settings = plan.settings
    chosen = variant_of(settings, norm)
    preset = chosen["preset"] if settings.from_preset is None else settings.from_preset
    if _fine_tunes_a_file(settings):
        preset = None  # no preset's builder: the model is the file's
    lr = chosen["learning_rate"] if not settings.smoke else base.learning_rate
    config = dataclasses.replace(
        base,
        learning_rate=settings.learning_rate if settings.learning_rate is not None else lr,
        similarity_every_n_batches=settings.similarity_every,
    )
    config = runner.as_started(
        os.path.join(plan.out, norm), config, kit_settings(settings, TRAIN), augment_before(settings)
    )
    if config.augment is None:  # a new run: the data set's own augmentation
        config = dataclasses.replace(config, augment=plan.spec.augment)
    if config.data_pipeline is None:
        config = dataclasses.replace(config, data_pipeline=pipeline_of(config, settings.stream))
    overrides = model_overrides(plan, norm) if settings.from_preset is None else fine_tune_overrides(plan)
    record = {
        "preset": preset,
        **({"from_preset": _source_name(settings)} if settings.from_preset else {}),
        **({"lora_rank": settings.lora_rank} if settings.lora_rank else {}),
        **({"model": settings.model} if settings.model != DEFAULTS["model"] else {}),
        "overrides": overrides,
        "smoke": settings.smoke,
        "dataset": settings.dataset,
        "seed": settings.seed,
        **runner.backend_settings(config.jit_compile),
        "data_parallel": settings.data_parallel,
        "processes": scale.process()[1],
        **({"data": plan.fingerprint} if plan.fingerprint else {}),
    }
    known = {"train": configs.recorded(config), **record}
    return plans.Variant(norm, preset, overrides, config, record, known)


# === The checks: every setting against the others and the data's geometry, before any image is read ===


def check(settings, survey):
    """One line per bad setting, before any image is read or model built (a user's data is checked through
    its survey: its file names and array headers)."""
    if settings.from_preset is not None:
        given = [name for name in MODEL_SETTINGS if getattr(settings, name) not in (None, False, ())]
        if given:
            flag = "--" + given[0].replace("_", "-").replace("-rate", "")
            value = getattr(settings, given[0])
            raise InputError(flag, value, "no model flag with --from-preset (its weights fix the model)")
    check_lora(settings)
    check_model(settings)
    if _fine_tunes_a_file(settings):
        _check_source_geometry(settings, survey)
    for norm in settings.norm:
        model_keywords(settings, norm)  # each variant's layout takes every --layout-option
    spec = data.get_dataset(settings.dataset)
    if spec.own and (settings.data_source != "auto" or settings.tfds_dir is not None):
        raise InputError(
            "--data-source/--tfds-dir", f"--dataset {settings.dataset}", "a benchmark data set, which they fetch"
        )
    plain = [norm for norm in settings.norm if not get_layout(norm).deescalates]
    if plain and (settings.tau is not None or settings.learn_tau):
        flag, value = ("--tau", settings.tau) if settings.tau is not None else ("--learn-tau", True)
        raise InputError(flag, value, f"de-escalating layouts only (--norm has {', '.join(plain)})")
    if settings.epochs is not None and settings.epochs != int(settings.epochs):  # Keras fits whole epochs
        raise InputError("--epochs", settings.epochs, "a whole number of passes over the images")
    if settings.scan and settings.drop_path_rate:
        raise InputError(
            "--drop-path",
            settings.drop_path_rate,
            "no --scan (scanned blocks are identical; each drops at its own rate)",
        )
    if not spec.takes("image_size") and settings.image_size is not None:
        raise InputError("--image-size", settings.image_size, "--dataset folder (the other data sets have their size)")
    batch = settings.batch_size or (SMOKE_TRAIN if settings.smoke else TRAIN).batch_size
    if settings.num_processes and batch % settings.num_processes:
        raise InputError("--batch-size", batch, f"a multiple of --num-processes {settings.num_processes} (each a part)")
    if not _fine_tunes_a_file(settings):
        _check_shapes(settings, survey, spec)
    _check_subsets(settings, survey)


def _check_source_geometry(settings, survey):
    """A trained model that is not a shipped preset takes images of its own size and channels only."""
    size, channels, _ = geometry(settings, survey)
    (own_size, own_channels, _, _) = source(settings)[2]
    if (size, channels) != (own_size, own_channels):
        raise InputError(
            "--from-preset",
            settings.from_preset,
            f"a model of the data's images ({size}x{size}, {channels} channel(s)); it takes {own_size}x{own_size} "
            f"with {own_channels} (only a shipped preset adapts to other images)",
        )


def _source_name(settings):
    """What a run records it started from: a shipped preset's name, else the absolute path."""
    return settings.from_preset if source(settings)[0].kind == "preset" else os.path.abspath(settings.from_preset)


def _check_shapes(settings, survey, spec):
    size, _, _ = geometry(settings, survey)
    preset = {**base_model(settings, settings.norm[0]), **(SMOKE_MODEL if settings.smoke else {})}
    patch = settings.patch_size or preset.get("patch_size") or 1  # a family without patches: any size
    if size % patch:
        resized = spec.takes("image_size") and not settings.patch_size
        flag, value = ("--image-size", size) if resized else ("--patch-size", patch)
        raise InputError(flag, value, f"an image size divisible by the patch size (image {size}, patch {patch})")
    heads = settings.num_heads or preset.get("num_heads") or 1
    hidden, head_dim = settings.hidden_dim, settings.head_dim
    if hidden is not None and head_dim is not None and hidden != heads * head_dim:
        raise InputError("--head-dim", head_dim, f"--hidden-dim / heads = {hidden} / {heads}")
    width = hidden or (head_dim * heads if head_dim else preset.get("hidden_dim") or heads)
    if width % heads:
        flag, value = ("--hidden-dim", width) if hidden else ("--num-heads", heads)
        raise InputError(flag, value, f"a width divisible by the heads (width {width}, {heads} heads)")


def _check_subsets(settings, survey):
    _, _, classes = geometry(settings, survey)
    asked = (("--train-size", settings.train_size, settings.seed), ("--test-size", settings.test_size, 0))
    for flag, size, _ in asked:
        if size is not None and size % classes:
            raise InputError(flag, size, f"a multiple of {classes} (the classes), for a class-balanced subset")
    if survey is not None and (settings.train_size or settings.test_size):  # the labels, read without the images
        for (flag, size, seed), labels in zip(asked, survey.labels):
            if size is not None:
                data.balanced_subset(labels, size, seed, flag)


def check_model(settings):
    """The family: an image family of the zoo's registry (its own or another package's entry point) whose
    builder takes the data's geometry and a layout; a fine-tuned preset's own family."""
    families = keras_tse.zoo.list_families("images")
    if settings.model not in families:
        raise InputError("--model", settings.model, f"an image model family: {', '.join(families)}")
    if not all(keras_tse.zoo.registry.accepts(settings.model, keyword) for keyword in NEEDED):
        raise InputError("--model", settings.model, f"an image family whose builder takes {', '.join(NEEDED)}")
    if settings.from_preset is not None and not _fine_tunes_a_file(settings):
        family = keras_tse.zoo.presets()[settings.from_preset]["builder"]
        if settings.model != family:
            raise InputError(
                "--model", settings.model, f"{family} or no --model with --from-preset (its weights are a {family}'s)"
            )


# === The data, read once ===


def load_data(plan):
    """(train, test) of the data set: a slice of each (or the set's smoke stand-in) with --smoke, else the
    --train-size and --test-size subsets."""
    settings, spec = plan.settings, plan.spec
    if plan.survey is not None:
        keywords = dict(image_size=settings.image_size, seed=settings.seed, **plan.survey.load_keywords)
        keywords.update({"stream": True} if settings.stream else {})
        train, test = spec.load_data(settings.data_dir, **keywords)
    elif settings.smoke and spec.smoke is not None:  # a set that cannot be read offline: its stand-in
        return spec.smoke_data(seed=settings.seed)
    else:
        train, test = spec.load_data(
            settings.data_dir,
            download=not settings.no_download,
            source=settings.data_source,
            tfds_dir=settings.tfds_dir,
        )
    if settings.smoke:
        (n_train, n_test) = SMOKE_SLICE
        return (train[0][:n_train], train[1][:n_train]), (test[0][:n_test], test[1][:n_test])
    return _subset(train, settings.train_size, settings.seed, "--train-size"), _subset(
        test, settings.test_size, 0, "--test-size"
    )


def _subset(split, size, seed, flag):
    """A class-balanced subset of `size` examples (seeded), or the split whole when `size` is None. The
    test subset takes seed 0, the same images for every seed: the variants are compared on them."""
    if size is None:
        return split
    keep = data.balanced_subset(split[1], size, seed, flag)
    return split[0][keep], split[1][keep]


def normalization_of(plan, x_train):
    """The per-channel mean and std each model sees: the benchmark's constants, or a user's training images'."""
    if plan.survey is None:
        return plan.spec.normalization()
    mean, std = data.channel_statistics(x_train)  # image_dataset's units; one pass, in chunks, streamed or not
    return dict(mean=tuple(mean), std=tuple(np.maximum(std, 1e-6)))


def class_names_of(plan):
    """What each label stands for: the survey's (a folder's class folders, an .npz's `class_names`), the data
    set's names; the labels' numbers where none is given."""
    names = (plan.survey.class_names if plan.survey else ()) or plan.spec.class_names
    return list(names) or [str(label) for label in range(geometry(plan)[2])]


def one_setting(plan, field):
    """A setting of the data every variant trains on (its augmentation, its validation split): each
    variant's, which must agree (a variant resumed from a run begun before the setting existed may hold
    another)."""
    chosen = {v.norm: getattr(v.config, field) for v in plan.variants}
    if len(set(chosen.values())) > 1:
        held = ", ".join(f"{norm}: {value}" for norm, value in chosen.items())
        flag = "--" + field.replace("_", "-")
        raise InputError(flag, f"no choice, while the variants' runs hold different ones ({held})", "one given")
    return next(iter(chosen.values()))


def prepare(plan):
    """The images read once, as every variant trains on them: the pipelines, the probe, the step count."""
    from keras_tse.training import scale  # Keras: once the plan has chosen the backend

    settings, config = plan.settings, plan.variants[0].config
    start = time.perf_counter()
    pipeline = one_setting(plan, "data_pipeline")
    if pipeline == "tf" and data.tensorflow_if_installed() is None:
        raise InputError(
            "--data-pipeline",
            "tf (given, or the pipeline the run in --out trained with)",
            "numpy, or TensorFlow installed: tf.data draws its own augmentation, so the run cannot go on without it",
        )
    if pipeline == "tf" and settings.stream:
        raise InputError("--data-pipeline", "tf with --stream", "numpy (the pipeline that reads files batch by batch)")
    print(f"loading {settings.dataset}{' (smoke slice)' if settings.smoke else ''} ...", flush=True)
    (x_train, y_train), (x_test, y_test) = load_data(plan)
    fraction = one_setting(plan, "validation_fraction")
    valid = data.validation_split(y_train, fraction, settings.seed, scale.batch_divisor())
    if fraction and valid is None:
        print("no validation split: no class has two training images; the test split is scored each epoch")
    if valid is not None:  # held out of the training images, before their statistics are taken
        (x_train, y_train), (x_valid, y_valid) = (x_train[~valid], y_train[~valid]), (x_train[valid], y_train[valid])
    # a batch asked for that the data cannot fill: every epoch one short step, most of the batch missing
    if settings.batch_size is not None and settings.batch_size > len(y_train):
        raise InputError("--batch-size", config.batch_size, f"at most the {len(y_train):,} training images")
    held = "" if valid is None else f" ({len(y_valid):,} more held out for validation)"
    print(
        f"loaded {len(y_train):,} training{held} and {len(y_test):,} test images in "
        f"{time.perf_counter() - start:.1f} s; the first training step also compiles the model",
        flush=True,
    )
    normalization = normalization_of(plan, x_train)
    in_model = one_setting(plan, "normalize_in_model")
    fed = {**normalization, "mean": None, "std": None} if in_model else normalization  # the pixels as they come
    shard = scale.process()
    train = data.image_dataset(
        x_train, y_train, config.batch_size, pipeline=pipeline, augment=one_setting(plan, "augment"), shuffle=True,
        seed=settings.seed, mixup=config.mixup, cutmix=config.cutmix, num_classes=geometry(plan)[2], shard=shard,
        **fed,
    )  # fmt: skip
    scored = functools.partial(data.image_dataset, batch_size=config.batch_size, shard=shard, pipeline=pipeline)
    steps_per_epoch = -(-len(y_train) // config.batch_size)
    check_updates(config, steps_per_epoch * config.epochs)
    held = {} if valid is None else {"valid_size": len(y_valid)}
    return dict(
        train=train,
        validation=None if valid is None else scored(x_valid, y_valid, **fed),
        test=scored(x_test, y_test, **fed),
        probe=data.normalized(x_test[:PROBE_SIZE], **fed),
        preprocessing={**normalization, "class_names": class_names_of(plan)} if in_model else None,
        steps_per_epoch=steps_per_epoch,
        sizes={"train_size": len(y_train), **held, "test_size": len(y_test)},
    )


# === One variant, built and trained ===


def build_model(plan, variant):
    """A variant's model: its preset with its overrides, or its family's builder with them (a family without
    presets); or (`from_preset`) the preset's trained model adapted to the data's images, its head by the one
    rule (`zoo.fine_tune`): kept on the preset's own data set, fresh for any other's classes."""
    settings, preset, overrides = plan.settings, variant.preset, variant.overrides
    if settings.from_preset is not None:
        found, fresh = source(settings)[0], _fresh_head(plan)
        if found.kind == "preset":
            return keras_tse.zoo.from_preset(preset, num_classes=geometry(plan)[2], new_head=fresh, **overrides)
        from keras_tse.zoo import fine_tune  # Keras: once the plan has chosen the backend

        model = found.load()
        return fine_tune.with_head(model, geometry(plan)[2]) if fresh else model
    if keras_tse.zoo.registry.has_training_presets(settings.model):
        return keras_tse.zoo.from_preset(preset, **overrides)
    name = f"{settings.model}_{preset or settings.dataset}_{overrides.get('norm')}"
    named = {"name": name} if keras_tse.zoo.registry.accepts(settings.model, "name") else {}
    return keras_tse.zoo.create_model(settings.model, **{**named, **overrides})


def _fresh_head(plan):
    """Whether a fine-tuned model gets a fresh head: the head rule, whose "said so" is that the classes are the
    model's only on the data set it was trained on (a benchmark's, by name; a user's own, by its class names in
    order)."""
    from keras_tse.zoo import fine_tune

    found, _, (_, _, classes, names) = source(plan.settings)
    own = plan.spec.own and names and tuple(names) == tuple(class_names_of(plan))
    other_classes = not (own or (not plan.spec.own and found.dataset == plan.settings.dataset))
    return fine_tune.new_head(classes, geometry(plan)[2], other_classes)


def with_lora(plan, model):
    """`model` with LoRA adapters of rank --lora-rank on its blocks' projections and the rest frozen but a fresh
    head, which trains whole (`zoo.lora`); `model` as it is without the flag."""
    if plan.settings.lora_rank is None:
        return model
    from keras_tse import lora

    lora.enable_lora(model, plan.settings.lora_rank, train=["head"] if _fresh_head(plan) else [])
    return model


def with_preprocessor(model, preprocessing):
    """`model` taking raw images: its first layer an `ImagePreprocessor` to its input's size and channels, with
    the training data's statistics and class names (`preprocessing`), which it replaces where it had one."""
    from keras_tse.zoo import preprocessing as zoo_preprocessing  # Keras: once a model is built

    core = zoo_preprocessing.core_of(model)
    size, channels = core.input.shape[1], core.input.shape[-1]
    preprocessor = keras_tse.layers.ImagePreprocessor(size, channels, **preprocessing, name="image_preprocessor")
    return zoo_preprocessing.with_preprocessing(model, preprocessor)


def fit(plan, variant, prepared):
    """One variant built and trained into its folder (TensorFlow's MirroredStrategy: built, compiled and
    fitted in its scope)."""
    from keras_tse.training import runner, scale  # Keras: once the plan has chosen the backend

    config = variant.config
    with scale.replica_scope():
        model = build_model(plan, variant)
        if prepared["preprocessing"] is not None:
            model = with_preprocessor(model, prepared["preprocessing"])
        model = with_lora(plan, model)
        run_dir = plans.variant_folder(plan, variant)
        size = f"{model.count_params():,} parameters"
        if plan.settings.lora_rank:
            trainable = sum(math.prod(variable.shape) for variable in model.trainable_weights)
            size += f", {trainable:,} of them trained (LoRA rank {plan.settings.lora_rank})"
        print(f"\n=== {variant.norm}: {model.name}, {size}, lr {config.learning_rate:g} -> {run_dir}")
        return runner.fit_variant(
            model,
            prepared["train"],
            prepared["test"],
            run_dir,
            config,
            prepared["probe"],
            prepared["steps_per_epoch"],
            extra_config={**variant.settings, **prepared["sizes"]},
            verbose=plan.settings.verbose or "auto",
            before=augment_before(plan.settings),
            validation=prepared["validation"],
            checked=variant.known,
        )


def finish(plan, summaries):
    from keras_tse.training import runner  # Keras: once the plan has chosen the backend

    settings, spec = plan.settings, plan.spec
    name = os.path.basename(settings.data_dir.rstrip("/")) if spec.own else spec.title
    family = keras_tse.zoo.get_family(settings.model).title
    title = f"{family} on {name} (Yu & Zhang Fig. 6 layout)" + (
        f" - smoke run, {spec.smoke_note}" if settings.smoke else ""
    )
    runner.finish_recipe(
        summaries, runner.summary_line, plan.out, layout_names(), "history.csv", _plot_histories, title
    )


def _plot_histories(folders, path, title):
    from keras_tse.training import plots

    plots.plot_losses(
        {norm: read_history(os.path.join(folder, "history.csv")) for norm, folder in folders.items()}, path, title
    )


KIND = plans.RunKind(
    task="images",
    name=NAME,
    defaults=DEFAULTS,
    variant_names=layout_names,
    resolve=resolve,
    check=check,
    base_config=base_config,
    variant=variant,
    before=augment_before,
    prepare=prepare,
    fit=fit,
    finish=finish,
)
