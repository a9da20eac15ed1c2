"""Where the lab lives. The studies, the depth sweep, the paper's analysis figures and the cards' generators
are research code that reads and writes a clone's `zoo/`: they live in a checkout of keras_tse, in
`recipes/lab/`, and the installed package does not hold them. The commands that run them find them here."""

import importlib
import os
import sys

LAB = os.path.join("recipes", "lab", "__init__.py")


class LabNotFound(FileNotFoundError):
    """No checkout of keras_tse holding `recipes/lab/` beside the imported package or in this folder."""


def root():
    """The checkout that holds the lab: the folder above the imported `keras_tse` (a clone, installed
    editable or run in place), else this folder; None where neither holds it."""
    import keras_tse

    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(keras_tse.__file__)))
    for candidate in (package_parent, os.getcwd()):
        if os.path.isfile(os.path.join(candidate, LAB)):
            return candidate
    return None


def lab(name=None):
    """The checkout's `recipes.lab` (or its module `name`); outside a checkout, `LabNotFound` in one line."""
    found = root()
    if found is None:
        raise LabNotFound(
            "the lab (studies, the depth sweep, the paper's figures) lives in a checkout of keras_tse, in "
            "recipes/lab/, not in the installed package: clone the repository and run this command there"
        )
    if found not in sys.path:
        sys.path.insert(0, found)
    return importlib.import_module("recipes.lab" + (f".{name}" if name else ""))


def studies():
    """{name: the study (`engine.Study`)} of every study module of the checkout's lab (`engine.studies`)."""
    return lab("engine").studies()
