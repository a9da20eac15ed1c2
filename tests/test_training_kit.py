"""The training kit: each setting reaches the optimizer, the schedule or the loss; at their defaults
the optimizers are the paper's, so a default run trains as before."""

import dataclasses
import json

import keras
import numpy as np
import pytest

from keras_tse import _checks
from keras_tse.losses import SparseCategoricalCrossentropyWithSmoothing
from keras_tse.training import LMTrainConfig, TrainConfig, recorded
from keras_tse.training.optimizers import learning_rate_schedule, make_optimizer
from tests.helpers import run_recipe_here, tiny_vit

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py


def _rates(schedule, steps):
    return [float(keras.ops.convert_to_numpy(schedule(step))) for step in steps]


def _data(n=16):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 8, 8, 1)).astype("float32"), rng.integers(0, 10, n)


def _losses(optimizer, x, y, epochs=3):
    keras.utils.set_random_seed(0)
    model = tiny_vit()
    model.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, model.fit(x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0).history["loss"]


def test_default_settings_build_the_paper_s_optimizers_and_train_as_before():
    config, total = TrainConfig(learning_rate=1e-3), 40
    before = keras.optimizers.AdamW(
        keras.optimizers.schedules.PiecewiseConstantDecay([28, 36], [1e-3, 2e-4, 4e-5]), weight_decay=0.1
    )
    before.exclude_from_weight_decay(var_names=["tau"])
    x, y = _data()
    np.testing.assert_array_equal(_losses(make_optimizer(config, total), x, y)[1], _losses(before, x, y)[1])
    lm = make_optimizer(LMTrainConfig(steps=100), 100)  # Sec. 3.4: Adam, epsilon 1e-8, cosine to 0, no clipping
    assert (
        not isinstance(lm, keras.optimizers.AdamW)
        and isinstance(lm, keras.optimizers.Adam)
        and lm.epsilon == 1e-8
        and lm.clipnorm is None
        and not lm.use_ema
    )
    cosine = learning_rate_schedule(LMTrainConfig(steps=100), 100)
    assert _rates(cosine, [0, 50, 100]) == pytest.approx([2.5e-4, 1.25e-4, 0.0], abs=1e-9)


def test_warmup_rises_linearly_then_hands_over_to_each_schedule():
    step = learning_rate_schedule(TrainConfig(learning_rate=1e-3, warmup_steps=10), 100)
    # PiecewiseConstantDecay holds a value through its boundary step: the drops land at 71 and 91
    assert _rates(step, [0, 4, 9, 10, 70, 71, 91]) == pytest.approx([1e-4, 5e-4, 1e-3, 1e-3, 1e-3, 2e-4, 4e-5])
    cosine = learning_rate_schedule(LMTrainConfig(learning_rate=1e-3, warmup_steps=10, steps=110), 110)
    assert _rates(cosine, [0, 5, 10, 60, 110]) == pytest.approx([0.0, 5e-4, 1e-3, 5e-4, 0.0], abs=1e-9)
    constant = learning_rate_schedule(TrainConfig(learning_rate=1e-3, schedule="constant", warmup_steps=4), 100)
    assert _rates(constant, [0, 3, 50]) == pytest.approx([2.5e-4, 1e-3, 1e-3])
    longer = learning_rate_schedule(TrainConfig(learning_rate=1e-3, warmup_steps=1000), 100)
    assert _rates(longer, [0, 99]) == pytest.approx([1e-6, 1e-4])  # a warmup longer than the run still trains


def test_clipping_ema_decay_and_accumulation_reach_the_optimizer():
    kit = dict(clipnorm=0.5, ema=0.9, grad_accum=3, weight_decay=0.01)
    optimizer = make_optimizer(LMTrainConfig(**kit), 10)
    assert isinstance(optimizer, keras.optimizers.AdamW) and optimizer.weight_decay == 0.01
    assert (optimizer.clipnorm, optimizer.use_ema, optimizer.ema_momentum) == (0.5, True, 0.9)
    assert optimizer.gradient_accumulation_steps == 3
    assert make_optimizer(TrainConfig(global_clipnorm=1.0), 10).global_clipnorm == 1.0
    with pytest.raises(ValueError, match=r"Received: ema=1.0"):
        TrainConfig(ema=1.0)
    with pytest.raises(ValueError, match=r"Received: schedule='linear'"):
        LMTrainConfig(schedule="linear")


