"""The command line starts fast: `keras-tse --help` imports no Keras and no backend,
while `import keras_tse` still registers the serializable classes before any `.keras` load."""

import json
import os
import re
import subprocess
import sys

import pytest

from keras_tse.cli import flags
from keras_tse.cli import main as cli

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "vit_deescalate")


def _fresh(code, backend=None):
    env = {**os.environ, "KERAS_BACKEND": backend or os.environ.get("KERAS_BACKEND", "jax")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True)


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["--version"]])
def test_help_answers_without_importing_keras(argv):
    """Help and version need no Keras: importing it (and a backend) is what makes a command start slowly."""
    code = (
        "import sys\nfrom keras_tse.cli import main as cli\n"
        f"try:\n    cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print('KERAS', 'keras' in sys.modules)"
    )
    out = _fresh(code).stdout
    assert "KERAS False" in out
    assert "keras-tse" in out


@pytest.mark.parametrize("recipe", ["cifar10_vit", "wikitext103_txl"])
def test_recipe_help_answers_without_keras(recipe):
    """A recipe's constants and flags need no Keras (the library's packages load names on use), so
    `--help` does not pay the 3.5-5 s of importing Keras and TensorFlow it took before."""
    path = os.path.join(ROOT, "recipes", f"{recipe}.py")
    code = (
        f"import runpy, sys\nsys.argv = [{path!r}, '--help']\n"
        f"try:\n    runpy.run_path({path!r}, run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print('IMPORTED', sorted(m for m in ('keras', 'tensorflow', 'jax', 'torch') if m in sys.modules))"
    )
    out = _fresh(code, backend="tensorflow").stdout
    assert "--compile-cache" in out and "--init {torch,glorot,normal,transformer_xl}" in out
    assert out.rstrip().splitlines()[-1] == "IMPORTED []"


def test_demo_help_states_the_defaults_of_demo_config():
    from keras_tse.training.demo import DemoConfig

    defaults = DemoConfig()
    text = cli._parser()._subparsers._group_actions[0].choices["demo"].format_help()
    text = " ".join(text.split())
    assert f"blocks (default: {defaults.depth})" in text
    assert f"epochs (default: {defaults.epochs})" in text
    assert f"(default: {defaults.learning_rate})" in text
    assert f"(default: {','.join(map(str, defaults.seeds))})" in text


@pytest.mark.parametrize(
    "first",
    [
        "import keras_tse",  # the package alone, then Keras
        "import keras_tse.data",  # a subpackage that imports Keras itself
        "from keras_tse.layers import DeEscalation",  # Keras imported in the middle of keras_tse.layers
    ],
)
def test_classes_are_registered_before_a_keras_load_whatever_the_import_order(first):
    code = (
        f"{first}\nimport keras, numpy as np\n"
        f"model = keras.saving.load_model({FIXTURE + '.keras'!r})\n"
        f"saved = np.load({FIXTURE + '.npz'!r})\n"
        "np.testing.assert_allclose(np.asarray(model.predict(saved['inputs'], verbose=0)), saved['expected'], "
        "rtol=1e-4, atol=1e-4)\nprint('LOADED', model.name)"
    )
    assert "LOADED" in _fresh(code, backend="jax").stdout  # registration is the package's; JAX imports fastest


def test_import_keras_tse_alone_imports_no_keras():
    assert _fresh("import sys, keras_tse\nprint('keras' in sys.modules)").stdout.split()[-1] == "False"


def test_version_names_the_package():
    out = _fresh("from keras_tse.cli import main as cli\ncli.main(['--version'])\n", backend="jax")
    assert re.search(r"keras-tse \S+", out.stdout)


@pytest.mark.parametrize("save", [True, False])
def test_escalation_ends_by_saying_where_its_output_is(tmp_path, capsys, save):
    csv_path = str(tmp_path / "escalation.csv")
    argv = ["escalation", "--depth", "2", "--hidden", "16", "--heads", "2", "--ffn", "32", "--tokens", "8"]
    assert cli.main(argv + ["--seeds", "1"] + (["--csv", csv_path] if save else [])) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    if save:
        assert last.endswith(f"outputs in {csv_path}") and os.path.getsize(csv_path) > 0
    else:
        assert last.endswith("the table above is the output (--csv FILE saves it)")


