"""The layout's import directions: library <- training <- cli (the commands) <- the lab
(`recipes/lab/`, in the checkout only), never back up: nothing of the installed package imports the lab.

Read from the source with `ast`, function-level imports included, so an import hidden inside a
function counts as much as one at the top; and checked live: `import keras_tse` loads neither
training nor the commands.
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
LAB = os.path.join(ROOT, "recipes", "lab")
TIERS = {"library": 0, "training": 1, "cli": 2, "lab": 3}
OURS = ("keras_tse", "recipes")


def _modules():
    for top in (PACKAGE, LAB):
        for folder, _, files in os.walk(top):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                    yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _tier(module):
    parts = module.split(".")
    if parts[0] == "recipes":
        return "lab"
    return parts[1] if len(parts) > 1 and parts[1] in ("training", "cli") else "library"


def _imports(path):
    """Every module of ours `path` imports, with the names taken from it: (module, name, line)."""
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None, node.lineno) for alias in node.names if alias.name.startswith(OURS))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(OURS):
            for alias in node.names:
                yield node.module, alias.name, node.lineno


def _imported(target, name):
    """The module an import reaches: `from keras_tse import cli` reaches keras_tse.cli."""
    return f"{target}.{name}" if name and _tier(target) == "library" and name in TIERS else target


def test_no_module_imports_from_a_higher_tier():
    wrong = []
    for module, path in _modules():
        for target, name, line in _imports(path):
            full = _imported(target, name)
            if TIERS[_tier(full)] > TIERS[_tier(module)]:
                wrong.append(f"{module}:{line} imports {full}")
    assert not wrong, "\n".join(wrong)


def test_the_lab_uses_the_library_and_the_trainer_never_the_commands():
    """The commands are a thin layer for people at a terminal; what the lab needs of them (the machine's
    name, a data subset, the bench's tables) lives in the library or the trainer, and the lab runs a command
    only as a process (`python -m keras_tse.cli.main`), as a user would."""
    wrong = [
        f"{module}:{line} imports {_imported(target, name)}"
        for module, path in _modules()
        if _tier(module) == "lab"
        for target, name, line in _imports(path)
        if _tier(_imported(target, name)) == "cli"
    ]
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
            # the lab checks its configs with the package's one family of argument checks, and finds its studies
            # with the package's one registry, not a second of either
            lab_checks = module.startswith("recipes.lab") and (
                (target == "keras_tse" and name == "_checks") or target == "keras_tse._registry"
            )
            if not (module == owner or module.startswith(owner + ".") or lab_checks):
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
        # whether Keras takes TensorFlow as installed (it imports it to seed it and to check a saved config's
        # types): Keras has no public switch, and a run that draws nothing from tf.data needs none of it
        ("keras_tse.data.pipeline", "lazy_tensorflow._available"),
        # dynamo's compile records, which torch exposes only there (the lab's torch_compile_time measures them)
        ("recipes.lab.torch_compile_time", "torch._dynamo.utils.compilation_time_metrics"),
        ("recipes.lab.torch_compile_time", "torch._dynamo.utils.counters"),
        ("recipes.lab.torch_compile_time", "torch._dynamo"),
        # Python's documented exit without cleanup: a peer's end stops a process whose main thread may be
        # blocked in a collective that never returns
        ("keras_tse.peers", "os._exit"),
        # the nested layers LoRA adapts: Keras has no public walk below a model's top level
        ("keras_tse.lora", "model._flatten_layers"),
        ("keras_tse.layers.centred_attention_block", "block._flatten_layers"),  # the attention inside a block
        # the hook Keras's MultiHeadAttention documents for "customized attention implementation"
        ("keras_tse.layers.centred_multi_head_attention", "super()._compute_attention"),
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


@pytest.mark.parametrize(
    "folder, line, reported",
    [
        # a library module that imports the commands
        ("layers", "from keras_tse.cli import bench", "keras_tse.layers.leak:2 imports keras_tse.cli"),
        # a command that imports the lab directly, not through `checkout.lab`: the wheel does not hold the lab
        ("cli", "from recipes.lab import engine", "keras_tse.cli.leak:2 imports recipes.lab"),
    ],
)
def test_the_rule_catches_an_upward_import(tmp_path, monkeypatch, folder, line, reported):
    """The checker itself, on a planted module."""
    bad = tmp_path / "keras_tse" / folder
    bad.mkdir(parents=True)
    (bad / "leak.py").write_text(f"def f():\n    {line}\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", str(tmp_path / "keras_tse"))
    monkeypatch.setattr(sys.modules[__name__], "LAB", str(tmp_path / "recipes" / "lab"))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    with pytest.raises(AssertionError, match=reported):
        test_no_module_imports_from_a_higher_tier()


def test_import_keras_tse_loads_no_training_or_experiment_module():
    code = (
        "import sys, keras_tse\n"
        "print(sorted(m for m in sys.modules if m.startswith(('keras_tse.training', 'keras_tse.cli'))))"
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
    but `keras_tse/norms.py` (the studies' groups), the layouts' own modules and the lab's study plans: a
    second list of norms that would drift from the first (a family's presets name their layout each)."""
    names = _vocabulary()
    vocabulary = os.path.join(package, "norms.py")
    # the layouts name themselves; a study plan of the lab is data that names the runs it describes (each
    # run's flags), not a vocabulary of norms
    exempt = [os.path.join(package, *parts) for parts in (("layouts",),)]
    wrong = []
    for folder, _, files in os.walk(package):
        for file in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, file)
            if os.path.abspath(path) == os.path.abspath(vocabulary) or any(path.startswith(e + os.sep) for e in exempt):
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


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory):
    """The wheel built from this checkout and installed alone into a folder: (its file names, the folder)."""
    import shutil
    import zipfile

    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "source"  # a copy of what the build reads, so that it leaves nothing in the checkout
    shutil.copytree(PACKAGE, source / "keras_tse", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, name), source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(folder), str(source)], check=True)
    (wheel,) = glob.glob(str(folder / "*.whl"))
    site = folder / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-compile", "--target", str(site), wheel], check=True)
    return zipfile.ZipFile(wheel).namelist(), site


