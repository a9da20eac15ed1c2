"""The input pipeline: batches of (normalised, optionally augmented) images for `fit`.

Two pipelines, chosen by name, never by what is installed: `"numpy"` (the default), a
`keras.utils.PyDataset` of NumPy batches that runs wherever Keras does (the GPU hosts have no
TensorFlow), and `"tf"`, tf.data, whose parallel map runs the augmentation in TensorFlow's graph. Each
epoch's order is one definition (`epoch_order`, a function of the seed and the epoch) that both follow,
so without augmentation or mixing they give the same batches; the augmentation's random draws are each
pipeline's own (TensorFlow's ops inside tf.data, the backend's outside), so a run records which one it
trained with.
"""

import contextlib
import importlib.util
import math
import os
import sys

import keras
import numpy as np

from keras_tse import _checks
from keras_tse.data.registry import AUGMENTATIONS, PIPELINES

CROP_PAD = 4  # pixels of zero padding around an image before its random crop, as on CIFAR


def epoch_order(count, seed, epoch, shuffle=True):
    """The order of the `count` examples in epoch `epoch`: a permutation drawn from (seed, epoch) alone,
    not from how many epochs ran before it (a resumed run draws the epoch it resumes at), or the stored
    order without `shuffle`. Both pipelines read it, so an epoch holds the same batches in either."""
    rows = np.arange(count)
    return np.random.default_rng([seed, epoch]).permutation(rows) if shuffle else rows


