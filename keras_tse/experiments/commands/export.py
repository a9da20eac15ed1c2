"""`keras-tse export RUN --format F --out PATH`: a trained model as an inference artefact."""

import importlib.util
import os

HELP = "a trained model (run folder, .keras file or preset folder) as a .keras file, a TF SavedModel or ONNX"
FORMATS = ("keras", "tf_saved_model", "onnx")
# The backends Keras 3 exports each format from. PyTorch's tf_saved_model export goes through
# torch.export, which fails on these models (Keras 3.15, torch 2.13, measured); the .keras file loads
# on any backend, so the artefact comes from JAX or TensorFlow instead.
EXPORTED_FROM = {
    "keras": ("tensorflow", "jax", "torch"),
    "tf_saved_model": ("tensorflow", "jax"),
    "onnx": ("tensorflow", "jax", "torch"),
}
# What Keras's ONNX export imports on each backend, beyond the backend itself.
ONNX_NEEDS = {"tensorflow": ("onnx", "tf2onnx"), "jax": ("onnx", "tf2onnx"), "torch": ("onnx", "onnxscript")}


def add_arguments(parser):
    parser.add_argument(
        "source",
        metavar="RUN",
        help="a run's variant folder (its checkpoints/last.keras), a .keras file, or a preset folder",
    )
    parser.add_argument("--format", choices=FORMATS, default="keras", help="the artefact (default: keras)")
    parser.add_argument("--out", required=True, help="the artefact's path, new: nothing there is replaced")


def model_path(run):
    """The file or preset folder behind `run`."""
    checkpoint = os.path.join(run, "checkpoints", "last.keras")
    return checkpoint if os.path.isdir(run) and os.path.exists(checkpoint) else run


def check(args, backend):
    """One line for what cannot be exported here, before any model is read."""
    from keras_tse._checks import InputError

    if os.path.exists(args.out):
        raise InputError("--out", args.out, "a new path (export never replaces a file or folder)")
    if backend not in EXPORTED_FROM[args.format]:
        others = " or ".join(EXPORTED_FROM[args.format])
        raise InputError(
            "--format", args.format, f"a backend Keras exports it from ({others}); run it with KERAS_BACKEND=jax"
        )
    missing = [m for m in ONNX_NEEDS[backend] if importlib.util.find_spec(m) is None] if args.format == "onnx" else []
    if missing:
        raise InputError("--format", "onnx", f"{' and '.join(missing)} installed (pip install {' '.join(missing)})")


def run(args):
    import keras

    from keras_tse import zoo

    check(args, keras.backend.backend())
    source = model_path(args.source)
    if source.endswith(".keras"):
        model = keras.saving.load_model(source, compile=False)  # the forward pass only: no optimizer state
    else:
        model = zoo.from_preset(source)
    if args.format == "keras":
        model.save(args.out)
    else:
        model.export(args.out, format=args.format, verbose=False)
    print(f"wrote {args.out}: {model.name} as {args.format}, exported on {keras.backend.backend()} from {source}")
    return 0
