"""`keras-tse export RUN --format F --out PATH`: a trained model as an inference artefact."""

import os

from keras_tse import quantization

HELP = "a trained model (run folder, .keras file or preset folder) as .keras, TF SavedModel, ONNX, OpenVINO or LiteRT"
FORMATS = ("keras", "tf_saved_model", "onnx", "openvino", "litert")
# The backends this command exports each format from, the last one named in the one-line answer
# elsewhere: the .keras file loads on any backend, so the artefact can come from another. Measured with
# Keras 3.15: PyTorch's export (torch.export, torch 2.13) fails on these models for both formats; JAX's
# ONNX export needs jax2onnx, which brings flax, optax and orbax, and PyTorch's fails on an index op (onnx::Gather);
# TensorFlow's goes through tf2onnx. OpenVINO's converter reads TensorFlow's and PyTorch's graphs, not JAX's
# (no rule for XlaCallModule); LiteRT's comes from TensorFlow (PyTorch's needs the litert-torch package).
EXPORTED_FROM = {
    "keras": ("tensorflow", "jax", "torch"),
    "tf_saved_model": ("tensorflow", "jax"),
    "onnx": ("tensorflow",),
    "openvino": ("torch", "tensorflow"),
    "litert": ("tensorflow",),
}
SUFFIXES = {"keras": ".keras", "onnx": ".onnx", "openvino": ".xml", "litert": ".tflite"}  # what Keras's export asks
# what Keras's export imports for the format (a SavedModel is TensorFlow's, from any backend)
NEEDS = {
    "tf_saved_model": ("tensorflow",),
    "onnx": ("tensorflow", "onnx", "tf2onnx"),
    "openvino": ("openvino",),
    "litert": ("tensorflow", "ai_edge_litert"),
}
PACKAGES = {"ai_edge_litert": "ai-edge-litert"}  # a module's pip name, where it differs


def add_arguments(parser):
    parser.add_argument(
        "source",
        metavar="RUN",
        help="a run's variant folder (its checkpoint chosen on the validation split, else its last), a .keras file, "
        "or a preset folder",
    )
    parser.add_argument("--format", choices=FORMATS, default="keras", help="the artefact (default: keras)")
    parser.add_argument("--out", required=True, help="the artefact's path, new: nothing there is replaced")
    parser.add_argument(
        "--quantize",
        choices=quantization.MODES,
        default=None,
        help="quantize the weights first (Keras's model.quantize): every Dense kernel in 8 or 4 bits with a scale "
        "per output channel (default: none)",
    )


def model_path(run):
    """(the file or preset folder behind `run`, which of a run's checkpoints it is, or None): a run folder's
    checkpoint chosen on its validation split, else its last (`run_files.chosen_checkpoint`)."""
    from keras_tse.run_files import chosen_checkpoint

    checkpoint, which = chosen_checkpoint(run)
    return (checkpoint, which) if os.path.isdir(run) and os.path.exists(checkpoint) else (run, None)


def check(args, backend):
    """One line for what cannot be exported here, before any model is read."""
    from keras_tse._checks import InputError

    if os.path.exists(args.out):
        raise InputError("--out", args.out, "a new path (export never replaces a file or folder)")
    suffix = SUFFIXES.get(args.format)
    if suffix and not args.out.endswith(suffix):
        raise InputError("--out", args.out, f"a path ending in {suffix} (what Keras writes as {args.format})")
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        raise InputError("--out", args.out, f"a new path in a folder that exists ({folder} does not)")
    exporters = EXPORTED_FROM[args.format]
    if backend not in exporters:
        raise InputError(
            "--format",
            args.format,
            f"a backend it is exported from ({' or '.join(exporters)}); run it with KERAS_BACKEND={exporters[-1]}",
        )
    from keras_tse.cli.flags import installed

    missing = [module for module in NEEDS.get(args.format, ()) if not installed(module)]
    if missing:
        needed = " and ".join(missing)
        pip = " ".join(PACKAGES.get(module, module) for module in missing)
        raise InputError("--format", args.format, f"{needed} installed (pip install {pip})")


def run(args):
    import keras

    from keras_tse import data, run_files, zoo
    from keras_tse.data.tokenizer import VOCABULARY_FILE
    from keras_tse.data.tokenizers import load_tokenizer
    from keras_tse.zoo.saved_file import load_keras_file

    check(args, keras.backend.backend())
    source, which = model_path(args.source)
    if source.endswith(".keras"):
        model = load_keras_file(source, compile=False)  # the forward pass only: no optimizer state
    else:
        model = zoo.from_preset(source)
    run_words = os.path.join(args.source, VOCABULARY_FILE)
    if getattr(model, "tokenizer", None) is None and os.path.isfile(run_words):  # a run's words, beside its model
        model.tokenizer = load_tokenizer(args.source)
    if args.quantize:
        quantization.quantize(model, args.quantize)
    if args.format == "keras":
        with data.tensorflow_unseen_by_keras(needed=False):  # Keras would import it to check the config's types
            run_files.save_model(model, args.out)  # a language model's tokenizer inside: the file alone generates
    else:
        if args.format == "onnx":  # Keras's ONNX export reads the shapes of a first call (images of the trained size)
            shape = zoo.preprocessing.core_of(model).input.shape[1:]
            model(keras.ops.zeros((1, *shape), model.input.dtype))
        model.export(args.out, format=args.format, verbose=False)
    kind = args.format + (f", {args.quantize} weights" if args.quantize else "")
    taken = f" ({which})" if which else ""
    print(f"wrote {args.out}: {model.name} as {kind}, exported on {keras.backend.backend()} from {source}{taken}")
    return 0
