import contextlib
import os

import keras
import numpy as np

# XLA:CPU's loop emitters for every process the suite starts (recipes, commands, workers), as
# `fewer_cpu_compile_passes` (tests/conftest.py) gives this process's own compiles: tests/conftest.py puts it in
# XLA_FLAGS, and a test that sets XLA_FLAGS for a process it starts adds it there.
STARTED_PROCESS_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false"


@contextlib.contextmanager
def xla_optimizations():
    """XLA's optimisation passes on while inside, whatever JAX_DISABLE_MOST_OPTIMIZATIONS says (the suite turns
    most of them off: tests/conftest.py); JAX reads the option at each compile. Other backends: no change."""
    if keras.backend.backend() != "jax":
        yield
        return
    import jax

    before = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


@contextlib.contextmanager
def full_float32_matmuls():
    """Matrix products and convolutions in full float32 while inside. On an NVIDIA GPU from Ampere on,
    JAX's default precision, TensorFlow's default and PyTorch's cuDNN convolutions run float32 products in
    TF32 (a 10-bit mantissa: relative errors near 1e-3), past the tolerance of a test that checks an
    equation against a float32 reference. A CPU computes in float32 either way."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        with jax.default_matmul_precision("highest"):
            yield
    elif backend == "tensorflow":
        import tensorflow as tf

        was = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        try:
            yield
        finally:
            tf.config.experimental.enable_tensor_float_32_execution(was)
    else:
        import torch

        was = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = was


def randomise_weights(layer, seed=7, scale=0.5, trainable_only=False):
    """Give every weight (every trainable one) a random value, LayerNorm scales and biases included
    (not 1 / 0), so a test comparing outputs sees every weight; a de-escalation `tau` keeps its valid value."""
    rng = np.random.default_rng(seed)
    for w in layer.trainable_weights if trainable_only else layer.weights:
        if w.path.endswith("tau"):
            continue
        offset = 1.0 if w.path.endswith("gamma") else 0.0
        w.assign((scale * rng.standard_normal(tuple(w.shape)) + offset).astype("float32"))
    return layer


def run_block_harness(test_case, cls, extra, num_trainable):
    """Keras's layer harness on a (2, 5, 8) block with dropout (serialisation, masking, training)."""
    test_case.run_layer_test(
        cls,
        init_kwargs={"num_heads": 2, "ffn_dim": 12, "dropout": 0.1, "attention_dropout": 0.1, **extra},
        input_shape=(2, 5, 8),
        expected_output_shape=(2, 5, 8),
        expected_num_trainable_weights=num_trainable,
        expected_num_non_trainable_weights=0,
        expected_num_seed_generators=4,  # attention dropout + three branch dropouts
        supports_masking=True,
    )


# the paper's recipes (recipes/<name>.py) -> the training task each one runs (`keras-tse train TASK`)
RECIPE_TASKS = {"cifar10_vit": "train_vit", "wikitext103_txl": "train_lm"}


def recipe_module(name):
    """The module a recipe of `recipes/` runs, `keras_tse.cli.train_vit` or `train_lm`: its
    `main(argv)` is `keras-tse train vit|lm`."""
    import importlib

    return importlib.import_module(f"keras_tse.cli.{RECIPE_TASKS[name]}")


def planned(name, argv):
    """The plan `keras-tse train` makes of `argv` for recipe `name` (`training.Plan`): every setting checked,
    the data surveyed, nothing read or trained."""
    from keras_tse.cli import flags

    module = recipe_module(name)
    return flags.plan_of(module.TASK, module.parse_args(argv))


def lab_module(name):
    """A module of the lab, `recipes.lab.<name>`."""
    import importlib

    return importlib.import_module(f"recipes.lab.{name}")


def run_lab_module(name, *args, timeout=600):
    """`python -m recipes.lab.<name> args` in a fresh process; what it printed (it must succeed)."""
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", f"recipes.lab.{name}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # the checkout, where `recipes` imports
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


RUN_FILES = ("config.json", "history.csv", "similarity.csv", "summary.json", "checkpoints/best.keras",
             "checkpoints/last.keras", "plots/token_similarity_heatmap.png")  # fmt: skip


