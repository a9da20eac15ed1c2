"""`keras-tse evaluate MODEL --dataset NAME`: a trained image classifier scored on a data set's test split
(timm's `validate.py`): accuracy, loss, each class's accuracy, the confusion matrix (a figure too), JSON out."""

import os

HELP = "score a trained image classifier on a data set's test split: accuracy, loss, per class, confusion matrix"


def add_arguments(parser):
    from keras_tse.cli import flags
    from keras_tse.data.registry import list_datasets  # Keras-free

    parser.add_argument(
        "source",
        metavar="MODEL",
        help="a trained image classifier: a shipped preset with weights, a preset folder or hf://owner/name, a run's "
        "variant folder (its checkpoint chosen on the validation split, else its last), or a .keras file",
    )
    parser.add_argument(
        "--dataset",
        default=None,
        choices=list_datasets("images"),
        help="the data set whose test split it is scored on (default: the one it was trained on, where recorded); "
        "folder: --data-dir's test/ folder, or the split the training command made at --seed 0",
    )
    parser.add_argument("--data-dir", default=None, help="where the data set's files are (or your folder or .npz)")
    parser.add_argument("--batch-size", type=flags.positive_int, default=256, help="images per batch (default: 256)")
    parser.add_argument("--out", default=None, help="write the scores to a new .json file")
    parser.add_argument("--figure", default=None, help="draw the confusion matrix into a new .png file")


def check(args):
    from keras_tse._checks import InputError

    for flag, path, suffix in (("--out", args.out, ".json"), ("--figure", args.figure, ".png")):
        if path is None:
            continue
        if not path.endswith(suffix):
            raise InputError(flag, path, f"a path ending in {suffix}")
        if os.path.exists(path):
            raise InputError(flag, path, "a new path (evaluate never replaces a file)")


def run(args):
    from keras_tse import data, run_files
    from keras_tse._checks import InputError
    from keras_tse.zoo import scoring
    from keras_tse.zoo.trained import image_geometry, trained

    check(args)
    found = trained(args.source, flag="MODEL")
    geometry = image_geometry(found.model_config())
    if geometry is None or geometry[2] is None:
        raise InputError("MODEL", args.source, "an image classifier (keras-tse generate reads a language model)")
    dataset = args.dataset or found.dataset
    if dataset is None:
        raise InputError("--dataset", "nothing", f"a data set: {found.path} records none it was trained on")
    spec = data.get_dataset(dataset)
    if spec.task != "images":
        raise InputError("--dataset", dataset, "an image data set")
    if spec.own and args.data_dir is None:
        raise InputError(
            "--data-dir", "nothing", f"the {spec.title.removeprefix('an ')} that --dataset {dataset} reads"
        )
    model = found.load()
    names = list(geometry[3])  # the class names its preprocessor records, read with its config
    x_test, y_test, classes = _test_split(spec, args.data_dir, geometry[0])
    _check_classes(names, geometry[2], list(classes or spec.class_names), y_test, dataset)
    taken = f" ({found.which})" if found.which else ""
    print(f"evaluating {model.name} from {found.path}{taken} on {spec.title}'s {len(y_test):,} test images", flush=True)
    result = scoring.score(model, x_test, y_test, args.batch_size, class_names=names or classes or spec.class_names)
    print(f"accuracy {100 * result['accuracy']:.2f}% ({result['images']:,} images), loss {result['loss']:.4f}")
    for entry in result["per_class"]:
        accuracy = "-" if entry["accuracy"] is None else f"{100 * entry['accuracy']:.2f}%"
        print(f"  {entry['class']}: {accuracy} of {entry['images']:,}")
    record = {"model": found.path, "checkpoint": found.which, "dataset": dataset, **result}
    if args.out:
        run_files.write_json(args.out, record)
        print(f"wrote {args.out}")
    if args.figure:
        scoring.confusion_figure(result, args.figure, f"{model.name} on {spec.title}")
        print(f"wrote {args.figure}")
    return 0


def _check_classes(names, count, data_names, labels, dataset):
    """One line where the data's classes are not the model's: other names, or more of them (a score against
    classes the model was not trained for would be silently wrong)."""
    from keras_tse._checks import InputError

    have = len(data_names) if data_names else int(max(labels)) + 1
    if (names and data_names and names != data_names) or have > count or (data_names and have != count):
        theirs = ", ".join(data_names) if data_names else f"labels 0..{have - 1}"
        ours = ", ".join(names) if names else f"{count} classes"
        raise InputError("--dataset", f"{dataset} ({theirs})", f"a data set of the model's classes ({ours})")


def _test_split(spec, data_dir, image_size):
    """(test images, labels, class names of a user's folder or ()) as the training command reads them."""
    keywords = {"image_size": image_size} if spec.takes("image_size") else {}
    if spec.own:
        survey = spec.surveyed(data_dir, image_size=image_size)
        keywords.update(survey.load_keywords)
        _, (x_test, y_test) = spec.load_data(data_dir, **keywords)
        return x_test, y_test, tuple(survey.class_names)
    _, (x_test, y_test) = spec.load_data(data_dir, download=True, **keywords)
    return x_test, y_test, ()
