"""`keras-tse train [NAME] ...`: train a zoo model into a run folder that resumes. NAME is a model family
(the zoo's or another package's), a preset with trained weights (fine-tuned), or `vit` and `lm`, the
paper's two; without it, `vit`.

    keras-tse train --dataset digits --depth 12 --epochs 3               # a ViT (keras_tse.cli.train_vit)
    keras-tse train gpt --dataset text --data-dir my_text/                # a language model (train_lm)
    keras-tse train vit6_fashion_mnist --dataset mnist --epochs 3         # fine-tune a preset
    keras-tse train gpt4_ptb --dataset text --data-dir ~/corpus --steps 200  # a language model too

`keras-tse train NAME --help` lists its flags. The paper's two recipes (recipes/) are these commands with
their defaults.
"""

import importlib

HELP = "train a model family, a preset or the paper's two (vit, lm) into a resumable run folder"
# a family's task -> the module whose `main(argv, prog)` trains it
TASKS = {"images": "keras_tse.cli.train_vit", "text": "keras_tse.cli.train_lm"}
PAPER_NAMES = {"vit": "images", "lm": "text"}  # the paper's two, each its task's default family
# the backend is chosen here, before the task's flags are read (they list the zoo's families)
NEEDS_BACKEND = False
# every word after `train` is the task's (a leading flag included, where NAME is left out): no option here
PARSER = {"prefix_chars": "+", "add_help": False}
RESUMES = True  # the same command goes on from the run folders it saved


def add_arguments(parser):
    import argparse

    parser.add_argument("argv", nargs=argparse.REMAINDER, help="[NAME] and its flags (keras-tse train NAME --help)")


def run(args):
    from keras_tse.cli import flags

    words = list(args.argv)
    if _asks_help(words):
        flags.choose_backend("keras-tse train")  # the names come from the zoo: Keras on a backend that is here
        print(__doc__.strip().replace("`", "") + f"\n\nNAME: {', '.join(names())}")
        return 0
    name, prog = _name(words), prog_of(args)
    words = words if not words or words[0].startswith("-") else words[1:]
    task, extra = resolve(name)
    flags.choose_backend(prog)
    module = importlib.import_module(TASKS[task])
    return module.run(module.parse_args([*extra, *words], prog=prog))  # behind `keras-tse`'s one edge


def _asks_help(words):
    return words[:1] in (["-h"], ["--help"])


def _name(words):
    """NAME, the first word where it is not a flag; `vit` where it is left out."""
    return "vit" if not words or words[0].startswith("-") else words[0]


def prog_of(args):
    """The name a run's lines begin with: `keras-tse train NAME` (NAME `vit` where it is left out)."""
    words = list(args.argv)
    if _asks_help(words):
        return "keras-tse train"
    return f"keras-tse train {_name(words)}"


def names():
    """What NAME may be: the paper's two, every family, every preset with trained weights (an image or a text one)."""
    from keras_tse import zoo

    trained = [name for name, entry in zoo.presets().items() if entry["weights"]]
    return (*PAPER_NAMES, *(f for f in zoo.list_families() if f not in PAPER_NAMES), *trained)


def resolve(name):
    """(task, the flags NAME stands for): none for the paper's two, `--model FAMILY`, or `--from-preset
    PRESET`. The backend is chosen first where the zoo (Keras) is read."""
    if name in PAPER_NAMES:
        return PAPER_NAMES[name], []
    from keras_tse._checks import InputError
    from keras_tse.cli import flags

    flags.choose_backend("keras-tse train")
    from keras_tse import zoo

    if name in zoo.list_families():
        return zoo.get_family(name).task, ["--model", name]
    entry = zoo.presets().get(name)
    if entry is not None and entry["weights"]:
        return _task_of(entry), ["--from-preset", name]
    raise InputError("NAME", name, f"a model family, a preset with weights, vit or lm: {', '.join(names())}")


def _task_of(entry):
    from keras_tse import zoo

    return zoo.get_family(entry["builder"]).task