@pytest.mark.starts_processes
def test_the_wheel_holds_the_product_and_not_the_lab(installed_wheel):
    names, _ = installed_wheel
    assert "keras_tse/cli/main.py" in names and "keras_tse/zoo/families/vit.py" in names
    moved = ("lab/", "sweep.py", "verdicts.py", "figures.py", "fresh_processes.py")  # the lab's, once the package's
    lab = [n for n in names if n.startswith("recipes/") or n.startswith(tuple(f"keras_tse/cli/{m}" for m in moved))]
    assert lab == []


@pytest.mark.starts_processes
def test_outside_a_checkout_the_lab_commands_say_where_the_lab_lives(installed_wheel, tmp_path):
    """From the installed wheel in a folder that is no checkout: `keras-tse study` (and the sweep) print one
    line and exit 2; presets, datasets, info, export and generation (shipped presets) work."""
    _, site = installed_wheel
    env = {**os.environ, "PYTHONPATH": str(site), "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "jax"}

    def cli(*args):
        command = [sys.executable, "-m", "keras_tse.cli.main", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)

    for args in (("study",), ("sweep", "--quick", "--out", str(tmp_path / "sweep"))):
        done = cli(*args)
        assert done.returncode == 2, done.stderr[-2000:]
        assert done.stderr.strip().splitlines() == [
            f"keras-tse {args[0]}: error: the lab (studies, the depth sweep, the paper's figures) lives in a "
            "checkout of keras_tse, in recipes/lab/, not in the installed package: clone the repository and run "
            "this command there"
        ]
    for args, printed in (
        (("presets",), "vit6_fashion_mnist"),
        (("datasets",), "fashion_mnist"),
        (("info",), "keras_tse"),
        (
            ("export", str(site / "keras_tse" / "zoo" / "weights" / "vit6_digits"), "--out", str(tmp_path / "m.keras")),
            "",
        ),
        (
            ("generate", "gpt4_ptb", "--prompt", "the company said", "--max-new-tokens", "3", "--temperature", "0"),
            "the company said",
        ),
    ):
        done = cli(*args)
        assert done.returncode == 0 and printed in done.stdout, (args, done.stdout[-500:], done.stderr[-2000:])
    assert (tmp_path / "m.keras").stat().st_size > 0


def _import_graph():
    """module -> the modules of ours it imports (function-level imports included), over the package and the
    lab; `from A import B` is an edge to A.B where B is a module, else to A."""
    modules = dict(_modules())

    def owner(name):
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in modules.items():
        targets = set()
        for target, name, _ in _imports(path):
            targets.add(owner(f"{target}.{name}" if name and f"{target}.{name}" in modules else target))
        graph[module] = targets - {module, ""}
    return graph


def _circles(graph):
    """The import circles of `graph`: each a sorted list of the modules that import one another round."""
    found, done = set(), set()

    def visit(module, path):
        if module in path:
            found.add(tuple(sorted(path[path.index(module) :])))
            return
        if module in done:
            return
        for target in graph.get(module, ()):
            visit(target, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])
    return sorted(found)


