"""A training run is one plan (`keras_tse.training.Plan`), made once from the command line or from Python and
run by one trainer: the same plan either way, every setting declared once, the data surveyed once, the run
folder claimed and each of its settings compared once, and no built-in family or data set special-cased."""

import ast
import json
import os
import subprocess
import sys

import pytest

from keras_tse import data, zoo
from keras_tse.cli import train_lm, train_vit
from keras_tse.training import Plan, image_runs, text_runs, train
from tests.helpers import planned

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py (every backend trains: the recipes' tests)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the trainer and the task modules: where a run is planned and run
RUN_MODULES = (
    "keras_tse/training/plans.py",
    "keras_tse/training/trainer.py",
    "keras_tse/training/image_runs.py",
    "keras_tse/training/text_runs.py",
    "keras_tse/training/run_settings.py",
    "keras_tse/cli/train_vit.py",
    "keras_tse/cli/train_lm.py",
)
TINY = dict(dataset="digits", depth=1, hidden_dim=16, num_heads=2, epochs=1, seed=3)


def test_python_builds_the_plan_the_command_line_builds_and_both_write_the_same_config(tmp_path):
    """`keras-tse train vit ...` and `train(Plan.build("images", ...))` with the same settings: the same
    config.json and the same numbers; a language model's plan is the same either way too."""
    from keras_tse.cli import main as cli

    argv = ["--dataset", "digits", "--depth", "1", "--hidden-dim", "16", "--num-heads", "2", "--epochs", "1"]
    argv += ["--seed", "3", "--norm", "post", "--verbose", "0"]
    assert cli.main(["train", "vit", *argv, "--out", str(tmp_path / "cli")]) == 0
    summaries = train(Plan.build("images", **TINY, norm=("post",), verbose=0, out=str(tmp_path / "python")))
    written = [json.loads((tmp_path / run / "post" / "config.json").read_text()) for run in ("cli", "python")]
    assert written[0] == written[1] and written[0]["overrides"]["depth"] == 1
    stored = json.loads((tmp_path / "cli" / "post" / "summary.json").read_text())
    assert summaries["post"]["train_loss"] == stored["train_loss"]

    lm = ["--dataset", "python_docs", "--depth", "2", "--steps", "3", "--norm", "pre,deescalate"]
    from_flags = planned("wikitext103_txl", [*lm, "--out", str(tmp_path / "lm")])
    from_python = Plan.build(
        "text", dataset="python_docs", depth=2, steps=3, norm=("pre", "deescalate"), out=str(tmp_path / "lm")
    )
    assert [v.known for v in from_flags.variants] == [v.known for v in from_python.variants]
    assert from_python.variant("pre").overrides["depth"] == 2 and from_python.variant("pre").config.steps == 3


@pytest.mark.parametrize("module, kind", [(train_vit, image_runs), (train_lm, text_runs)])
def test_every_flag_is_a_setting_of_its_run_kind_at_the_same_default(module, kind):
    """The flags of `keras-tse train vit|lm` are the run kind's settings, by name and default: a flag added
    without its setting, or a default changed in one place only, fails here."""
    parsed = vars(module.parse_args([]))
    derived = ("out", "verbose")  # the parser's own: a folder named after the settings, a terminal's bar
    assert set(parsed) == set(kind.DEFAULTS)
    assert {k: v for k, v in parsed.items() if k not in derived} == {
        k: v for k, v in kind.DEFAULTS.items() if k not in derived
    }


def test_a_setting_python_gives_that_no_run_takes_is_one_line():
    with pytest.raises(ValueError, match=r"^depht: received 3; expected a setting of the run: augment, batch_size"):
        Plan.build("images", depht=3)
    with pytest.raises(ValueError, match=r"^task: received 'audio'; expected one of images, text$"):
        Plan.build("audio")


def test_a_three_variant_folder_run_surveys_the_folder_claims_and_checks_once_and_wraps_the_edge_once(
    tmp_path, monkeypatch, capsys
):
    """One `keras-tse train` of three variants on an image folder: the folder walked once (a hidden folder in it
    said once), the run folder claimed once, each variant's folder compared once per setting (before the data,
    then only what the data added), the command's edge (interrupt catch, exit code, lock release) once."""
    from keras_tse import interrupts, run_files
    from keras_tse.cli import main as cli
    from keras_tse.run_files import flatten
    from keras_tse.training import runner
    from tests.test_bad_inputs import image_folder

    folder = image_folder(tmp_path / "images", classes=("cat", "dog", "owl"), per_class=4)
    os.makedirs(os.path.join(folder, ".ipynb_checkpoints"))
    calls = {"claim": 0, "catch": 0, "walk": 0}
    compared = {}
    for module, name, key in ((run_files, "claim_folder", "claim"), (interrupts, "catch", "catch")):
        monkeypatch.setattr(module, name, _counting(getattr(module, name), calls, key))
    from keras_tse.data import own

    monkeypatch.setattr(own, "image_folder_layout", _counting(own.image_folder_layout, calls, "walk"))
    check = runner.check_run_folder

    def recording(run_dir, run_config, partial=False, defaults=None, checked=None):
        keys = set(flatten(json.loads(json.dumps(run_config)))) - set(flatten(json.loads(json.dumps(checked or {}))))
        compared.setdefault(run_dir, []).append(keys)
        return check(run_dir, run_config, partial=partial, defaults=defaults, checked=checked)

    monkeypatch.setattr(runner, "check_run_folder", recording)
    argv = ["train", "--dataset", "folder", "--data-dir", folder, "--image-size", "8", "--patch-size", "4"]
    argv += ["--depth", "1", "--hidden-dim", "16", "--num-heads", "2", "--epochs", "1", "--batch-size", "4"]
    assert cli.main([*argv, "--norm", "post,pre,deescalate", "--verbose", "0", "--out", str(tmp_path / "run")]) == 0
    assert capsys.readouterr().out.count("skipping hidden folder") == 1
    assert calls == {"claim": 1, "catch": 1, "walk": 1}
    assert len(compared) == 3
    for run_dir, (before_data, opening) in compared.items():
        assert not before_data & opening, (run_dir, before_data & opening)  # no setting compared twice
        assert "overrides.depth" in before_data and "train_size" in opening


def _counting(function, calls, key):
    def counted(*args, **kwargs):
        calls[key] += 1
        return function(*args, **kwargs)

    return counted


def built_in_names():
    return set(zoo.list_families()) | set(data.list_datasets())


def name_comparisons(source, names):
    """(line, name) of every comparison in `source` with a string constant among `names` (`x == "vit"`,
    `x != "cifar10"`, `x in ("folder", "npz")`): a built-in family or data set special-cased."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                constants = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found += [
                    (node.lineno, c.value)
                    for c in constants
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in names
                ]
    return found


def test_no_built_in_family_or_data_set_is_special_cased_where_a_run_is_planned_and_run():
    """The trainer and the task modules ask families and data sets what they declare: no comparison with a
    built-in name (the scan itself finds a planted one)."""
    names = built_in_names()
    planted = 'if settings.dataset == "cifar10" or model in ("gpt",):\n    pass\nif x != "post":\n    pass\n'
    assert name_comparisons(planted, names) == [(1, "cifar10"), (1, "gpt")]
    for path in RUN_MODULES:
        with open(os.path.join(ROOT, path)) as f:
            assert name_comparisons(f.read(), names) == [], path


TOY_FAMILY = '''"""A family added as one module of keras_tse/zoo/families: its builder and its presets."""

from keras_tse import zoo
from keras_tse.zoo.registry import preset, register_family

PRESETS = {"toy_vit_tiny": preset(dict(depth=1), "a one-block toy ViT", "none", "toy_vit_tiny")}


@register_family("toy_vit", lambda config: f"{config['image_size']}px images", presets=PRESETS)
def toy_vit(image_size=8, channels=1, num_classes=10, norm="deescalate", depth=2, name=None):
    return zoo.vit(depth, norm, image_size=image_size, patch_size=2, channels=channels, num_classes=num_classes,
                   hidden_dim=16, ffn_dim=32, num_heads=2, name=name)
'''

# the folder the family's file is dropped into, as keras_tse/zoo/families itself: the package's search path
ADD_FAMILY = """
import sys
import keras_tse.zoo.families
keras_tse.zoo.families.__path__.append(sys.argv[1])
from keras_tse import zoo
from keras_tse.cli import main
print(zoo.list_models("toy*"), zoo.create_model("toy_vit_tiny").count_params())
argv = ["train", "toy_vit", "--dataset", "digits", "--depth", "1", "--epochs", "1", "--train-size", "100"]
sys.exit(main.main([*argv, "--verbose", "0", "--out", sys.argv[2]]))
"""


@pytest.mark.starts_processes  # a fresh process: the families' folder is read once, when a family is first named
def test_a_family_added_as_one_module_of_the_families_folder_is_found_and_trains_from_the_command_line(tmp_path):
    """No list to edit: a module beside vit.py under keras_tse/zoo/families is found the first time a family is
    named; its preset is listed and builds; `keras-tse train NAME` trains it on a registered data set."""
    (tmp_path / "families").mkdir()
    (tmp_path / "families" / "toy.py").write_text(TOY_FAMILY)
    code = [sys.executable, "-c", ADD_FAMILY, str(tmp_path / "families"), str(tmp_path / "run")]
    done = subprocess.run(code, capture_output=True, text=True, env={**os.environ, "KERAS_BACKEND": "jax"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    listed = zoo.create_model("vit", depth=1, image_size=8, patch_size=2, channels=1, num_classes=10, hidden_dim=16,
                              ffn_dim=32, num_heads=2).count_params()  # fmt: skip
    assert done.stdout.splitlines()[0] == f"['toy_vit', 'toy_vit_tiny'] {listed}"
    with open(tmp_path / "run" / "deescalate" / "config.json") as f:
        config = json.load(f)
    assert config["model"] == "toy_vit" and config["overrides"] == {"norm": "deescalate", "depth": 1}
    with open(tmp_path / "run" / "deescalate" / "summary.json") as f:
        assert json.load(f)["epochs"] == 1
    assert "toy_vit" not in zoo.list_families()  # this process's folder holds the zoo's own


TOY_STUDY = '''"""A study added as one file: two arms, its table and its claims' metric declared here."""

import os
import sys

from recipes.lab import engine

PLAN = engine.Plan(arms=("fast", "slow"), grid=(1e-3,), seeds=tuple(range(7)), bracket=False)
RESULTS = os.path.join(os.path.dirname(__file__), "toy.csv")
FIELDS = ("arm", "learning_rate", "seed", "train_loss")
TITLE = "a toy study"
CARD = os.path.join(os.path.dirname(__file__), "toy.md")
CLAIM_METRIC = "train_loss"


def run_cell(runs, arm, learning_rate, seed):
    loss = (0.1 if arm == "fast" else 1.0) + 0.01 * ((seed * 7) % 5)
    return {"arm": arm, "learning_rate": f"{learning_rate:g}", "seed": seed, "train_loss": loss}


def markdown_table(rows):
    return f"{len(rows)} toy rows"


STUDY = engine.study_of(sys.modules[__name__])
'''


def test_a_study_added_in_one_file_is_listed_fills_its_card_and_its_claims_are_checked(tmp_path, monkeypatch, capsys):
    """One new `*_study.py` of the lab (and its card): `keras-tse study` lists it, its card's generated block
    is its table, and a claim about its arms in the card is judged on its rows (a true one holds, a false one
    fails), nothing else edited."""
    import recipes.lab
    from keras_tse._registry import Registry
    from keras_tse.cli import main as cli
    from keras_tse.run_files import append_row
    from recipes.lab import engine, generated_tables, verdict_claims

    (tmp_path / "toy_study.py").write_text(TOY_STUDY)
    monkeypatch.setattr(recipes.lab, "__path__", [*recipes.lab.__path__, str(tmp_path)])
    registry = Registry("study", "study", package="recipes.lab", suffix="_study", module_is_entry=True)
    monkeypatch.setattr(engine, "STUDIES", registry)
    verdict_claims.sources.cache_clear()
    toy = engine.studies()["toy"]
    for arm in toy.arms():
        for learning_rate, seed in engine.next_cells([], arm, toy.plan_of(arm)):
            append_row(toy.results, toy.run_cell(str(tmp_path), arm, learning_rate, seed))

    assert cli.main(["study"]) == 0
    assert "toy          a toy study" in capsys.readouterr().out
    card = "<!-- generated: toy -->\n<!-- end generated -->\n"
    assert generated_tables.rewrite(card)[0] == "<!-- generated: toy -->\n14 toy rows\n<!-- end generated -->\n"
    assert verdict_claims.check_text("<!-- verdict toy: fast beats slow -->") == []
    failed = verdict_claims.check_text("<!-- verdict toy: slow beats fast -->")
    assert len(failed) == 1 and failed[0].startswith("slow loses to fast"), failed
    verdict_claims.sources.cache_clear()