def smoke_all_variants(name, out, summary_word, capsys, more_files=()):
    """Run `recipes/<name>.py --smoke --norm all` (one block) into `out`, in this process; check it printed
    one summary line per variant, in the paper's order, and wrote every run file of each and the shared
    loss plot. Returns the variants' folders."""
    code, printed, err = run_recipe_here(name, ["--smoke", "--norm", "all", "--depth", "1", "--out", str(out)], capsys)
    assert code == 0, err[-3000:]
    summary_lines = [line for line in printed.splitlines() if summary_word in line]
    assert [line.split(":")[0].strip() for line in summary_lines] == ["post", "pre", "deescalate"]
    for norm in ("post", "pre", "deescalate"):
        for file in (*RUN_FILES, *more_files):
            assert (out / norm / file).exists(), (norm, file)
    assert (out / "plots" / "loss_curves.png").exists()
    return [out / norm for norm in ("post", "pre", "deescalate")]


def run_recipe_here(name, argv, capsys):
    """`python recipes/<name>.py argv` run in this process, as its `__main__` runs it: the exit code and
    what it printed (no interpreter and backend start-up to pay; the tests that need a fresh process,
    a kill or another backend start one)."""
    recipe = recipe_module(name)
    capsys.readouterr()  # what came before is not the recipe's
    try:
        code = recipe.main(argv, prog=name)  # as `python recipes/<name>.py` runs it
    except SystemExit as exit_info:  # a flag refused by argparse
        code = exit_info.code
    out, err = capsys.readouterr()
    return code, out, err


# The small models many tests build: every part of their family, built and run in a second. A test
# names what it changes.
TINY_VIT = dict(depth=2, image_size=8, patch_size=2, channels=1, hidden_dim=16, ffn_dim=32, num_heads=2)
TINY_TRANSFORMER_XL = dict(
    depth=2, norm="deescalate", vocab_size=40, hidden_dim=16, num_heads=2, head_dim=8, ffn_dim=24,
    segment_len=6, mem_len=6, batch_size=2, cutoffs=(10, 25),
)  # fmt: skip


def tiny_vit(**overrides):
    from keras_tse import zoo

    return zoo.vit(**{**TINY_VIT, **overrides})


def tiny_transformer_xl(**overrides):
    from keras_tse import zoo

    return zoo.transformer_xl(**{**TINY_TRANSFORMER_XL, **overrides})


def only_on(value, *backends):
    """A parameter of an every-backend test that runs under `backends` only: the cases of one test spread
    over the three processes, each backend running some, so CI runs each case once or twice, not thrice."""
    import keras
    import pytest

    here = keras.backend.backend()
    reason = f"this case runs under {', '.join(backends)} (the others run the test's other cases)"
    return pytest.param(value, marks=pytest.mark.skipif(here not in backends, reason=reason))


def text_folder(root, lines=(1500, 200, 200)):
    """A folder of train.txt, valid.txt and test.txt (`--dataset text`), ten words a line, these many lines each."""
    root.mkdir()
    words = "the cat sat on a mat and the dog ran to the park while birds sang".split()
    for split, count in zip(("train", "valid", "test"), lines):
        rows = (" ".join(words[(i * 7 + j) % len(words)] for j in range(10)) for i in range(count))
        (root / f"{split}.txt").write_text("\n".join(rows) + "\n")
    return root


def train_tiny_vit(tmp_path, norm, *flags):
    """`keras-tse train vit --norm NORM` in this process on 48 random 8x8 images of 3 classes (an `.npz`), one epoch
    of two blocks, `flags` added; (its exit code, its variant's folder)."""
    import numpy as np

    from keras_tse.cli import main as cli

    rng = np.random.default_rng(0)
    arrays = {f"x_{s}": rng.integers(0, 255, (n, 8, 8), dtype=np.uint8) for s, n in (("train", 48), ("test", 12))}
    np.savez(tmp_path / "d.npz", **arrays, y_train=np.arange(48) % 3, y_test=np.arange(12) % 3)
    argv = ["train", "vit", "--dataset", "npz", "--data-dir", str(tmp_path / "d.npz"), "--depth", "2", "--epochs", "1"]
    argv += ["--hidden-dim", "16", "--num-heads", "2", "--batch-size", "16", "--norm", norm, "--verbose", "0"]
    return cli.main([*argv, *flags, "--out", str(tmp_path / "run")]), tmp_path / "run" / norm


def pyproject_floors(extras=("tensorflow", "jax", "torch")):
    """{name: the lowest version `pyproject.toml` allows}: Python's, each dependency's and each named extra's."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    requirements = [*project["dependencies"], *(r for e in extras for r in project["optional-dependencies"][e])]
    bounds = {"python": SpecifierSet(project["requires-python"])}
    bounds.update({r.name.lower(): r.specifier for r in map(Requirement, requirements)})
    return {name: min(Version(s.version) for s in bound if s.operator == ">=") for name, bound in bounds.items()}
