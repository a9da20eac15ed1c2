"""`keras-tse probe M.keras` (or a preset folder): per-block similarity and attention diagnostics of a saved
model."""

import os

from keras_tse._checks import InputError
from keras_tse.cli import flags

HELP = "per-block similarity and attention diagnostics of a .keras model or a preset folder"


def add_arguments(parser):
    parser.add_argument(
        "model",
        help="a saved .keras model or a preset folder (save_preset's; KerasHub's save_to_preset's) with blocks of a "
        "known kind: keras_tse's, KerasHub's; others with --layers",
    )
    parser.add_argument(
        "--batch-size", type=flags.positive_int, default=8, help="probe batch (a fixed model batch wins)"
    )
    parser.add_argument("--seed", type=flags.non_negative_int, default=0, help="seed of the random inputs")
    parser.add_argument(
        "--layers",
        default=None,
        help="comma-separated names of the block layers, for a model whose blocks are of no known kind "
        "(similarity only; the attention columns need blocks of a known kind)",
    )


def run(args):
    import keras

    import keras_tse  # noqa: F401  registers the classes a saved model names
    from keras_tse.analysis.probe import format_rows, probe_model

    model = _loaded(args.model)
    layers = args.layers.split(",") if args.layers else None
    missing = [name for name in layers or () if name not in {layer.name for layer in model.layers}]
    if missing:
        raise InputError("--layers", ",".join(missing), f"names of layers of {model.name}")
    rows = probe_model(model, batch_size=args.batch_size, seed=args.seed, layers=layers)
    print(
        f"{model.name}: {len(rows)} blocks, random inputs (seed {args.seed}), backend {keras.backend.backend()}\n"
        f"t_sim / t_cos: token / cosine similarity after the block (Definition 1, eq. 1); entropy: attention\n"
        f"entropy per query row, head mean (nats); qk_*: eigenvalue mean, variance and xi of W_Q W_K^T, head mean.\n"
    )
    print(format_rows(rows))
    return 0


def _loaded(path):
    """The model saved at `path`: a preset folder (its weights checked by `load_preset`) or a `.keras` file."""

    from keras_tse.zoo.preset_folder import is_preset_folder, load_preset
    from keras_tse.zoo.saved_file import load_keras_file

    if is_preset_folder(path):
        try:
            return load_preset(path)
        except ValueError as error:
            raise InputError("MODEL", path, f"a whole preset folder ({error})") from None
    if not os.path.isfile(path):
        raise InputError("MODEL", path, "a saved .keras file or a preset folder")
    return load_keras_file(path)