def test_ema_weights_are_what_the_model_ends_with_and_differ_from_the_raw_training():
    x, y = _data()
    optimizer = make_optimizer(TrainConfig(learning_rate=1e-2, ema=0.5), 6)
    averaged_model, _ = _losses(optimizer, x, y, epochs=1)
    raw_model, _ = _losses(make_optimizer(TrainConfig(learning_rate=1e-2), 6), x, y, epochs=1)
    averaged = [keras.ops.convert_to_numpy(v) for v in optimizer._model_variables_moving_average]
    ended = [keras.ops.convert_to_numpy(v) for v in averaged_model.trainable_variables]
    raw = [keras.ops.convert_to_numpy(v) for v in raw_model.trainable_variables]
    for a, e in zip(averaged, ended):  # fit ends by swapping the averages in
        np.testing.assert_allclose(e, a, atol=1e-7)
    assert max(np.abs(e - r).max() for e, r in zip(ended, raw)) > 1e-4


def test_accumulating_two_batches_updates_as_one_batch_of_both():
    x, y = _data(8)
    keras.utils.set_random_seed(0)
    big = tiny_vit()
    big.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    big.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    keras.utils.set_random_seed(0)
    accumulated = tiny_vit()
    optimizer = keras.optimizers.Adam(1e-2, gradient_accumulation_steps=2)
    accumulated.compile(optimizer, keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    accumulated.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)  # two batches of 4, one update
    for a, b in zip(accumulated.get_weights(), big.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-4)  # an Adam step of 1e-2 per weight, equal to 1%


def test_label_smoothing_spreads_the_target_as_keras_does_for_one_hot_labels():
    logits = np.array([[4.0, 0.0, -1.0], [0.5, 2.0, 0.1]], "float32")
    labels = np.array([0, 1])
    smooth = SparseCategoricalCrossentropyWithSmoothing(0.1)(labels, logits)
    one_hot = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)(np.eye(3)[labels], logits)
    plain = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    assert float(smooth) == pytest.approx(float(one_hot), rel=1e-6) and float(smooth) > float(plain)


@pytest.mark.parametrize("pipeline", ["numpy", "tf"])
def test_mixup_mixes_each_image_and_its_target_with_the_same_partner_and_weight(pipeline):
    from keras_tse.data import image_dataset

    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (32, 6, 6, 1)).astype("uint8"), np.arange(32) % 4
    plain = image_dataset(x, y, 32, mean=(0.5,), std=(0.25,), pipeline=pipeline)
    mixed = image_dataset(x, y, 32, mean=(0.5,), std=(0.25,), pipeline=pipeline, mixup=0.4, num_classes=4)
    (images, _), (mixed_images, targets) = [tuple(map(np.asarray, next(iter(d)))) for d in (plain, mixed)]
    np.testing.assert_allclose(targets.sum(-1), 1.0, atol=1e-6)
    soft = [i for i in range(32) if targets[i].max() < 0.999]
    assert len(soft) >= 8, targets  # pairs of different classes are mixed
    for i in soft:  # image i = w x_i + (1 - w) x_j, target = w e_{y_i} + (1 - w) e_{y_j}: the same j and w
        w, other = targets[i, y[i]], [c for c in np.nonzero(targets[i] > 1e-6)[0] if c != y[i]][0]
        partners = [
            j
            for j in np.nonzero(y == other)[0]
            if np.allclose(mixed_images[i], w * images[i] + (1 - w) * images[j], atol=1e-4)
        ]
        assert partners, i


