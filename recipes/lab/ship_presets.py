"""The presets that ship with weights: train each with the project's training command, evaluate it on
its test set and write it into the package as a preset folder (`keras_tse/zoo/weights/NAME/`,
`zoo.save_preset`; a language model's vocabulary in its assets), its `metadata.json` holding the measured
test accuracy or perplexity, the training time and the command: the result file of its card.

    KERAS_BACKEND=jax python -m recipes.lab.ship_presets vit6_digits  # trains, evaluates, writes
    KERAS_BACKEND=jax python -m recipes.lab.ship_presets gpt4_ptb
    python -m recipes.lab.ship_presets vit6_digits --add-preprocessor  # one shipped before models carried it

`vit6_fashion_mnist` is chosen on a validation split and shipped by `recipes/lab/vit6_selection_study.py`
(`--ship`, through `ship` here). A folder already there is never replaced: delete it first to ship anew. The
tests evaluate each shipped preset on every backend against the accuracy recorded here
(tests/test_shipped_presets.py).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

import numpy as np

from keras_tse import run_files
from recipes.lab import ROOT, engine  # noqa: E402

WEIGHTS = os.path.join(ROOT, "keras_tse", "zoo", "weights")
# The recipe's flags per shipped preset: the preset's model (keras_tse/zoo/families/vit_presets.py, `_shipped`), with a
# learning rate, warmup and cosine schedule chosen for a small model trained in minutes, not the paper's.
COMMANDS = {
    # the selection study's base command: its candidates replace the augmentation and the rate and add the
    # validation split (recipes/lab/vit6_selection_study.py)
    "vit6_fashion_mnist": "--dataset fashion_mnist --patch-size 4 --epochs 12 --batch-size 128 "
    "--learning-rate 1e-3 --warmup-steps 469 --schedule cosine --augment none",
    "vit6_digits": "--dataset digits --patch-size 2 --epochs 40 --batch-size 64 "
    "--learning-rate 1e-3 --warmup-steps 100 --schedule cosine",
}
# `--validation-fraction 0`: vit6_digits was trained on the whole training split before the validation split
# existed, and the command stays the one that made it
MODEL = (
    "--norm deescalate --depth 6 --hidden-dim 64 --num-heads 4 --init torch --no-download --verbose 2 "
    "--validation-fraction 0"
)
# The language models: `keras-tse train lm` at the Penn Treebank widths, the preset's depth (families/gpt_presets.py)
LANGUAGE_MODELS = {
    "gpt4_ptb": "--model gpt --dataset ptb --norm deescalate --depth 4 --steps 3000 --eval-interval 500 --seed 0 "
    "--no-download --verbose 2",  # 3,000 steps of 16 x 64 tokens: 3.3 passes over the training text
}


CHOSEN_ON_VALIDATION = {"vit6_fashion_mnist": "python -m recipes.lab.vit6_selection_study --ship"}


def recipe_command(name, out):
    if name in LANGUAGE_MODELS:
        return f"python -m keras_tse.cli.main train lm {LANGUAGE_MODELS[name]} --out {out}"
    return f"python recipes/cifar10_vit.py {COMMANDS[name]} {MODEL} --out {out}"


def evaluate_test_set(model, dataset):
    """(accuracy, images) of `model` (its `ImagePreprocessor` first) on the registry data set's whole test split,
    the raw images as they load."""
    from keras_tse import data
    from keras_tse.zoo import scoring  # keras-tse evaluate's arithmetic

    _, (x_test, y_test) = data.get_dataset(dataset).load_data(None, download=False)
    result = scoring.score(model, x_test, y_test, batch_size=500)
    return result["accuracy"], result["images"]


def evaluate_text_test_set(model, dataset):
    """(perplexity, tokens) of language model `model` on the registry data set's whole test split, read
    as the training command reads it (`training.evaluate_stream`: in order, in its 16 streams)."""
    from keras_tse import data, training
    from keras_tse.training.tasks import LANGUAGE_MODELLING

    test_ids = data.get_dataset(dataset).load_data(download=False)[0]["test"]
    LANGUAGE_MODELLING.compile(model)
    loss = training.language_model.evaluate_stream(model, test_ids, batch_size=16)
    return float(np.exp(loss)), int(len(test_ids))


def ship(name, run_folder, command, checkpoint="last.keras", validation=None):
    """The run's `checkpoint` (its final model, or the one of lowest validation loss), rebuilt as the preset (its
    name, its config), evaluated once on the test split and written; `validation`: how it was chosen."""
    import keras

    from keras_tse import zoo

    trained = keras.saving.load_model(os.path.join(run_folder, "checkpoints", checkpoint))
    model = zoo.from_preset(name, load_weights=False)
    model.set_weights(trained.get_weights())
    with open(os.path.join(run_folder, "summary.json")) as f:
        summary = json.load(f)
    flags = (LANGUAGE_MODELS.get(name) or COMMANDS[name]).split()
    dataset = flags[flags.index("--dataset") + 1]
    if name not in LANGUAGE_MODELS:  # the data set's preprocessing in the model: it takes raw images
        model = zoo.preprocessing.with_preprocessing(model, zoo.preprocessing.dataset_preprocessor(dataset))
    if name in LANGUAGE_MODELS:
        scored = zoo.from_preset(name, load_weights=False)  # compiling adds optimizer state: not in the preset
        scored.set_weights(trained.get_weights())
        perplexity, tokens = evaluate_text_test_set(scored, dataset)
        steps = engine.read_json(run_folder, "config.json")["train"]["steps"]
        measured = {"test_perplexity": perplexity, "test_tokens": tokens, "steps": steps}
        words = ("vocabulary.txt", "tokenizer.json")  # the run's WordTokenizer, as the preset's tokenizer assets
        assets = {os.path.join("tokenizer", name): os.path.join(run_folder, name) for name in words}
    else:
        accuracy, images = evaluate_test_set(model, dataset)
        measured, assets = {"test_accuracy": accuracy, "test_images": images, "epochs": summary["epochs"]}, None
    metadata = {
        "preset": name,
        "dataset": dataset,
        **measured,
        "train_loss": summary["train_loss"],
        **({"validation": validation} if validation else {}),
        "training_seconds": round(summary["seconds_this_session"]),  # the run's time, in one process
        "command": command,
        "machine": "2-core AMD EPYC CPU, 24 GiB",
        "date": datetime.date.today().isoformat(),
    }
    zoo.save_preset(model, os.path.join(WEIGHTS, name), metadata=metadata, assets=assets)
    return metadata


def add_preprocessor(name):
    """Rewrite a shipped image preset's config.json with its data set's `ImagePreprocessor` first (the weights
    file as it is: the preprocessor holds no weight), for a preset shipped before models carried one. The
    new config is written beside and renamed into place."""
    import keras

    from keras_tse import zoo

    folder = os.path.join(WEIGHTS, name)
    dataset = zoo.preset_folder.preset_metadata(folder)["dataset"]
    model = zoo.preprocessing.with_preprocessing(zoo.from_preset(name), zoo.preprocessing.dataset_preprocessor(dataset))
    path = os.path.join(folder, zoo.preset_folder.CONFIG_FILE)
    run_files.write_json(path, keras.saving.serialize_keras_object(model))


def markdown_table(names=None):
    """The shipped presets measured, from the metadata.json each was shipped with: one table of the
    classifiers, one of the language models, a row each."""
    names = names or sorted([*COMMANDS, *LANGUAGE_MODELS])
    tables = []
    for kind, header, measured in (
        ("classifiers", "test accuracy | test images | epochs", _accuracy),
        ("language models", "test perplexity | test tokens | steps", _perplexity),
    ):
        chosen = [name for name in names if (name in LANGUAGE_MODELS) == (kind == "language models")]
        if chosen:
            rows = [
                f"| preset | data set | {header} | parameters | weights file | training time | trained |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            rows += [_row(name, measured) for name in chosen]
            tables.append("\n".join(rows))
    return "\n\n".join(tables)


def _accuracy(m):
    """A preset chosen on validation shipped its checkpoint of lowest validation loss: that epoch, of those run."""
    chosen = m.get("validation", {}).get("checkpoint_epoch")
    epochs = f"{chosen} of {m['epochs']} (validation)" if chosen else m["epochs"]
    return f"{100 * m['test_accuracy']:.2f}% | {m['test_images']:,} | {epochs}"


def _perplexity(m):
    return f"{m['test_perplexity']:.1f} | {m['test_tokens']:,} | {m['steps']:,}"


def _row(name, measured):
    folder = os.path.join(WEIGHTS, name)
    with open(os.path.join(folder, "metadata.json")) as f:
        m = json.load(f)
    size = os.path.getsize(os.path.join(folder, "model.weights.h5")) / 2**20
    time = f"{m['training_seconds'] / 60:.0f} min" if "training_seconds" in m else "not recorded"
    return (
        f"| `{name}` | {m['dataset']} | {measured(m)} | {m['parameter_count']:,} | {size:.2f} MiB | {time} | "
        f"{m['date']}, {m['machine']}, JAX |"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted([*COMMANDS, *LANGUAGE_MODELS]))
    parser.add_argument("--runs", default=os.path.join("runs", "ship"), help="where the training runs go")
    parser.add_argument(
        "--add-preprocessor", action="store_true", help="only give a shipped image preset its data set's preprocessor"
    )
    args = parser.parse_args(argv)
    if args.add_preprocessor:
        return add_preprocessor(args.name)
    if args.name in CHOSEN_ON_VALIDATION:
        parser.error(f"{args.name} is chosen on a validation split: ship it with {CHOSEN_ON_VALIDATION[args.name]}")
    if os.path.exists(os.path.join(WEIGHTS, args.name)):
        parser.error(f"{os.path.join(WEIGHTS, args.name)} exists; delete it to ship {args.name} anew")
    out = os.path.join(args.runs, args.name)
    command = recipe_command(args.name, out)
    subprocess.run([sys.executable, *command.split()[1:]], cwd=ROOT, check=True)
    metadata = ship(args.name, os.path.join(ROOT, out, "deescalate"), f"KERAS_BACKEND=jax {command}")  # one variant
    print(json.dumps(metadata, indent=2))


if __name__ == "__main__":
    main()
