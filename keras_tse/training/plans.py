"""A training run described once: its settings, the data as surveyed, the run folder and every variant's
model and training settings, made and checked once, before any data is read; `trainer.train(plan)` runs it.

The command line and Python build the same plan (`keras-tse train vit --dataset digits --depth 4` and
`Plan.build("images", dataset="digits", depth=4)`), as Keras builds a model from a config:

    plan = keras_tse.training.Plan.build("images", dataset="digits", depth=4, epochs=3, norm=("post", "deescalate"))
    summaries = keras_tse.training.train(plan)

A run's kind (`RunKind`: image classification, `image_runs.IMAGES`; language modelling, `text_runs.TEXT`)
declares every setting it takes with its default (the flags of `keras-tse train` are those names), how a
plan is made from them, and how its data is read and each variant fitted. Families and data sets declare
what a kind asks of them (`zoo.register_family`, `data.DatasetSpec`), so no name is special-cased here.
"""

import dataclasses
import importlib
import os

from keras_tse import data
from keras_tse._checks import InputError
from keras_tse.training import scale_settings

# a data set's task -> the module of its run kind (`RunKind`), imported on use
RUN_KINDS = {"images": "keras_tse.training.image_runs", "text": "keras_tse.training.text_runs"}
# --out's default: the data set, and the family or the preset fine-tuned (runs/cifar10_vit)
RUN_FOLDER = "runs/{dataset}_{name}"


class Settings:
    """A run's settings by name, read-only: each one its kind declares, given or at its default."""

    def __init__(self, defaults, **given):
        unknown = sorted(set(given) - set(defaults))
        if unknown:
            raise InputError(
                unknown[0], repr(given[unknown[0]]), f"a setting of the run: {', '.join(sorted(defaults))}"
            )
        object.__setattr__(self, "_values", {**defaults, **given})

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        raise AttributeError(f"a run's settings are read-only: settings.replace({name}=...)")

    def replace(self, **changes):
        return Settings(self._values, **changes)

    def as_dict(self):
        return dict(self._values)


def run_folder_of(values):
    """A run's folder where none is given: `RUN_FOLDER`, `_smoke` after it for a smoke run (never the real
    run's folder, which would then refuse the real settings)."""
    tuned = values.get("from_preset")  # a path: its last name, so the run's folder stays under runs/
    tuned = tuned and os.path.basename(os.path.normpath(tuned)).removesuffix(".keras")
    named = {**values, "name": tuned or values["model"]}
    return RUN_FOLDER.format(**named) + ("_smoke" if values.get("smoke") else "")


@dataclasses.dataclass(frozen=True)
class RunKind:
    """What one kind of training run declares, the trainer's one interface to it.

    Args:
        task: the data registry's task of its data sets and families (`"images"`, `"text"`).
        name: the name a run folder's manifest records (`run_files.claim_folder`).
        defaults: every setting it takes, by name, with its default (`keras-tse train`'s flags).
        variant_names: the subfolders a run may write (the layouts it trains).
        resolve: `(settings) -> settings` with what the others imply filled in (the variants of a preset);
            a user's data set without `data_dir` is refused here, before it is surveyed.
        check: `(settings, survey)`: one line for each bad setting, before any data is read.
        base_config: `(settings, jit_compile) -> training settings` every variant starts from.
        variant: `(plan, norm, base) -> Variant`, all known before any data.
        before: `(settings) -> {field: value}` a folder made before a setting existed ran with.
        prepare: `(plan) -> prepared data`, read once for every variant.
        fit: `(plan, variant, prepared) -> summary`: one variant built and trained into its folder.
        finish: `(plan, summaries)`: the plot and the lines that end the run.
    """

    task: str
    name: str
    defaults: dict
    variant_names: object
    resolve: object
    check: object
    base_config: object
    variant: object
    before: object
    prepare: object
    fit: object
    finish: object


@dataclasses.dataclass(frozen=True)
class Variant:
    """One layout of a run: its preset (None: the family's builder defaults), builder overrides, training
    settings as its run began, and `known`, the record its folder is checked against before any data."""

    norm: str
    preset: str
    overrides: dict
    config: object
    settings: dict
    known: dict

    @property
    def folder(self):
        return self.norm


@dataclasses.dataclass(frozen=True)
class Plan:
    """A training run, made once (`Plan.build`), run by `trainer.train`.

    Args:
        kind: its `RunKind`.
        settings: its `Settings`.
        out: the run folder (one subfolder per variant).
        survey: a user's own data as surveyed once (`data.own.Survey`), or None for a benchmark set.
        fingerprint: a digest of the user's data files (None for a benchmark set).
        manifest: the settings the run folder's manifest records.
        variants: its `Variant`s, in training order.
    """

    kind: RunKind
    settings: Settings
    out: str
    survey: object
    fingerprint: str
    manifest: dict
    variants: tuple = ()

    @property
    def spec(self):
        return data.get_dataset(self.settings.dataset)

    def variant(self, norm):
        """The variant of layout `norm`."""
        (found,) = [variant for variant in self.variants if variant.norm == norm]
        return found

    @classmethod
    def build(cls, task="images", **settings):
        """The plan of a run of `task`'s kind with `settings` (by the flags' names; the others at their
        defaults): every setting checked, the data surveyed, Keras's backend configured."""
        kind = run_kind(task)
        return plan_of(kind, Settings(kind.defaults, **settings))


def run_kind(task):
    if task not in RUN_KINDS:
        raise InputError("task", repr(task), f"one of {', '.join(RUN_KINDS)}")
    return importlib.import_module(RUN_KINDS[task]).KIND


def plan_of(kind, settings):
    """The one way a plan is made: settings resolved and checked, the data surveyed and fingerprinted once,
    the processes joined (`scale.configure`), each variant's settings made."""
    settings = kind.resolve(settings)
    if settings.out is None:
        settings = settings.replace(out=run_folder_of(settings.as_dict()))
    spec = data.get_dataset(settings.dataset)
    survey = spec.surveyed(settings.data_dir, image_size=getattr(settings, "image_size", None), seed=settings.seed)
    kind.check(settings, survey)
    _check_out_of_data(settings, survey)
    fingerprint = data.fingerprint(settings.data_dir, survey.files) if survey else None

    from keras_tse.training import scale  # Keras: after every check, so a bad setting answers at once

    jit_compile = scale.configure(**scale_settings.settings_of(settings.as_dict()))  # joins the other processes
    out = scale.writer_folder(settings.out)  # one writer when several processes train together
    manifest = {"dataset": settings.dataset, "data": fingerprint, "smoke": settings.smoke, "seed": settings.seed}
    if settings.model != kind.defaults["model"]:  # the task's own family: its folders' manifests as they were
        manifest["model"] = settings.model
    plan = Plan(kind, settings, out, survey, fingerprint, manifest)
    base = kind.base_config(settings, jit_compile)
    return dataclasses.replace(plan, variants=tuple(kind.variant(plan, norm, base) for norm in settings.norm))


def _check_out_of_data(settings, survey):
    """A run folder inside a data folder whose every subfolder is data would be read as data by the next run
    (an image folder's class named `runs`): refused before anything is written."""
    if survey is None or not survey.subfolders_are_data:
        return
    data_dir, out = os.path.realpath(settings.data_dir), os.path.realpath(settings.out)
    if os.path.commonpath([data_dir, out]) == data_dir:
        where = f"a folder outside --data-dir {settings.data_dir} (a run folder inside it would be read as its data)"
        raise InputError("--out", settings.out, where)


def variant_folder(plan, variant):
    return os.path.join(plan.out, variant.folder)
