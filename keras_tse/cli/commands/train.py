"""`keras-tse train TASK ...`: train a zoo model into a run folder that resumes, one task a module.

    keras-tse train vit --dataset digits --depth 12 --epochs 3          # a ViT (keras_tse.cli.train_vit)
    keras-tse train lm --model gpt --dataset text --data-dir my_text/   # a language model (train_lm)

`keras-tse train TASK --help` lists the task's flags. The paper's two recipes (recipes/) are these commands
with their defaults.
"""

import importlib

HELP = "train a ViT (vit) or a language model (lm) into a resumable run folder; TASK --help for its flags"
# task -> the module whose `main(argv, prog)` trains it
TASKS = {"vit": "keras_tse.cli.train_vit", "lm": "keras_tse.cli.train_lm"}
# the task chooses the backend itself (`flags.main_of`), after its own flags are read
NEEDS_BACKEND = False


def add_arguments(parser):
    import argparse

    parser.add_argument("task", choices=tuple(TASKS), help="vit: image classification; lm: language modelling")
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="the task's flags (keras-tse train TASK --help)")


def run(args):
    task = importlib.import_module(TASKS[args.task])
    return task.main(args.argv, prog=f"keras-tse train {args.task}")