def test_no_module_is_part_of_an_import_circle():
    assert _circles(_import_graph()) == []


def test_the_circle_rule_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [("a", "b", "c")]


@pytest.mark.parametrize("line", ["from keras_tse.cli.info import machine_name", "from keras_tse import cli"])
def test_the_lab_rule_catches_a_lab_module_importing_a_command(tmp_path, monkeypatch, line):
    lab = tmp_path / "recipes" / "lab"
    lab.mkdir(parents=True)
    (lab / "leak.py").write_text(f"def f():\n    {line}\n")
    (tmp_path / "keras_tse").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", str(tmp_path / "keras_tse"))
    monkeypatch.setattr(sys.modules[__name__], "LAB", str(lab))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", str(tmp_path))
    with pytest.raises(AssertionError, match=r"recipes\.lab\.leak:2 imports keras_tse\.cli"):
        test_the_lab_uses_the_library_and_the_trainer_never_the_commands()


# One mechanism per idea: a whole file is written by `keras_tse.run_files` (a temporary sibling, fsynced,
# renamed: never half a file), an import hook is `keras_tse._lazy.after_import`. The scan below finds a
# second way in the package and the lab. Opening a file to append (a log that grows) is not a whole-file write.
OWN_WRITER = "keras_tse/run_files.py"
OWN_HOOK = "keras_tse/_lazy.py"
# name -> the owners whose call of it writes a file another way (None: any owner)
SECOND_WRITERS = {
    "savefig": None,
    "write_bytes": None,
    "write_text": None,
    "savez": ("np", "numpy"),
    "savez_compressed": ("np", "numpy"),
    "savetxt": ("np", "numpy"),
    "copyfile": ("shutil",),
    "copy": ("shutil",),
    "copy2": ("shutil",),
}


def _open_mode(call):
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else ""


def _not_a_file(call):
    """os.devnull, or a kernel setting under /proc/: a write that is no file of anyone's."""
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Attribute) and first.attr == "devnull":
        return True
    return isinstance(first, ast.Constant) and str(first.value).startswith("/proc/")


def second_mechanisms(path, relative):
    """`file:line what` for each write or import hook in `path` that is not through the project's one."""
    found = []
    for node in ast.walk(ast.parse(open(path).read())):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
        owner = function.value if isinstance(function, ast.Attribute) else None
        owner_name = getattr(owner, "id", getattr(owner, "attr", ""))
        if relative != OWN_WRITER:
            if name == "open" and owner is None and set(_open_mode(node)) & set("wx") and not _not_a_file(node):
                found.append(f"{relative}:{node.lineno} open(..., {_open_mode(node)!r})")
            elif name in SECOND_WRITERS and owner is not None and owner_name != "run_files":
                if SECOND_WRITERS[name] is None or owner_name in SECOND_WRITERS[name]:
                    found.append(f"{relative}:{node.lineno} {owner_name}.{name}")
        if relative != OWN_HOOK and name in ("insert", "append") and getattr(owner, "attr", "") == "meta_path":
            found.append(f"{relative}:{node.lineno} sys.meta_path.{name}")
    return found


def test_every_whole_file_write_and_import_hook_goes_through_the_one_mechanism():
    found = [
        line
        for _, path in _modules()
        for line in second_mechanisms(path, os.path.relpath(path, ROOT).replace(os.sep, "/"))
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "line, reported",
    [
        ('with open(path, "w") as f:\n        f.write("x")', "open(..., 'w')"),
        ('pathlib.Path(path).write_text("x")', ".write_text"),
        ("figure.savefig(path)", "figure.savefig"),
        ("np.savez(path, x=x)", "np.savez"),
        ("sys.meta_path.insert(0, object())", "sys.meta_path.insert"),
    ],
)
def test_the_mechanism_scan_catches_a_planted_second_one(tmp_path, line, reported):
    planted = tmp_path / "planted.py"
    planted.write_text(f"def f(path):\n    {line}\n")
    found = second_mechanisms(str(planted), "recipes/lab/planted.py")
    assert len(found) == 1 and found[0].startswith("recipes/lab/planted.py:2 ") and reported in found[0]
    owner = OWN_HOOK if "meta_path" in line else OWN_WRITER
    assert not second_mechanisms(str(planted), owner)  # the one mechanism's own module uses it