@pytest.mark.parametrize("backend", ["jax", "torch", "tensorflow"])
def test_info_names_the_backend_its_version_and_whether_a_gpu_is_used(backend):
    """`keras-tse info` in a fresh process per backend: what it prints is what that backend reports."""
    from importlib.metadata import version

    shown = subprocess.run(
        [sys.executable, "-m", "keras_tse.cli.main", "info"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"},
        check=True,
    ).stdout
    facts = dict(line.strip().split(": ", 1) for line in shown.splitlines())
    assert facts["backend"] == backend and facts["trains"] == "yes"
    assert facts["backend_version"] == version(backend)
    assert facts["keras"] == version("keras") and facts["dtype_policy"] == "float32"
    devices = facts["devices"].split(", ")
    assert any(d.startswith("cpu:") for d in devices), devices
    accelerators = [d for d in devices if not d.startswith("cpu:")]
    assert facts["accelerator"] == (accelerators[0] if accelerators else "none (CPU only)")
    assert facts["process"] == (
        f"0 of 1 ({len(devices)} device{'s' if len(devices) > 1 else ''} in all)" if backend == "jax" else "0 of 1"
    )


def test_info_on_tensorflow_lists_what_tensorflow_lists_without_importing_it_where_no_gpu_can_be_seen():
    """Importing TensorFlow takes 3.4-4.5 s on the 2-core CPU, over info's 2 s; where no GPU driver
    loads, info answers without it, and the answer is TensorFlow's own listing."""
    from keras_tse import machine

    listing = (
        "import tensorflow as tf\nfrom keras_tse.machine import backend_devices\n"
        "print(repr(backend_devices('tensorflow')))"
    )
    if machine.tensorflow_could_see_a_gpu():
        pytest.skip("a GPU driver loads here: info imports TensorFlow, the listing is its own")
    env = {"TF_CPP_MIN_LOG_LEVEL": "3"}
    with_tf = (
        subprocess.run(
            [sys.executable, "-c", listing],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, **env},
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    without = "from keras_tse.cli.info import environment\nimport sys\nenvironment()\n"
    without += "print(repr(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)))"
    imported = _fresh(without, backend="tensorflow").stdout.strip()
    assert imported == "[]"
    assert repr(machine.backend_devices("tensorflow")) == with_tf


def test_info_imports_tensorflow_where_a_gpu_driver_or_a_device_plug_in_is_found(monkeypatch, tmp_path):
    from keras_tse import machine

    if sys.platform != "linux":
        pytest.skip("off Linux info always asks TensorFlow")
    monkeypatch.setattr(machine, "_loadable", lambda library: True)
    assert machine.tensorflow_could_see_a_gpu()
    monkeypatch.setattr(machine, "_loadable", lambda library: False)
    assert not machine.tensorflow_could_see_a_gpu()  # the CUDA build here, no driver
    monkeypatch.setenv("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", str(tmp_path))
    assert machine.tensorflow_could_see_a_gpu()
    monkeypatch.delenv("TF_PLUGGABLE_DEVICE_LIBRARY_PATH")
    changed = tmp_path / "build_info.py"
    changed.write_text("information = {}\n")  # a future TensorFlow renaming the dict: ask TensorFlow
    assert machine._tensorflow_build_info(str(changed)) is None
    assert machine._tensorflow_build_info(str(tmp_path / "missing.py")) is None
    monkeypatch.setattr(machine, "_tensorflow_build_info", lambda path: None)
    assert machine.tensorflow_could_see_a_gpu()


def test_demo_quick_is_one_seed_for_three_epochs_at_half_depth_and_keeps_what_the_user_gave():
    from keras_tse.training.demo import DemoConfig

    quick = flags.config_from(DemoConfig, cli._parser().parse_args(["demo", "--quick"]))
    assert (quick.epochs, quick.seeds, quick.depth) == (3, (0,), 12)
    argv = ["demo", "--quick", "--epochs", "5", "--seeds", "1,2", "--depth", "24"]
    given = flags.config_from(DemoConfig, cli._parser().parse_args(argv))
    assert (given.epochs, given.seeds, given.depth) == (5, (1, 2), 24)


KERAS_JSON = {"backend": "numpy", "floatx": "float64", "image_data_format": "channels_first"}


# Keras's defaults; keras.json's backend, floatx and format; KERAS_BACKEND over keras.json's backend, its other
# settings kept (KERAS_BACKEND over the defaults adds nothing to the two: one fresh Keras import fewer)
@pytest.mark.parametrize("keras_json, backend_variable", [(None, None), (KERAS_JSON, None), (KERAS_JSON, "torch")])
def test_info_reads_keras_settings_as_keras_does(tmp_path, keras_json, backend_variable):
    """`keras-tse info` reads the backend, floatx and data format without importing Keras: what Keras
    itself reports in a fresh process with the same keras.json and KERAS_BACKEND."""
    from keras_tse.cli.info import keras_settings

    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env["KERAS_HOME"] = str(tmp_path)
    if keras_json is not None:
        (tmp_path / "keras.json").write_text(json.dumps(keras_json))
    if backend_variable is not None:
        env["KERAS_BACKEND"] = backend_variable
    code = (
        "import json, keras; from keras import config; print(json.dumps([keras.backend.backend(), "
        "config.floatx(), config.image_data_format(), config.dtype_policy().name]))"
    )
    backend, floatx, data_format, policy = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("KERAS_BACKEND", raising=False)
        for name in ("KERAS_HOME", "KERAS_BACKEND"):
            if name in env:
                patch.setenv(name, env[name])
        assert keras_settings() == (backend, floatx, data_format)
    assert policy == floatx  # what info prints as the dtype policy


def _recipe_parser(name, monkeypatch):
    """The argparse parser a recipe's `parse_args` builds."""
    from keras_tse.cli import flags
    from tests.helpers import recipe_module

    built = []

    def capture(parser, args=None, namespace=None):
        built.append(parser)
        raise LookupError  # stop here: only the parser is wanted

    monkeypatch.setattr(flags.Parser, "parse_args", capture)
    with pytest.raises(LookupError):
        recipe_module(name).parse_args([])
    return built[0]


def test_every_default_is_in_help(monkeypatch):
    import argparse

    commands = cli._parser()._subparsers._group_actions[0].choices
    parsers = [
        *commands.values(),
        _recipe_parser("cifar10_vit", monkeypatch),
        _recipe_parser("wikitext103_txl", monkeypatch),
    ]
    unshown = []
    for parser in parsers:
        for action in parser._actions:
            nothing = action.default is None or action.default == argparse.SUPPRESS or isinstance(action.default, bool)
            if not action.option_strings or nothing:
                continue
            text = parser._get_formatter()._format_action(action)
            if "default" not in text:
                unshown.append(f"{parser.prog} {action.option_strings[0]}")
    assert not unshown
    help_text = " ".join(commands["escalation"].format_help().split())  # argparse wraps the lines
    assert "hidden size (default: 512)" in help_text
    vit_help = " ".join(_recipe_parser("cifar10_vit", monkeypatch).format_help().split())
    assert "dropout (default: 0)" in vit_help and "data set is or goes (default $KERAS_TSE_DATA_DIR" in vit_help


def test_vit_recipe_model_flags_reach_the_preset(tmp_path):
    from tests.helpers import planned

    argv = ["--num-heads", "4", "--head-dim", "16", "--patch-size", "8", "--norm", "post"]
    overrides = planned("cifar10_vit", argv).variant("post").overrides  # 32 / 8 patches, 64 / 4 heads: accepted
    assert (overrides["num_heads"], overrides["hidden_dim"], overrides["ffn_dim"], overrides["patch_size"]) == (
        4,
        64,
        128,
        8,
    )


def test_txl_recipe_batch_size_and_epochs(tmp_path):
    from tests.helpers import planned, recipe_module

    txl = recipe_module("wikitext103_txl")
    plan = planned("wikitext103_txl", ["--dataset", "ptb", "--batch-size", "4", "--norm", "pre,deescalate"])
    assert plan.settings.norm == ("pre", "deescalate") and plan.variant("pre").config.batch_size == 4
    assert plan.variant("pre").overrides["batch_size"] == 4  # the memory is built for it
    assert txl.parse_args(["--epochs", "0.5"]).epochs == 0.5


@pytest.mark.large
@pytest.mark.starts_processes  # its two training processes run under JAX, whatever backend hosts the test
def test_keras_tse_train_trains_a_vit_and_a_gpt_from_a_folder_outside_the_checkout(tmp_path):
    """`keras-tse train [NAME]` is the package's own: run from another folder (nothing of the checkout on
    the path but the installed package), it trains a ViT (no NAME: the paper's vit) on the shipped digits and
    a GPT (its family named) on a text folder, each into the run folder named after its data set and family
    under the working folder's runs/."""
    from tests.helpers import text_folder

    text = text_folder(tmp_path / "my_text")
    commands = (
        ["--dataset", "digits", "--depth", "2", "--hidden-dim", "16", "--num-heads", "2", "--epochs", "1"],
        ["gpt", "--dataset", "text", "--data-dir", str(text), "--depth", "2", "--steps", "10"],
    )
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ""}
    for argv in commands:
        command = [sys.executable, "-m", "keras_tse.cli.main", "train", *argv, "--norm", "deescalate"]
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
    for task in ("digits_vit", "text_gpt"):
        with open(tmp_path / "runs" / task / "deescalate" / "summary.json") as f:
            assert json.load(f)["train_loss"] > 0
        assert (tmp_path / "runs" / task / "plots" / "loss_curves.png").stat().st_size > 0


def test_info_under_a_backend_that_cannot_train_says_so():
    shown = subprocess.run(
        [sys.executable, "-m", "keras_tse.cli.main", "info"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "KERAS_BACKEND": "numpy"},
        check=True,
    ).stdout
    facts = dict(line.strip().split(": ", 1) for line in shown.splitlines())
    assert facts["trains"] == "no: numpy runs inference only; train with KERAS_BACKEND=tensorflow or jax or torch"


def test_a_training_command_runs_behind_one_edge_that_names_its_task(monkeypatch, capsys):
    """`keras-tse train NAME` runs its task behind `keras-tse`'s edge alone (interrupts caught once, the
    folders released once), and a refusal's line names `keras-tse train NAME`."""
    from keras_tse.cli import flags
    from keras_tse.cli import main as cli

    caught, released = [], []
    catch, release_all = flags.interrupts.catch, flags.run_lock.release_all
    monkeypatch.setattr(flags.interrupts, "catch", lambda: (caught.append(1), catch())[1])
    monkeypatch.setattr(flags.run_lock, "release_all", lambda: (released.append(1), release_all())[1])
    assert cli.main(["train", "vit", "--model", "vits"]) == 2
    assert caught == [1] and released == [1]
    assert capsys.readouterr().err.startswith("keras-tse train vit: error: --model: received vits;")