@pytest.mark.parametrize("config_class", [TrainConfig, LMTrainConfig])
def test_a_run_folder_made_before_a_field_existed_resumes_as_if_it_held_the_default(config_class, tmp_path):
    """No list of added fields: a stored config lacking fields (a run from before the kit) is compared as
    if it held their defaults, so it resumes under the defaults and is refused under another value."""
    from keras_tse.run_files import write_json
    from keras_tse.training import RunFolderMismatch, check_run_folder, defaults_of

    kit = ("warmup_steps", "schedule", "ema", "grad_accum", "global_clipnorm")
    old = {k: v for k, v in recorded(config_class()).items() if k not in kit}  # as such a run wrote it
    write_json(str(tmp_path / "config.json"), {"model": "m", "train": old})
    config = config_class()
    assert set(recorded(config)) == {f.name for f in dataclasses.fields(config_class)}  # every field recorded
    assert check_run_folder(str(tmp_path), {"model": "m", "train": recorded(config)}, defaults=defaults_of(config)) == (
        "resume"
    )
    changed = dataclasses.replace(config, warmup_steps=5)
    with pytest.raises(RunFolderMismatch, match="received train.warmup_steps 5; expected 0"):
        check_run_folder(str(tmp_path), {"model": "m", "train": recorded(changed)}, defaults=defaults_of(changed))


@pytest.mark.large
@pytest.mark.parametrize(
    "recipe, argv",
    [
        (
            "cifar10_vit",
            ["--epochs", "1", "--label-smoothing", "0.1", "--schedule", "cosine", "--mixup", "0.2", "--cutmix", "1.0"],
        ),
        ("wikitext103_txl", ["--steps", "4", "--schedule", "step", "--weight-decay", "0.01"]),
    ],
)
def test_the_recipes_take_the_kit_and_record_it(recipe, argv, tmp_path, capsys):
    kit = ["--warmup-steps", "2", "--ema", "0.9", "--grad-accum", "2", "--global-clipnorm", "1.0", "--drop-path", "0.2"]
    code, _, err = run_recipe_here(
        recipe, ["--smoke", "--depth", "2", "--norm", "deescalate", *argv, *kit, "--out", str(tmp_path)], capsys
    )
    assert code == 0, err[-3000:]
    with open(tmp_path / "deescalate" / "config.json") as f:
        train = json.load(f)["train"]
    assert (train["warmup_steps"], train["ema"], train["grad_accum"], train["global_clipnorm"]) == (2, 0.9, 2, 1.0)
    assert train["schedule"] == argv[argv.index("--schedule") + 1]
    if "--mixup" in argv:  # mixed soft targets in training, class ids in the test set, one accuracy for both
        assert (train["mixup"], train["cutmix"]) == (0.2, 1.0)
        with open(tmp_path / "deescalate" / "summary.json") as f:
            summary = json.load(f)
        assert 0.0 <= summary["train_accuracy"] <= 1.0 and 0.0 <= summary["test_accuracy"] <= 1.0
    # --drop-path reaches the model: timm's linear rule over the two blocks, kept in the checkpoint
    model = keras.saving.load_model(tmp_path / "deescalate" / "checkpoints" / "last.keras")
    assert [model.get_layer(f"block_{i:02d}").drop_path for i in range(2)] == [0.0, 0.2]


@pytest.mark.every_backend
@pytest.mark.parametrize("scan", [False, True])
def test_timms_weight_decay_rule_spares_1d_weights_and_embeddings_and_shrinks_the_rest_by_exactly_the_decay(scan):
    """One AdamW step on zero gradients: an excluded variable stays put, every other one becomes
    w (1 - lr wd) (decoupled decay); under "all" only a learned tau is spared."""
    from keras_tse import zoo
    from keras_tse.training.optimizers import no_decay_variables

    model = zoo.vit(depth=2, image_size=8, patch_size=4, channels=1, hidden_dim=8, ffn_dim=16, num_heads=2,
                    num_classes=3, norm="layerscale", scan=scan)  # fmt: skip
    spared = {id(v) for v in no_decay_variables(model)}
    names = sorted(v.path for v in model.trainable_weights if id(v) in spared)
    assert any("position_embedding" in n for n in names) and any("class_token" in n for n in names)
    assert any(n.endswith("gamma") or "norm" in n for n in names) and any("scale" in n for n in names)
    decayed = [v for v in model.trainable_weights if id(v) not in spared]
    kernels = {v.path for v in decayed}
    assert any("kernel" in n for n in kernels) and not any(n.endswith("bias") for n in kernels)
    lr, wd = 0.1, 0.5
    for rule, expected_spared in (("timm", spared), ("all", set())):
        config = TrainConfig(learning_rate=lr, weight_decay=wd, schedule="constant", weight_decay_rule=rule)
        optimizer = make_optimizer(config, 10, model)
        before = [np.array(keras.ops.convert_to_numpy(v)) for v in model.trainable_weights]
        optimizer.apply_gradients([(keras.ops.zeros(v.shape, v.dtype), v) for v in model.trainable_weights])
        for value, v in zip(before, model.trainable_weights):
            after = keras.ops.convert_to_numpy(v)
            factor = 1.0 if id(v) in expected_spared else 1.0 - lr * wd
            np.testing.assert_allclose(after, value * factor, rtol=1e-5, atol=1e-7, err_msg=f"{rule}: {v.path}")
            v.assign(value)


