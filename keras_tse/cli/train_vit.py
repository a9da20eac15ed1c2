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
the run's settings: a rerun on other data into the same --out is refused. `--stream` reads a folder's files batch
by batch instead of decoding them all first (the same numbers; NumPy's pipeline, one thread decoding): for a
folder whose decoded images do not fit in memory. An `.npz` file is read whole.

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

import functools

from keras_tse import data
from keras_tse.cli import flags
from keras_tse.layouts import layout_names
from keras_tse.training.image_runs import TRAIN

# Keras, its backend, the models and the training loop (2-4 s to import) load in `run`, after the flags
# are read, so `--help` and a bad flag answer at once.

TASK = "images"  # the run kind (keras_tse.training.image_runs) whose settings the flags are
BATCH_HELP = "override the batch size (default: 128, Sec. 3.3; 64 with --smoke)"
HIDDEN_HELP = "override the width (FFN 2x) (default: 192, Table 1)"
INIT_HELP = "weight scheme (default: the preset's, torch: the paper's code, nn.Linear/nn.Conv2d)"
SMOKE_HELP = "tiny model, 3 epochs; synthetic images for cifar10, a real slice otherwise"


# the plan the flags describe (`training.Plan`), run by the one trainer
run = functools.partial(flags.train_plan, TASK)


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
        metavar="MODEL",
        help="fine-tune a trained image classifier: a preset with trained weights (keras-tse presets), a preset "
        "folder or hf://owner/name, a run's variant folder (its checkpoint chosen on the validation split, else its "
        "last) or a .keras file; every weight kept but the classifier head, fresh unless the data are the ones it "
        "was trained on; a shipped preset's position table resampled to the data's image size (the others take "
        "their own); the model and its layout are its own",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help="--dataset folder or npz: read the images batch by batch (a folder's decoded, resized and augmented "
        "as they come; an .npz's arrays where numpy.savez stored them) instead of into memory first; the same numbers",
    )
    flags.add_lora_argument(parser, " (and a fresh head)")
    return parser.parse_args(argv)


def main(argv=None, prog="keras-tse train vit"):
    """The command: `run(parse_args(argv))` behind the edge every command shares (`flags.main_of`)."""
    return flags.main_of(prog, run, functools.partial(parse_args, prog=prog), argv)