def image_dataset(
    images,
    labels,
    batch_size,
    *,
    augment="none",
    shuffle=False,
    mean=None,
    std=None,
    value_range=(0, 255),
    seed=0,
    pipeline="numpy",
    mixup=0.0,
    cutmix=0.0,
    num_classes=None,
    shard=(0, 1),
):
    """Batches of `(images, labels)` ready for `fit` / `evaluate`.

    Args:
        images: NumPy `[N, H, W, C]`; uint8 in `value_range` for RandAugment, or float.
        labels: NumPy `[N]` int class ids.
        batch_size: int.
        augment: one of `AUGMENTATIONS`: `"randaugment"` (Cubuk et al. 2020, Keras' defaults: 2 ops,
            factor 0.5), `"crop_flip"` (a random crop of the image padded by `CROP_PAD` zeros, as a
            translation by up to that many pixels with zero fill, then a horizontal flip with
            probability 1/2), or `"none"`. `True` and `False` read as `"randaugment"` and `"none"`.
        shuffle: bool, reshuffle every epoch.
        mean, std: per-channel statistics in `value_range / value_range[1]` units (e.g. CIFAR's),
            or `None` to leave the values as they are.
        seed: shuffling and augmentation seed.
        mixup, cutmix: the alpha of MixUp (Zhang et al. 2018) and of CutMix (Yun et al. 2019), Keras's
            layers, on the normalised batches; `0` leaves them out. With either, the labels come as
            `num_classes`-wide soft targets, mixed as the images are; with both, each batch takes one
            of the two, evenly (timm's switch probability, 0.5).
        num_classes: int, the width of the soft targets; needed with `mixup` or `cutmix`.
        pipeline: `"numpy"` or `"tf"` (tf.data, TensorFlow needed). Both take each epoch's order
            from `epoch_order`; their augmentation and mixing draw from their own generators.
            Defaults to `"numpy"`, which runs the same whatever else is installed.
        shard: `(index, count)`: this process's part of every batch, rows `[index * b / count,
            (index + 1) * b / count)` of each batch of `b` (the last batch too), for one of `count`
            processes training together. Every process draws the same shuffled, augmented global batch
            (same seed) and keeps its part, so together they feed exactly one process's batches.
    """
    index, count = shard
    if not 0 <= index < count:
        raise ValueError(f"`shard` must be (index, count) with 0 <= index < count. Received: shard={shard!r}")
    for size in (batch_size, len(labels) % batch_size or batch_size):
        if size % count:
            raise ValueError(
                f"Every batch must split evenly over {count} processes. Received: a batch of {size} "
                f"({len(labels)} examples in batches of {batch_size}); expected a multiple of {count}."
            )
    if pipeline not in PIPELINES:
        raise ValueError(f"`pipeline` must be one of {PIPELINES}. Received: pipeline={pipeline!r}")
    if isinstance(augment, bool):
        augment = "randaugment" if augment else "none"
    augment = None if _checks.one_of("augment", augment, AUGMENTATIONS) == "none" else (augment, images.shape[1:3])
    tf = None if pipeline == "numpy" else tensorflow_if_installed(required=True)
    mix = _Mix(mixup, cutmix, num_classes, seed) if mixup or cutmix else None
    if tf is None:
        prepare = _Prepare(augment, mean, std, value_range, seed, to_float=lambda x: np.asarray(x, "float32"))
        return _NumpyBatches(images, labels, batch_size, prepare, shuffle, seed, mix, shard)
    prepare = _Prepare(augment, mean, std, value_range, seed, to_float=lambda x: tf.cast(x, tf.float32))
    epoch = tf.Variable(0, dtype=tf.int64, trainable=False)  # `set_epoch`'s; read as each epoch's pass begins
    data = _epoch_batches(tf, images, labels, batch_size, shuffle, seed, epoch)
    if prepare.layers or mix is not None:
        step = _seeded_step(prepare, mix, tf)
    else:
        step = lambda batch, _: (prepare(batch[0]), batch[1])  # noqa: E731
    with equalization_as_in_tensorflow():  # `map` traces `step` here, once
        data = data.map(step, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if count > 1:
        data = data.map(lambda *batch: tuple(_part(tensor, index, count) for tensor in batch))
    data = data.prefetch(tf.data.AUTOTUNE)
    data.set_epoch = lambda number: epoch.assign(number)
    return data


def _epoch_batches(tf, images, labels, batch_size, shuffle, seed, epoch):
    """Batches `((images, labels), batch_seed)` of the epoch `epoch` holds when a pass begins: its order
    and every batch's seed a function of (seed, epoch, batch) alone, not of how many passes came before
    (`shuffle(reshuffle_each_iteration=True)` and `Dataset.random` count passes, and a resumed run, or
    Keras's one-batch pass to build the model, would shift them): a run resumed at any epoch draws that
    epoch's batches, as PyTorch's `DistributedSampler.set_epoch` makes a sampler do."""
    images, labels = tf.constant(images), tf.constant(labels)

    def drawn_order(number):
        return epoch_order(len(labels), seed, int(number), shuffle).astype("int64")

    def one_epoch(_):
        key = tf.stack([tf.constant(seed, tf.int64), epoch.read_value()])
        order = tf.numpy_function(drawn_order, [key[1]], tf.int64, stateful=False)
        order = tf.ensure_shape(order, [len(labels)])
        batches = tf.data.Dataset.from_tensor_slices(order).batch(batch_size).enumerate()
        return batches.map(lambda b, at: ((tf.gather(images, at), tf.gather(labels, at)), _fold(tf, key, b)))

    # flat_map leaves the count of batches unknown, and Keras then warns at the end of each pass over it that
    # the input "ran out of data": every image once an epoch, the last batch the rest
    count = tf.data.experimental.assert_cardinality(-(-len(labels) // batch_size))
    return tf.data.Dataset.from_tensors(0).flat_map(one_epoch).apply(count)


def _fold(tf, key, batch):
    return tf.random.experimental.stateless_fold_in(key, batch)


def _part(batch, index, count):
    """Rows `[index * b / count, (index + 1) * b / count)` of a batch of `b` (NumPy or tf)."""
    size = batch.shape[0] // count if batch.shape[0] is not None else None
    if size is None:  # a tf.data batch of unknown size: slice by its runtime shape
        import tensorflow as tf

        size = tf.shape(batch)[0] // count
    return batch[index * size : (index + 1) * size]


def _seeded_step(prepare, mix, tf):
    """The tf.data map of an augmented batch: `((images, labels), batch_seed) -> (images, labels)`.

    Every random draw of the batch comes from its own seed, one of a stream that is a pure function of
    the seed and of how many times the data set has been iterated (`Dataset.random`,
    `rerandomize_each_iteration`): no state is shared between batches. Keras's layers would otherwise
    draw from one stateful generator, whose position depends on how far a pipeline ran ahead before
    it was dropped (Keras's `fit` opens an iterator for one batch to build the model; prefetch runs
    its map ahead by a timing-dependent count), so the same seed could give other batches, and two
    processes could train on other images than one. Without shared state the map also runs in parallel.
    """
    seeds = _BatchSeeds(tf)
    for layer in prepare.layers + ([] if mix is None else mix.layers):
        seeds.drive(layer)

    def step(batch, batch_seed):
        images, labels = batch
        seeds.start(batch_seed)
        if mix is None:
            return prepare(images), labels
        return mix(prepare(images), labels, tf, seeds.next())

    return step


class _BatchSeeds(keras.random.SeedGenerator):
    """The seed generator Keras's augmentation layers draw from inside the tf.data map: the k-th draw
    of a batch takes the batch's seed folded with k (`stateless_fold_in`). The count runs while the
    map is traced, so each draw of the graph holds its own constant k and the graph keeps no state."""

    def __init__(self, tf):
        super().__init__(seed=0)
        self._tf, self._batch_seed, self._draws = tf, None, 0

    def drive(self, layer):
        """Makes Keras augmentation `layer` draw from this generator. Its draws ask
        `_get_seed_generator(backend)` (RandAugment's operations get RandAugment's), and RandAugment
        ignores a seed passed to `get_random_transformation`: no public argument reaches them all."""
        layer._get_seed_generator = lambda backend=None: self

    def start(self, batch_seed):
        self._batch_seed, self._draws = batch_seed, 0

    def next(self, ordered=True):
        self._draws += 1
        return self._tf.random.experimental.stateless_fold_in(self._batch_seed, self._draws)


@contextlib.contextmanager
def equalization_as_in_tensorflow():
    """While tf.data traces RandAugment, its Equalization op takes TensorFlow's histogram.

    Keras' Equalization picks its histogram by the process's backend, not by the TensorFlow one it
    runs on inside tf.data: under JAX it unrolls a loop over its 256 bins per channel, and the
    RandAugment graph grows from 1,797 ops to 23,281 (measured, Keras 3.15, 2-core CPU: 2 s to trace
    against 38 s, paid at every pipeline build). Both histograms are the same counts
    (tests/test_data.py checks the equalized images are equal), so the augmented batches do not
    change. Where Keras is laid out otherwise, nothing is touched.
    """
    try:
        from keras.src.layers.preprocessing.image_preprocessing import equalization
    except ImportError:
        equalization = None
    found = getattr(equalization, "backend", None)
    if keras.backend.backend() == "tensorflow" or not callable(getattr(found, "backend", None)):
        yield
        return
    equalization.backend = _NamedTensorFlow(found)
    try:
        yield
    finally:
        equalization.backend = found


class _NamedTensorFlow:
    """Keras' backend module, but `backend()` answers "tensorflow" (the ops run in a tf.data graph)."""

    def __init__(self, module):
        self._module = module

    def backend(self):
        return "tensorflow"

    def __getattr__(self, name):
        return getattr(self._module, name)


def tensorflow_installed():
    """Whether TensorFlow is installed, found without importing it (the import takes seconds)."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except ImportError:  # an import hook that refuses it
        return False


@contextlib.contextmanager
def tensorflow_unseen_by_keras(needed):
    """While a run that draws nothing from tf.data trains (`needed` false), Keras is told TensorFlow is absent.

    Keras imports an installed TensorFlow to seed it (`keras.utils.set_random_seed`) and to ask whether a saved
    config holds its types (its serialization, at every checkpoint): one depth-1 JAX run on digits took 18.2
    CPU-s with the import and 15.2 without (the 2-core CPU, measured), for nothing such a run uses. The NumPy
    pipeline gives the same numbers whether TensorFlow can be imported or not (tests/test_bad_inputs.py). Where
    the run needs it, it is imported here, before Keras, so that TF_CPP_MIN_LOG_LEVEL silences its notices.
    Where TensorFlow is imported already (its backend) or Keras is laid out otherwise, Keras sees what it always
    sees.
    """
    if needed:
        tensorflow_if_installed()
    try:
        from keras.src.utils.module_utils import tensorflow as lazy_tensorflow
    except ImportError:
        lazy_tensorflow = None
    if needed or "tensorflow" in sys.modules or not hasattr(lazy_tensorflow, "_available"):
        yield
        return
    probed = lazy_tensorflow._available
    lazy_tensorflow._available = False
    try:
        yield
    finally:
        lazy_tensorflow._available = probed


def tensorflow_if_installed(required=False):
    """The tensorflow module, or None when it is not installed and not `required`. A run calls it (through
    `tensorflow_unseen_by_keras`) before anything else imports TensorFlow, so that TF_CPP_MIN_LOG_LEVEL keeps
    the start-up notices quiet."""
    try:
        with _native_stderr_silenced(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0") not in ("", "0")):
            import tensorflow as tf
    except ImportError:
        if required:
            raise
        return None
    return tf


@contextlib.contextmanager
def _native_stderr_silenced(silence):
    """TensorFlow 2.21 prints its start-up notices (oneDNN, CUDA drivers, CPU features; twice) from C++
    before absl's logging starts, where TF_CPP_MIN_LOG_LEVEL does not reach them. A user who set that
    variable asked for quiet, so the import runs with file descriptor 2 on /dev/null; a Python error of
    the import still raises, after stderr is back."""
    if not silence or "tensorflow" in sys.modules:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def normalized(images, mean, std, value_range=(0, 255)):
    """NumPy float32 images scaled as `image_dataset` scales them (no augmentation): probe batches."""
    return _Prepare(None, mean, std, value_range, 0, to_float=lambda x: np.asarray(x, "float32"))(images)


class _Prepare:
    """float32 -> the augmentation (in `value_range`) -> `(x / max - mean) / std`.

    Plain arithmetic, so one object serves tf.data graphs (tf tensors) and NumPy batches; Keras's
    augmentation layers themselves switch to TensorFlow ops inside tf.data whatever the backend.
    `augment`: None, or (its name, the images' (height, width)).
    """

    def __init__(self, augment, mean, std, value_range, seed, to_float):
        self.to_float = to_float
        self.layers = [] if augment is None else _augmenters(*augment, value_range, seed)
        self.scale = None if mean is None else float(value_range[1])
        self.mean = None if mean is None else np.asarray(mean, "float32")
        self.std = None if std is None else np.asarray(std, "float32")

    def reseed(self, key):
        """Every augmentation layer's generator started from `key` (ints): a NumPy batch's draws a function of
        its own key, not of the batches drawn before it."""
        for k, layer in enumerate(self.layers):
            _restart(layer, [*key, k])

    def __call__(self, x):
        x = self.to_float(x)
        for layer in self.layers:
            x = self.to_float(layer(x))
        if self.mean is not None:
            x = (x / self.scale - self.mean) / self.std
        return x


def _restart(layer, key):
    """Keras augmentation `layer`'s seed generator at the state seeded by `key` (the state Keras's own
    `SeedGenerator(seed)` starts from: `[0, seed]`)."""
    seed = int(np.random.default_rng(key).integers(2**31))
    layer.generator.state.assign(np.asarray([0, seed], layer.generator.state.dtype))


def _augmenters(name, size, value_range, seed):
    """The Keras layers of augmentation `name`, applied in order."""
    if name == "randaugment":
        return [keras.layers.RandAugment(value_range=value_range, seed=seed)]
    height, width = size
    shift = keras.layers.RandomTranslation(
        CROP_PAD / height, CROP_PAD / width, fill_mode="constant", interpolation="nearest", seed=seed
    )
    return [shift, keras.layers.RandomFlip("horizontal", seed=seed + 1)]


class _Mix:
    """MixUp and/or CutMix on a batch of normalised images and integer labels: the labels one-hot,
    then mixed with the images' pairs and weights by Keras's layer; with both, one layer per batch,
    drawn evenly. `tf` is TensorFlow inside a tf.data map (the draw then runs in the graph, from the
    batch's `seed`), or None."""

    def __init__(self, mixup, cutmix, num_classes, seed):
        if not num_classes:
            raise ValueError(f"MixUp and CutMix need the number of classes. Received: num_classes={num_classes!r}")
        chosen = ((mixup, keras.layers.MixUp), (cutmix, keras.layers.CutMix))
        self.layers = [layer(alpha, seed=seed) for alpha, layer in chosen if alpha]
        self.num_classes, self.rng = num_classes, np.random.default_rng(seed)

    def reseed(self, key):
        """A NumPy batch's mixing drawn from `key` alone (which layer, and its draws)."""
        self.rng = np.random.default_rng(key)
        for k, layer in enumerate(self.layers):
            _restart(layer, [*key, k])

    def __call__(self, images, labels, tf=None, seed=None):
        if tf is None:
            targets = np.eye(self.num_classes, dtype="float32")[np.asarray(labels).reshape(-1)]
            layer = self.layers[int(self.rng.integers(len(self.layers)))]
            mixed = layer({"images": images, "labels": targets})
            return keras.ops.convert_to_numpy(mixed["images"]), keras.ops.convert_to_numpy(mixed["labels"])
        targets = tf.one_hot(tf.reshape(tf.cast(labels, tf.int32), [-1]), self.num_classes)
        branches = [lambda layer=layer: _pair(layer({"images": images, "labels": targets})) for layer in self.layers]
        if len(branches) == 1:
            return branches[0]()
        return tf.cond(tf.random.stateless_uniform((), seed) < 0.5, branches[0], branches[1])


def _pair(mixed):
    return mixed["images"], mixed["labels"]


class _NumpyBatches(keras.utils.PyDataset):
    def __init__(self, images, labels, batch_size, prepare, shuffle, seed, mix=None, shard=(0, 1)):
        super().__init__()
        self.shard = shard
        self.images, self.labels, self.batch_size = images, labels, batch_size
        self.prepare, self.shuffle, self.mix, self.seed = prepare, shuffle, mix, seed
        self.set_epoch(0)

    def set_epoch(self, epoch):
        """The order of epoch `epoch` and its batches' augmentation: a function of (seed, epoch, batch) alone, as
        the tf.data pipeline's."""
        self.epoch, self.order = epoch, epoch_order(len(self.labels), self.seed, epoch, self.shuffle)

    def __len__(self):
        return math.ceil(len(self.labels) / self.batch_size)

    def __getitem__(self, index):
        rows = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        self.prepare.reseed([self.seed, self.epoch, index])
        if self.mix is not None:
            self.mix.reseed([self.seed, self.epoch, index])
        images = keras.ops.convert_to_numpy(self.prepare(self.images[rows]))
        batch = (images, self.labels[rows]) if self.mix is None else self.mix(images, self.labels[rows])
        return batch if self.shard[1] == 1 else tuple(_part(np.asarray(t), *self.shard) for t in batch)