def test_an_older_run_resumes_with_the_weight_decay_rule_it_began_with(tmp_path):
    """The rule's default changed (timm's); a run folder from before it decayed every weight, and resumes so
    unless the command sets the rule; a new folder, or one that recorded the rule, takes what it says."""
    from keras_tse.run_files import write_json
    from keras_tse.training import as_started, check_run_folder, defaults_of

    old = {k: v for k, v in recorded(TrainConfig()).items() if k != "weight_decay_rule"}
    write_json(str(tmp_path / "old" / "config.json"), {"model": "m", "train": old})
    config = as_started(str(tmp_path / "old"), TrainConfig())
    assert config.weight_decay_rule == "all"
    given = {"model": "m", "train": recorded(config)}
    assert check_run_folder(str(tmp_path / "old"), given, defaults=defaults_of(config)) == "resume"
    assert as_started(str(tmp_path / "old"), TrainConfig(), {"weight_decay_rule": "timm"}).weight_decay_rule == "timm"
    assert as_started(str(tmp_path / "new"), TrainConfig()).weight_decay_rule == "timm"
    write_json(str(tmp_path / "recorded" / "config.json"), {"train": recorded(TrainConfig())})
    assert as_started(str(tmp_path / "recorded"), TrainConfig(weight_decay_rule="all")).weight_decay_rule == "timm"


def test_each_data_set_trains_with_its_own_augmentation_and_an_older_run_resumes_with_what_it_had(tmp_path):
    """A new run takes its data set's augmentation unless told; a run folder from before the choice
    trained with RandAugment on CIFAR-10 and nothing elsewhere, and resumes so; `--augment` overrides."""
    from keras_tse.run_files import write_json
    from keras_tse.training import check_run_folder, defaults_of, image_runs
    from tests.helpers import planned

    def config_of(*argv):
        return planned("cifar10_vit", [*argv, "--norm", "deescalate"]).variant("deescalate").config

    for dataset, new, old in (("cifar10", "randaugment", "randaugment"), ("fashion_mnist", "crop_flip", "none")):
        argv = ["--dataset", dataset, "--out", str(tmp_path / dataset)]
        config = config_of(*argv)
        assert config.augment == new
        before = {k: v for k, v in recorded(config).items() if k not in ("augment", "data_pipeline")}
        write_json(str(tmp_path / dataset / "deescalate" / "config.json"), {"model": "m", "train": before})
        config = config_of(*argv)
        assert config.augment == old
        given = {"model": "m", "train": recorded(config)}
        defaults = defaults_of(config, image_runs.augment_before(planned("cifar10_vit", argv).settings))
        assert check_run_folder(str(tmp_path / dataset / "deescalate"), given, defaults=defaults) == "resume"
    told = ["--dataset", "fashion_mnist", "--augment", "crop_flip", "--out", str(tmp_path / "fashion_mnist")]
    assert config_of(*told).augment == "crop_flip"
    assert config_of("--dataset", "digits", "--out", str(tmp_path / "digits")).augment == "none"


