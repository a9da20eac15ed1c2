"""The layout's import directions: library <- training <- experiments, never back up.

Read from the source with `ast`, function-level imports included, so an import hidden inside a
function counts as much as one at the top; and checked live: `import keras_tse` loads neither
training nor experiments.
"""

import ast
import glob
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PACKAGE = os.path.join(ROOT, "keras_tse")
TIERS = {"library": 0, "training": 1, "experiments": 2}


def _modules():
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _tier(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("training", "experiments") else "library"


def _imports(path):
    """Every keras_tse module `path` imports, with the names taken from it: (module, name, line)."""
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None, node.lineno) for alias in node.names if alias.name.startswith("keras_tse"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("keras_tse"):
            for alias in node.names:
                yield node.module, alias.name, node.lineno


def test_no_module_imports_from_a_higher_tier():
    wrong = []
    for module, path in _modules():
        for target, name, line in _imports(path):
            full = f"{target}.{name}" if name and _tier(target) == "library" and name in TIERS else target
            if TIERS[_tier(full)] > TIERS[_tier(module)]:
                wrong.append(f"{module}:{line} imports {full}")
    assert not wrong, "\n".join(wrong)


def test_private_names_stay_inside_their_package():
    """A private module or name is imported only from inside the package that holds it; the one
    shared by the whole of keras_tse (`keras_tse._checks`) sits at its root for that reason."""
    wrong = []
    for module, path in _modules():
        for target, name, line in _imports(path):
            private = [p for p in target.split(".") if p.startswith("_")]
            if name and name.startswith("_") and name != "__all__":
                owner = target
            elif private:
                owner = target[: target.index(private[0])].rstrip(".")
            else:
                continue
            if not (module == owner or module.startswith(owner + ".")):
                wrong.append(f"{module}:{line} reads {target}.{name or ''}")
    assert not wrong, "\n".join(wrong)


def test_no_code_reaches_into_another_objects_private_attributes():
    """`obj._x` only on `self`; exceptions where there is no public way: Keras's own resume mechanism,
    which its BackupAndRestore drives the same way (`model._initial_epoch`), and the name scope a
    compiled block skips (`keras_tse.training.block_compile`: read by dynamo, it makes each block a
    new program)."""
    allowed = {
        ("keras_tse.callbacks.run_backup", "self.model._initial_epoch"),
        ("keras_tse.training.block_compile", "layer_class._open_name_scope"),
        # the seed generator Keras's augmentation layers draw from; RandAugment ignores a `seed` argument
        ("keras_tse.data.pipeline", "layer._get_seed_generator"),
        # dynamo's compile records, which torch exposes only there (the lab's torch_compile_time measures them)
        ("keras_tse.experiments.lab.torch_compile_time", "torch._dynamo.utils.compilation_time_metrics"),
        ("keras_tse.experiments.lab.torch_compile_time", "torch._dynamo.utils.counters"),
        ("keras_tse.experiments.lab.torch_compile_time", "torch._dynamo"),
        # Python's documented exit without cleanup: a peer's end stops a process whose main thread may be
        # blocked in a collective that never returns
        ("keras_tse.peers", "os._exit"),
    }
    wrong = []
    for module, path in _modules():
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                    continue
                if (module, ast.unparse(node)) not in allowed:
                    wrong.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    assert not wrong, "\n".join(wrong)


def test_the_rule_catches_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: a library module that imports the experiments is reported."""
    bad = tmp_path / "keras_tse" / "layers"
    bad.mkdir(parents=True)
    (bad / "leak.py").write_text("def f():\n    from keras_tse.experiments import sweep\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", str(tmp_path / "keras_tse"))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    with pytest.raises(AssertionError, match="keras_tse.layers.leak:2 imports keras_tse.experiments"):
        test_no_module_imports_from_a_higher_tier()


def test_import_keras_tse_loads_no_training_or_experiment_module():
    code = (
        "import sys, keras_tse\n"
        "print(sorted(m for m in sys.modules if m.startswith(('keras_tse.training', 'keras_tse.experiments'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _vocabulary():
    from keras_tse import layouts, norms

    return set(norms.escalation_kinds()) | set(layouts.layout_names(measurement=True))


def _elements(node):
    """The items of a tuple, list or set literal, the keys of a dict literal; else nothing."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return node.elts
    return node.keys if isinstance(node, ast.Dict) else []


def _norm_lists_outside_the_vocabulary(package=PACKAGE, root=ROOT):
    """Module-level containers holding two or more norm names, and comma-joined lists of them, anywhere
    but `keras_tse/norms.py` (the studies' groups), the layouts' own modules, the lab's study plans and
    the training tasks' variant tables: a second list of norms that would drift from the first."""
    names = _vocabulary()
    vocabulary = os.path.join(package, "norms.py")
    # the layouts name themselves; a study plan of the lab and a training task's table of the paper's
    # variants are data that name the runs they describe (each run's flags), not a vocabulary of norms
    exempt = [os.path.join(package, *parts) for parts in (("layouts",), ("experiments", "lab"))]
    tasks = [os.path.join(package, "experiments", f"{task}.py") for task in ("train_vit", "train_lm")]
    wrong = []
    for folder, _, files in os.walk(package):
        for file in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, file)
            if os.path.abspath(path) == os.path.abspath(vocabulary) or any(path.startswith(e + os.sep) for e in exempt):
                continue
            if path in tasks:
                continue
            tree = ast.parse(open(path).read())
            where = os.path.relpath(path, root)
            for node in tree.body:
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    found = {
                        c.value
                        for container in ast.walk(node.value)
                        for c in _elements(container)
                        if isinstance(c, ast.Constant) and c.value in names
                    }
                    if len(found) >= 2:
                        wrong.append(f"{where}:{node.lineno} lists {sorted(found)}")
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "," in node.value:
                    parts = set(node.value.split(","))
                    if len(parts & names) >= 2:
                        wrong.append(f"{where}:{node.lineno} lists {node.value!r}")
    return wrong


