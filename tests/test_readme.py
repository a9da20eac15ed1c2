"""The README's commands are what CI runs, and its Python snippets (and the training reference's,
recipes/README.md) run as written."""

import json
import pathlib
import re

import keras
import pytest

from keras_tse.training import block_compile
from tests.helpers import pyproject_floors

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
TRAINING = (ROOT / "recipes" / "README.md").read_text()


def _blocks(language, text=README):
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def test_readme_opens_with_two_commands_and_ci_runs_the_test_one():
    install_demo, install_test = (block.strip() for block in _blocks("bash")[:2])
    assert README.lstrip().startswith("# keras_tse\n\n```bash\n" + install_demo)
    demo = "KERAS_BACKEND=jax keras-tse demo --quick"
    assert install_demo.endswith(demo) and "run_all_backends.py" in install_test
    ci = (ROOT / ".ci" / "run").read_text()
    assert install_test in ci
    assert demo in ci  # the first command's run, as written


def test_python_snippets_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the snippets write blocks.keras, history.csv, plots/
    snippets = _blocks("python") + _blocks("python", TRAINING)
    assert len(snippets) == 7  # the main API, the layers, zoo, callbacks, presets, KerasHub; Plan; fit_variant
    namespaces = [{} for _ in snippets]
    for snippet, namespace in zip(snippets, namespaces):
        exec(compile(snippet, "README.md", "exec"), namespace)
    blocks = block_compile.model_blocks(namespaces[2]["small"])  # the zoo snippet
    assert [block_compile.is_compiled(b) for b in blocks] == [keras.backend.backend() == "torch"] * 4
    assert (tmp_path / "blocks.keras").exists()
    with open(tmp_path / "history.csv") as f:
        assert "tsim_last" in f.readline()
    with open(tmp_path / "similarity.csv") as f:
        assert "tsim_3" in f.readline()
    assert (tmp_path / "plots" / "token_similarity_heatmap.png").exists()
    assert (tmp_path / "my_run" / "deescalate" / "checkpoints" / "last.keras").exists()
    assert [v.norm for v in namespaces[5]["plan"].variants] == ["post", "pre", "deescalate"]  # the Plan snippet
    with open(tmp_path / "my_plan" / "deescalate" / "config.json") as f:
        assert json.load(f)["overrides"]["depth"] == 1


def test_cli_reports_bad_settings_without_a_traceback(capsys, tmp_path, monkeypatch):
    from keras_tse.cli.main import main

    monkeypatch.chdir(tmp_path)

    with pytest.raises(SystemExit) as exit_info:  # refused where the flag enters, before anything runs
        main(["demo", "--epochs", "0"])
    assert exit_info.value.code == 2
    assert (
        capsys.readouterr().err.strip() == "keras-tse demo: error: --epochs: received '0'; expected a positive integer"
    )
    # a value given twice is refused where the flag enters too
    with pytest.raises(SystemExit):
        main(["demo", "--depth", "2", "--seeds", "0,0"])
    expected = "keras-tse demo: error: --seeds: received '0,0'; expected distinct values, comma-separated"
    assert capsys.readouterr().err.strip() == expected


def test_cli_version_and_subcommand_descriptions(capsys):
    from keras_tse.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    import keras_tse  # the installed metadata and the package agree

    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"keras-tse {keras_tse.__version__}"
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    assert (
        "resumable grid: depth x norm x tau x lr x seed, ViT on 8x8 digits"
        in capsys.readouterr().out.split("options")[0]
    )


def test_the_readme_leads_and_stays_short():
    """The two commands first, then what a user does most; the reference lives in recipes/README.md,
    zoo/README.md, tests/README.md and the docstrings."""
    assert len(README.encode()) <= 24_000, len(README.encode())
    assert "recipes/README.md" in README and "tests/README.md" in README and "zoo/README.md" in README


def test_the_versions_the_readme_names_are_the_floors_pyproject_asks_for():
    """A user reads the versions in the README and pip enforces pyproject's: one line names Python's, Keras's and
    each backend's floor, and each is the lowest its requirement allows."""
    floors = pyproject_floors()
    named = dict(
        (name.lower(), version)
        for name, version in re.findall(r"\b(Python|Keras|TensorFlow|JAX|PyTorch) (\d+(?:\.\d+)+)\+", README)
    )
    named["torch"] = named.pop("pytorch")
    assert named == {k: str(floors[k]) for k in ("python", "keras", "tensorflow", "jax", "torch")}, (named, floors)