def test_a_new_kit_option_is_one_field_its_flag_check_record_and_resume_follow(tmp_path, capsys):
    """One `option` field added to a task's settings (nothing else): its flag appears with its help and the
    task's default, a good value reaches the settings and config.json, a bad one is one line in its check's
    words, the Python keyword is checked alike, and a folder written before the field resumes."""
    from keras_tse.cli import flags
    from keras_tse.run_files import write_json
    from keras_tse.training import RunFolderMismatch, check_run_folder, defaults_of
    from keras_tse.training.configs import option
    from keras_tse.training.run_settings import kit_settings

    @dataclasses.dataclass
    class WithLookahead(TrainConfig):
        lookahead_steps: int = option(0, _checks.non_negative_int, "Lookahead's k (0: off)")

    parser = flags.Parser(prog="keras-tse train vit")
    flags.add_training_kit(parser, WithLookahead(epochs=3))
    assert "--lookahead-steps" in parser.format_help() and "Lookahead's k (0: off) (default: 0)" in parser.format_help()
    args = parser.parse_args(["--lookahead-steps", "5", "--schedule", "cosine"])
    config = dataclasses.replace(WithLookahead(epochs=3), **kit_settings(args, WithLookahead()))
    assert (config.lookahead_steps, config.schedule, config.epochs) == (5, "cosine", 3)
    assert recorded(config)["lookahead_steps"] == 5
    with pytest.raises(SystemExit):
        parser.parse_args(["--lookahead-steps", "-1"])
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "keras-tse train vit: error: --lookahead-steps: received '-1'; expected an integer >= 0"
    )
    with pytest.raises(ValueError, match=r"`lookahead_steps` must be an integer >= 0. Received: lookahead_steps=-1"):
        WithLookahead(lookahead_steps=-1)
    old = {k: v for k, v in recorded(WithLookahead()).items() if k != "lookahead_steps"}  # a run from before
    write_json(str(tmp_path / "config.json"), {"model": "m", "train": old})
    default = WithLookahead()
    assert check_run_folder(str(tmp_path), {"model": "m", "train": recorded(default)}, defaults=defaults_of(default))
    changed = dataclasses.replace(default, lookahead_steps=5)
    with pytest.raises(RunFolderMismatch, match="received train.lookahead_steps 5; expected 0"):
        check_run_folder(str(tmp_path), {"model": "m", "train": recorded(changed)}, defaults=defaults_of(changed))


def test_a_new_kit_option_trains_from_the_command_line_with_nothing_else_changed(tmp_path, monkeypatch, capsys):
    """The image task's settings with one more option field (as if written in configs.py): `keras-tse train`
    takes its flag and the run records it, no other line of the project changed."""
    from keras_tse.cli import main as cli
    from keras_tse.cli import train_vit
    from keras_tse.training import image_runs
    from keras_tse.training.configs import option

    @dataclasses.dataclass
    class WithLookahead(TrainConfig):
        lookahead_steps: int = option(0, _checks.non_negative_int, "Lookahead's k (0: off)")

    train = WithLookahead(**dataclasses.asdict(image_runs.TRAIN))
    for module in (train_vit, image_runs):  # the flags' defaults, and the run's settings
        monkeypatch.setattr(module, "TRAIN", train)
    monkeypatch.setitem(image_runs.DEFAULTS, "lookahead_steps", None)  # as configs.py's fields are at import
    argv = ["train", "--dataset", "digits", "--depth", "1", "--hidden-dim", "16", "--num-heads", "2", "--epochs", "1"]
    out = tmp_path / "run"
    assert cli.main([*argv, "--norm", "pre", "--lookahead-steps", "3", "--verbose", "0", "--out", str(out)]) == 0
    with open(out / "pre" / "config.json") as f:
        assert json.load(f)["train"]["lookahead_steps"] == 3
    capsys.readouterr()
    with pytest.raises(SystemExit, match="2"):
        cli.main([*argv, "--norm", "pre", "--lookahead-steps", "x", "--out", str(out)])
    assert "--lookahead-steps: received 'x'; expected an integer >= 0" in capsys.readouterr().err
