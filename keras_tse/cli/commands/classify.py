"""`keras-tse classify MODEL IMAGES...`: the classes a trained image classifier gives image files (timm's
`inference.py`): each file's top classes and their probabilities, printed, or written as CSV or JSON."""

import os

HELP = "label image files or folders with a trained image classifier: top classes and probabilities, CSV or JSON"
OUTPUTS = (".csv", ".json")


def add_arguments(parser):
    from keras_tse.cli import flags

    parser.add_argument(
        "source",
        metavar="MODEL",
        help="a trained image classifier that carries its class names: a shipped preset with weights, a preset folder "
        "or hf://owner/name, a run's variant folder (its checkpoint chosen on the validation split, else its last), or "
        "a .keras file (keras-tse export's)",
    )
    parser.add_argument(
        "images", nargs="+", metavar="IMAGES", help="image files (BMP, GIF, JPEG, PNG, TIFF) or folders of them"
    )
    parser.add_argument("--top-k", type=flags.positive_int, default=1, help="classes shown per image (default: 1)")
    parser.add_argument("--batch-size", type=flags.positive_int, default=64, help="images per batch (default: 64)")
    parser.add_argument("--out", default=None, help="write the rows to a new .csv or .json file (default: print them)")


def image_files(paths):
    """The image files `paths` name: files as given, folders walked (sorted, hidden entries skipped); one line
    for a path that is neither, or a folder without images."""
    from keras_tse._checks import InputError
    from keras_tse.data.own import IMAGE_EXTENSIONS

    files = []
    for path in paths:
        if os.path.isfile(path):
            files.append(path)
        elif os.path.isdir(path):
            found = sorted(
                os.path.join(folder, name)
                for folder, subfolders, names in os.walk(path)
                for name in names
                if name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith(".")
                and not any(part.startswith(".") for part in os.path.relpath(folder, path).split(os.sep) if part != ".")
            )  # fmt: skip
            if not found:
                raise InputError("IMAGES", path, f"a folder holding images ({', '.join(IMAGE_EXTENSIONS)})")
            files.extend(found)
        else:
            raise InputError("IMAGES", path, "an image file or a folder of them")
    return files


def check(args):
    from keras_tse._checks import InputError

    if args.out is not None:
        if not args.out.endswith(OUTPUTS):
            raise InputError("--out", args.out, "a path ending in .csv or .json")
        if os.path.exists(args.out):
            raise InputError("--out", args.out, "a new path (classify never replaces a file)")
    return image_files(args.images)


def run(args):
    from keras_tse import run_files
    from keras_tse._checks import InputError
    from keras_tse.data.image_files import read_image
    from keras_tse.zoo.preprocessing import probabilities
    from keras_tse.zoo.trained import image_geometry, trained

    files = check(args)
    found = trained(args.source, flag="MODEL")
    geometry = image_geometry(found.model_config())
    if geometry is None or not geometry[3]:
        raise InputError("MODEL", args.source, "an image classifier that carries its class names")
    model, names = found.load(), list(geometry[3])
    taken = f" ({found.which})" if found.which else ""
    print(f"classifying {len(files):,} image(s) with {model.name} from {found.path}{taken}", flush=True)
    images = [read_image(file) for file in files]
    probs = probabilities(model, images, args.batch_size, progress=_progress if len(files) > args.batch_size else None)
    top = min(args.top_k, len(names))
    rows = []
    for file, row in zip(files, probs):
        order = row.argsort()[::-1][:top]
        rows.append({"file": file, "top": [{"class": names[i], "probability": float(row[i])} for i in order]})
    if args.out is None:
        for row in rows:
            print(
                row["file"] + "\t" + "\t".join(f"{entry['class']} {entry['probability']:.4f}" for entry in row["top"])
            )
    elif args.out.endswith(".json"):
        run_files.write_json(args.out, {"model": found.path, "checkpoint": found.which, "images": rows})
    else:
        kinds = ("class", "probability")
        fields = ["file"] + [f"{kind}_{rank}" for rank in range(1, top + 1) for kind in kinds]
        flat = [
            {"file": row["file"], **{f"{k}_{r}": e[k] for r, e in enumerate(row["top"], 1) for k in kinds}}
            for row in rows
        ]
        run_files.write_csv(args.out, fields, flat)
    if args.out is not None:
        print(f"wrote {args.out}: {len(rows):,} image(s), top {top}")
    return 0


def _progress(done, total):
    print(f"  {done:,} of {total:,} images", flush=True)