def test_every_norm_name_list_is_the_vocabulary_modules():
    wrong = _norm_lists_outside_the_vocabulary()
    assert not wrong, "norm names listed outside keras_tse/norms.py:\n" + "\n".join(wrong)


def test_the_norm_rule_catches_a_second_list(tmp_path):
    (tmp_path / "norms.py").write_text('NORMS = ("post", "pre")\n')
    (tmp_path / "sweep.py").write_text(
        'KINDS = {"post": 1, "deepnorm": 2}\nDEFAULT = "post,pre"\nONE = "post"\nARMS = (("pre", 1), ("rezero", 2))\n'
    )
    assert _norm_lists_outside_the_vocabulary(str(tmp_path), str(tmp_path)) == [
        "sweep.py:1 lists ['deepnorm', 'post']",
        "sweep.py:4 lists ['pre', 'rezero']",
        "sweep.py:2 lists 'post,pre'",
    ]


def _imports_inside_functions(folder):
    wrong = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.py"), recursive=True)):
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        wrong.append(f"{os.path.relpath(path, folder)}:{inner.lineno} {ast.unparse(inner)}")
    return wrong


def test_no_import_inside_a_function_under_layers():
    """The layers are the ground floor: a function-level import there hides an upward or circular one."""
    wrong = _imports_inside_functions(os.path.join(PACKAGE, "layers"))
    assert not wrong, "\n".join(wrong)


def test_the_import_rule_catches_a_function_level_import(tmp_path):
    (tmp_path / "block.py").write_text("import keras\n\n\ndef make():\n    from keras_tse import zoo\n    return zoo\n")
    assert _imports_inside_functions(str(tmp_path)) == ["block.py:5 from keras_tse import zoo"]
