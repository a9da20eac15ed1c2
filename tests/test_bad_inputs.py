"""Every bad input to a command ends as one line, exit status 2, and leaves the user's files as they were.

Each case builds what a user would hold (image folders, `.npz` files, text folders, folders of their
own files) under `tmp_path`, runs a recipe's or `keras-tse`'s `main(argv)` in this process, and checks:
exit status 2; exactly one line on stderr, `<prog>: error: ...`, naming the value it refuses; no
traceback; every file that was there before byte-identical after, and nothing new but the run
folder's manifest. The backend cases start a fresh interpreter (Keras reads its backend at import).
"""

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_tse.cli import main as cli
from keras_tse.run_files import DATA_RECORD, MANIFEST
from tests.helpers import recipe_module, run_recipe_here

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- what a user holds ------------------------------------------------------------------------------


def png(path, seed=0, size=8):
    from PIL import Image

    os.makedirs(os.path.dirname(path), exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype="uint8")
    Image.fromarray(pixels).save(path)


def image_folder(root, classes=("cat", "dog"), per_class=3, splits=("",)):
    for split in splits:
        for c, name in enumerate(classes):
            for i in range(per_class):
                png(os.path.join(root, split, name, f"{i}.png"), seed=10 * c + i)
    return str(root)


def _with_nan():
    images = np.random.default_rng(0).random((20, 8, 8)).astype("float32")
    images[3, 2, 5] = np.nan
    return images


def npz(path, drop=None, **arrays):
    rng = np.random.default_rng(0)
    content = {
        "x_train": rng.integers(0, 256, (20, 8, 8), dtype="uint8"),
        "y_train": np.arange(20) % 2,
        "x_test": rng.integers(0, 256, (4, 8, 8), dtype="uint8"),
        "y_test": np.arange(4) % 2,
        **arrays,
    }
    content.pop(drop, None)
    np.savez(path, **content)
    return str(path)


def text_folder(root, words=(3000, 3000, 3000), encoding="utf-8"):
    os.makedirs(root, exist_ok=True)
    for split, count in zip(("train", "valid", "test"), words):
        text = " ".join(f"w{i % 50}" for i in range(count))
        with open(os.path.join(root, f"{split}.txt"), "wb") as f:
            f.write(text.encode(encoding) if split != "valid" or encoding == "utf-8" else b"caf\xe9 " + text.encode())
    return str(root)


def user_files(root, *names):
    for name in names:
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"the user's own {name}\n")
    return str(root)


def _cut_short(path):
    """The first 2,000 bytes of a real .keras file: a download that stopped."""
    with open(os.path.join(ROOT, "tests", "fixtures", "vit_deescalate.keras"), "rb") as f:
        path.write_bytes(f.read()[:2000])
    return str(path)


def legacy_demo(root, depth):
    """A demo folder as keras-tse wrote it before manifests: demo.json of its settings and a seed's run."""
    user_files(root, "post/seed_0/history.csv")
    with open(os.path.join(root, "demo.json"), "w") as f:
        json.dump({"config": {"depth": depth}, "backend": os.environ.get("KERAS_BACKEND", "jax"), "runs": {}}, f)
    return str(root)


# --- the table: (id, command, argv from tmp, the value the line must name) ---------------------------

VIT, TXL = "cifar10_vit", "wikitext103_txl"


def _vit(t, *argv):
    return ["--out", str(t / "runs"), *argv]


def _folder(t, root, *flags):
    return _vit(t, "--dataset", "folder", "--data-dir", root, *flags)


def _processes(coordinator, count, index):
    return ["--coordinator", coordinator, "--num-processes", str(count), "--process-id", str(index)]


CASES = [
    # the ViT recipe: flags alone and against each other
    ("vit-epochs-0", VIT, lambda t: _vit(t, "--epochs", "0"), "'0'"),
    ("vit-lr-negative", VIT, lambda t: _vit(t, "--learning-rate", "-1"), "'-1'"),
    (
        "vit-lr-negative-exponent",
        VIT,
        lambda t: _vit(t, "--learning-rate", "-1e-3"),
        "--learning-rate: received '-1e-3'",
    ),
    ("vit-lr-zero", VIT, lambda t: _vit(t, "--learning-rate", "0"), "'0'"),  # no step would change a weight
    ("vit-norm-unknown", VIT, lambda t: _vit(t, "--norm", "post,banana"), "'banana'"),
    ("vit-depth-huge", VIT, lambda t: _vit(t, "--depth", "100000"), "'100000'"),
    ("vit-hidden-30", VIT, lambda t: _vit(t, "--hidden-dim", "30"), "--hidden-dim: received 30"),
    ("vit-heads-7", VIT, lambda t: _vit(t, "--num-heads", "7"), "--num-heads: received 7"),
    ("vit-head-dim-mismatch", VIT, lambda t: _vit(t, "--hidden-dim", "64", "--head-dim", "10"), "received 10"),
    ("vit-patch-5", VIT, lambda t: _vit(t, "--patch-size", "5"), "--patch-size: received 5"),
    ("vit-image-size-cifar", VIT, lambda t: _vit(t, "--image-size", "30"), "--image-size: received 30"),
    (
        "vit-train-size-15",
        VIT,
        lambda t: _vit(t, "--dataset", "fashion_mnist", "--train-size", "15"),
        "--train-size: received 15",
    ),
    ("vit-verbose-5", VIT, lambda t: _vit(t, "--verbose", "5"), "received 5"),
    ("vit-out-a-file", VIT, lambda t: ["--out", user_files(t, "notes.txt") + "/notes.txt"], "notes.txt"),
    ("vit-out-user-files", VIT, lambda t: ["--out", user_files(t / "mine", "thesis.tex")], "thesis.tex"),
    (
        "vit-npz-user-plots",
        VIT,
        lambda t: [
            "--dataset",
            "npz",
            "--data-dir",
            npz(t / "d.npz"),
            "--out",
            user_files(t / "o", "plots/loss_curves.png"),
        ],
        "plots",
    ),
    ("vit-compile-cache-file", VIT, lambda t: _vit(t, "--compile-cache", user_files(t, "c") + "/c"), "a file"),
    ("vit-data-parallel-torch", VIT, lambda t: _vit(t, "--data-parallel"), "KERAS_BACKEND=torch"),
    ("vit-coordinator-alone", VIT, lambda t: _vit(t, "--coordinator", "127.0.0.1:29500"), "without --num-processes"),
    ("vit-coordinator-no-port", VIT, lambda t: _vit(t, *_processes("localhost", 2, 0)), "received 'localhost'"),
    ("vit-process-id-2-of-2", VIT, lambda t: _vit(t, *_processes("127.0.0.1:29500", 2, 2)), "--process-id: received 2"),
    ("vit-processes-torch", VIT, lambda t: _vit(t, *_processes("127.0.0.1:29500", 2, 0)), "KERAS_BACKEND=torch"),
    ("vit-model-parallel-torch", VIT, lambda t: _vit(t, "--model-parallel", "2"), "KERAS_BACKEND=torch"),
    ("vit-distributed-and-id", VIT, lambda t: _vit(t, "--distributed", "auto", "--process-id", "0"), "or the other"),
    # the ViT recipe: a user's own images and arrays
    ("folder-no-data-dir", VIT, lambda t: _vit(t, "--dataset", "folder"), "--data-dir: received nothing"),
    (
        "folder-out-inside-the-data",
        VIT,
        lambda t: ["--dataset", "folder", "--data-dir", image_folder(t / "img"), "--out", str(t / "img" / "runs")],
        "expected a folder outside --data-dir",
    ),
    ("folder-missing", VIT, lambda t: _folder(t, str(t / "nope")), "nope"),
    (
        "folder-image-size-30",
        VIT,
        lambda t: _folder(t, image_folder(t / "img"), "--image-size", "30"),
        "--image-size: received 30",
    ),
    ("folder-one-class", VIT, lambda t: _folder(t, image_folder(t / "img", classes=("cat",))), "cat"),
    ("folder-train-without-test", VIT, lambda t: _folder(t, image_folder(t / "img", splits=("train",))), "no test/"),
    ("folder-one-image-a-class", VIT, lambda t: _folder(t, image_folder(t / "img", per_class=1)), "1 image"),
    ("folder-other-test-classes", VIT, lambda t: _folder(t, _mismatched_splits(t / "img")), "bird"),
    (
        "folder-corrupt-png",
        VIT,
        lambda t: _folder(t, _corrupt(t / "img")),
        "expected a BMP, GIF, JPEG, PNG or TIFF image",
    ),
    (
        "folder-tfds-flag",
        VIT,
        lambda t: _folder(t, image_folder(t / "img"), "--data-source", "tfds"),
        "--dataset folder",
    ),
    (
        "npz-missing-key",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz", drop="y_test")),
        "y_test",
    ),
    (
        "npz-length-mismatch",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz", y_train=np.arange(19) % 2)),
        "19",
    ),
    (
        "npz-images-2d",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz", x_train=np.zeros((20, 64), "uint8"))),
        "(20, 64)",
    ),
    (
        "vit-batch-larger-than-the-data",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz"), "--batch-size", "64"),
        "--batch-size: received 64; expected at most the 18 training images",  # 20, 2 held out for validation
    ),
    (
        "npz-a-nan-pixel",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz", x_train=_with_nan())),
        "x_train: received nan at index (3, 2, 5)",
    ),
    (
        "npz-float-labels",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz", y_train=np.arange(20) % 2 + 0.5)),
        "float64",
    ),
    (
        "npz-negative-labels",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz", y_train=np.arange(20) % 2 - 1)),
        "-1",
    ),
    (
        "npz-unseen-test-class",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz", y_test=np.array([0, 1, 2, 1]))),
        "2",
    ),
    (
        "npz-not-an-archive",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", user_files(t, "d.npz") + "/d.npz"),
        "d.npz",
    ),
    (
        "npz-train-size-too-big",
        VIT,
        lambda t: _vit(t, "--dataset", "npz", "--data-dir", npz(t / "d.npz"), "--train-size", "100"),
        "--train-size: received 100",
    ),
    (
        "npz-rerun-other-data",
        VIT,
        lambda t: _npz_rerun_on_other_data(t),
        "--data-dir: received data changed since the run in ",
    ),
    (
        "folder-rerun-file-added",
        VIT,
        lambda t: _folder_rerun_with_a_file_added(t),
        "(1 added: dog/9.png); expected the data that run trained on (restore it, or pass another --out)",
    ),
    (
        "npz-label-gap",
        VIT,
        lambda t: _vit(
            t,
            "--dataset",
            "npz",
            "--data-dir",
            npz(t / "g.npz", y_train=np.arange(20) % 2 * 2, y_test=np.arange(4) % 2 * 2),
        ),
        "class ids 0..2 without 1; expected ids 0..K-1, each with an image",
    ),
    # more batches to accumulate than the run has: the weights would never change
    (
        "vit-grad-accum-no-update",
        VIT,
        lambda t: _vit(t, "--dataset", "digits", "--epochs", "1", "--grad-accum", "100"),
        "--grad-accum: received 100; expected at most the run's 11 batches",
    ),  # 1,438 images, 1,294 of them trained on (10% held out for validation), at batch 128
    (
        "vit-layout-option-foreign",
        VIT,
        lambda t: _vit(t, "--norm", "post", "--layout-option", "gate_init=0.5"),
        "--layout-option: received gate_init=0.5",
    ),
    # the language-model recipe
    (
        "txl-grad-accum-no-update",
        TXL,
        lambda t: _vit(t, "--smoke", "--steps", "5", "--grad-accum", "6"),
        "--grad-accum: received 6; expected at most the run's 5 batches",
    ),
    ("txl-steps-0", TXL, lambda t: _vit(t, "--steps", "0"), "'0'"),
    ("txl-depth-huge", TXL, lambda t: _vit(t, "--depth", "100000"), "'100000'"),
    ("txl-epochs-and-steps", TXL, lambda t: _vit(t, "--epochs", "1", "--steps", "5"), "--epochs: received 1"),
    ("txl-model-parallel", TXL, lambda t: _vit(t, "--model-parallel", "2"), "received --model-parallel 2"),
    ("txl-processes-torch", TXL, lambda t: _vit(t, *_processes("127.0.0.1:29500", 2, 0)), "KERAS_BACKEND=torch"),
    ("txl-tau-on-pre", TXL, lambda t: _vit(t, "--norm", "pre", "--tau", "0.5"), "--norm: received pre"),
    ("txl-size-paper-wt103", TXL, lambda t: _vit(t, "--size", "paper"), "'paper'"),
    ("txl-hidden-130", TXL, lambda t: _vit(t, "--dataset", "ptb", "--hidden-dim", "130"), "--hidden-dim: received 130"),
    ("txl-out-user-files", TXL, lambda t: ["--out", user_files(t / "mine", "a.txt")], "a.txt"),
    ("text-no-data-dir", TXL, lambda t: _vit(t, "--dataset", "text"), "--data-dir: received nothing"),
    (
        "text-missing-file",
        TXL,
        lambda t: _vit(t, "--dataset", "text", "--data-dir", user_files(t / "txt", "train.txt")),
        "valid.txt",
    ),
    (
        "text-empty",
        TXL,
        lambda t: _vit(t, "--dataset", "text", "--data-dir", text_folder(t / "txt", (0, 3000, 3000))),
        "train.txt",
    ),
    (
        "text-too-short",
        TXL,
        lambda t: _vit(t, "--dataset", "text", "--data-dir", text_folder(t / "txt", (3000, 1000, 3000))),
        "valid.txt: received 1,0",
    ),
    (
        "text-not-utf8",
        TXL,
        lambda t: _vit(t, "--dataset", "text", "--data-dir", text_folder(t / "txt", encoding="latin-1")),
        "valid.txt",
    ),
    # keras-tse: every subcommand
    ("cli-unknown-command", "cli", lambda t: ["trian"], "'trian'"),
    # a preset folder that is not one: no config.json, or a run's top folder instead of one of its models
    (
        "export-folder-without-config",
        "cli",
        lambda t: ["export", user_files(t / "P", "notes.txt"), "--out", str(t / "x.keras")],
        "without config.json",
    ),
    (
        "export-missing-parent-folder",
        "cli",
        lambda t: ["export", "vit6_digits", "--out", str(t / "nowhere" / "x.keras")],
        "x.keras; expected a new path in a folder that exists (",
    ),
    (
        "export-run-top-folder",
        "cli",
        lambda t: ["export", user_files(t / "R", "post/checkpoints/last.keras"), "--out", str(t / "x.keras")],
        "received a run's folder; expected one of its models",
    ),
    (
        "vit-clipnorm-and-global",
        VIT,
        lambda t: _vit(t, "--clipnorm", "1", "--global-clipnorm", "1"),
        "`clipnorm` and `global_clipnorm`: one or the other",
    ),
    ("demo-epochs-0", "cli", lambda t: ["demo", "--epochs", "0"], "'0'"),
    ("demo-seeds-twice", "cli", lambda t: ["demo", "--seeds", "0,0"], "'0,0'"),
    ("demo-depth-huge", "cli", lambda t: ["demo", "--depth", "100000"], "'100000'"),
    ("demo-user-file-in-seed", "cli", lambda t: ["demo", "--out", user_files(t / "X", "post/seed_0/notes.txt")], "X"),
    ("demo-other-settings", "cli", lambda t: ["demo", "--depth", "2", "--out", legacy_demo(t / "X", 24)], "depth 24"),
    ("demo-compile-cache-file", "cli", lambda t: ["demo", "--compile-cache", user_files(t, "c") + "/c"], "a file"),
    ("escalation-tau-2", "cli", lambda t: ["escalation", "--tau", "2"], "'2'"),
    # a language model's preset fine-tuned as an image classifier: refused, naming the command that fine-tunes it
    (
        "train-vit-from-a-text-preset",
        "cli",
        lambda t: ["train", "vit", "--from-preset", "gpt4_ptb", "--dataset", "digits", "--out", str(t / "o")],
        "an image classifier of the zoo's blocks (a language model: keras-tse train lm --from-preset)",
    ),
    (
        "export-openvino-to-another-suffix",
        "cli",
        lambda t: ["export", "vit6_digits", "--format", "openvino", "--out", str(t / "model.onnx")],
        "expected a path ending in .xml (what Keras writes as openvino)",
    ),
    (
        "train-lm-lora-without-a-trained-model",
        "cli",
        lambda t: ["train", "lm", "--smoke", "--lora-rank", "2", "--out", str(t / "o")],
        "--lora-rank: received 2; expected --from-preset MODEL too (adapters train on a trained model)",
    ),
    (
        "train-vit-lora-rank-0",
        "cli",
        lambda t: ["train", "vit", "--from-preset", "vit6_digits", "--lora-rank", "0", "--out", str(t / "o")],
        "--lora-rank: received '0'",
    ),
    ("escalation-kinds", "cli", lambda t: ["escalation", "--kinds", "post,banana"], "'banana'"),
    ("escalation-init", "cli", lambda t: ["escalation", "--init", "banana"], "'banana'"),
    ("escalation-csv-user-file", "cli", lambda t: ["escalation", "--csv", user_files(t, "t.csv") + "/t.csv"], "t.csv"),
    (
        "generate-top-p-0",
        "cli",
        lambda t: ["generate", "gpt4_ptb", "--top-p", "0"],
        "--top-p: received '0'; expected a number in (0, 1]",
    ),
    (
        "generate-top-p-1.5",
        "cli",
        lambda t: ["generate", "gpt4_ptb", "--top-p", "1.5"],
        "received '1.5'; expected a number in (0, 1]",
    ),
    ("probe-missing", "cli", lambda t: ["probe", str(t / "missing.keras")], "missing.keras"),
    ("probe-not-a-model", "cli", lambda t: ["probe", user_files(t, "m.keras") + "/m.keras"], "no zip archive"),
    ("probe-cut-short", "cli", lambda t: ["probe", _cut_short(t / "cut.keras")], "cut.keras: received a file of 2,000"),
    (
        "export-cut-short",
        "cli",
        lambda t: ["export", _cut_short(t / "cut.keras"), "--out", str(t / "x.keras")],
        "2,000",
    ),
    ("probe-batch-negative", "cli", lambda t: ["probe", "m.keras", "--batch-size", "-3"], "'-3'"),
    (
        "presets-write-user-file",
        "cli",
        lambda t: ["presets", "--count", "--write", user_files(t, "p.json") + "/p.json"],
        "p.json",
    ),
    ("figures-which", "cli", lambda t: ["figures", "--which", "1,9", "--out", str(t / "f")], "--which: received '9'"),
    (
        "figures-out-user-files",
        "cli",
        lambda t: ["figures", "--which", "8", "--out", user_files(t / "f", "fig.txt")],
        "fig.txt",
    ),
    (
        "bench-out-user-file",
        "cli",
        lambda t: ["bench", "--quick", "--out", user_files(t, "b.json") + "/b.json"],
        "b.json",
    ),
    ("bench-dtype", "cli", lambda t: ["bench", "--quick", "--dtype", "float8"], "--dtype: received 'float8'"),
    ("bench-peer", "cli", lambda t: ["bench", "--quick", "--peer", "banana"], "--peer: received 'banana'"),
    ("bench-cases", "cli", lambda t: ["bench", "--quick", "--cases", "vit_post,banana"], "--cases: received 'banana'"),
    ("sweep-depth-0", "cli", lambda t: ["sweep", "--depths", "12,0"], "'0'"),
    ("sweep-norms", "cli", lambda t: ["sweep", "--norms", "post,banana"], "'banana'"),
    ("sweep-inits", "cli", lambda t: ["sweep", "--inits", "banana"], "'banana'"),
    (
        "sweep-out-user-files",
        "cli",
        lambda t: ["sweep", "--quick", "--out", user_files(t / "s", "notes.md")],
        "notes.md",
    ),
    ("info-extra-flag", "cli", lambda t: ["info", "--gpu"], "--gpu"),
]


def _mismatched_splits(root):
    image_folder(root, classes=("cat", "dog"), per_class=1, splits=("train",))
    return image_folder(root, classes=("cat", "bird"), per_class=1, splits=("test",))


def _corrupt(root):
    image_folder(root)
    with open(os.path.join(root, "dog", "2.png"), "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n not an image")
    return str(root)


def _npz_rerun_on_other_data(t):
    """A finished run on one .npz (one tiny variant, one epoch), then the same command on another .npz:
    refused, naming the data's fingerprint, where it once reported the first data's results."""
    argv = ["--dataset", "npz", "--smoke", "--norm", "post", "--depth", "1", "--epochs", "1", "--out", str(t / "o")]
    assert recipe_module(VIT).main([*argv, "--data-dir", npz(t / "a.npz")]) == 0
    assert (t / "o" / "post" / "summary.json").exists()
    return [*argv, "--data-dir", npz(t / "b.npz", x_train=np.full((20, 8, 8), 7, "uint8"))]


def _folder_rerun_with_a_file_added(t):
    """A finished run on an image folder, then one more image in it: refused, naming the file added."""
    folder = image_folder(t / "imgs")
    argv = ["--dataset", "folder", "--data-dir", folder, "--smoke", "--norm", "post", "--depth", "1", "--epochs", "1"]
    argv += ["--out", str(t / "o")]
    assert recipe_module(VIT).main(argv) == 0
    shutil.copy(os.path.join(folder, "dog", "2.png"), os.path.join(folder, "dog", "9.png"))
    return argv


def snapshot(root):
    """{relative path: sha256} of every file under `root`."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return files


def run_command(command, argv, capsys):
    if command == "cli":
        capsys.readouterr()
        try:
            code = cli.main(argv)
        except SystemExit as stop:
            code = stop.code
        out, err = capsys.readouterr()
        return code, out, err
    return run_recipe_here(command, argv, capsys)


@pytest.mark.parametrize("case, command, make_argv, value", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_is_one_line_exit_2_and_leaves_the_users_files(
    case, command, make_argv, value, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # a default --out (runs/...) would land here, and show in the snapshot
    if case.endswith("-torch"):
        monkeypatch.setenv("KERAS_BACKEND", "torch")  # what the flag is checked against; Keras is already imported
    argv = make_argv(tmp_path)
    before = snapshot(tmp_path)
    code, _, err = run_command(command, argv, capsys)
    lines = err.strip().splitlines()
    prog = "keras-tse" if command == "cli" else command
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith(prog) and ": error: " in lines[0], err
    assert value in lines[0] and "Traceback" not in err, lines[0]
    after = snapshot(tmp_path)
    assert {path: after.get(path) for path in before} == before  # every file of theirs byte-identical
    ours = {os.path.join(folder, name) for folder in ("runs", "o") for name in (MANIFEST, DATA_RECORD)}
    assert set(after) - set(before) <= ours, set(after) - set(before)  # only the manifest and the data's record


def test_the_table_covers_both_recipes_and_every_subcommand():
    commands = {c[1] for c in CASES} | {c[0].split("-")[0] for c in CASES if c[1] == "cli"}
    assert commands >= {VIT, TXL, "cli", "demo", "escalation", "probe", "presets", "figures", "bench", "sweep", "info"}
    assert len(CASES) >= 40


# --- the backend, before Keras is imported: fresh interpreters -----------------------------------------

# Runs a script or `-m module` with TensorFlow hidden from the import system: as on the quick install.
HIDE_TENSORFLOW = r"""
import importlib.abc, runpy, sys

class NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_datasets", "tf_keras"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTensorFlow())
sys.argv = sys.argv[1:]
if sys.argv[0] == "-m":
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    runpy.run_path(sys.argv[0], run_name="__main__")
"""
CLI = ["-m", "keras_tse.cli.main"]


def fresh(argv, tmp_path, backend=None, hide_tensorflow=False):
    """`python argv` in a new process, KERAS_BACKEND as given (unset for None) and no keras.json."""
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    env.update(KERAS_HOME=str(tmp_path / "keras_home"), TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    if backend:
        env["KERAS_BACKEND"] = backend
    prefix = [sys.executable, "-c", HIDE_TENSORFLOW] if hide_tensorflow else [sys.executable]
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)


@pytest.mark.parametrize(
    "argv, backend, expected",
    [
        ([os.path.join(ROOT, "recipes", "cifar10_vit.py"), "--smoke"], "banana", "one of tensorflow, jax, torch"),
        ([*CLI, "demo", "--quick"], "banana", "one of tensorflow, jax, torch"),
        ([*CLI, "info"], "banana", "one of tensorflow, jax, torch, numpy, openvino"),
        ([*CLI, "demo", "--quick"], "numpy", "one of tensorflow, jax, torch"),  # Keras' numpy backend cannot train
        ([os.path.join(ROOT, "recipes", "wikitext103_txl.py"), "--smoke"], "numpy", "one of tensorflow, jax, torch"),
    ],
)
def test_an_unknown_or_untrainable_backend_is_one_line_naming_it(argv, backend, expected, tmp_path):
    result = fresh(argv, tmp_path, backend=backend)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr[-2000:]
    assert f"error: KERAS_BACKEND: received {backend!r}; expected {expected}" in lines[0]
    assert not (tmp_path / "runs").exists()


def test_info_reports_on_an_inference_backend(tmp_path):
    result = fresh([*CLI, "info"], tmp_path, backend="numpy")
    assert result.returncode == 0 and "numpy" in result.stdout, result.stderr[-2000:]


def test_without_tensorflow_or_keras_backend_the_commands_take_jax_and_say_so(tmp_path):
    result = fresh([*CLI, "info"], tmp_path, hide_tensorflow=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "keras-tse info: KERAS_BACKEND is not set and TensorFlow is not installed; using jax" in result.stderr
    assert "jax" in result.stdout
    # keras.json naming TensorFlow (Keras writes it so on its first import) is no obstacle either
    os.makedirs(tmp_path / "keras_home", exist_ok=True)
    (tmp_path / "keras_home" / "keras.json").write_text(json.dumps({"backend": "tensorflow"}))
    result = fresh([*CLI, "info"], tmp_path, hide_tensorflow=True)
    assert result.returncode == 0 and "keras.json's tensorflow is not installed; using jax" in result.stderr


@pytest.mark.large
@pytest.mark.starts_processes  # its command runs under JAX in its own process, whatever backend hosts the test
def test_the_readmes_own_image_command_trains_without_tensorflow(tmp_path):
    with open(os.path.join(ROOT, "README.md")) as f:
        (command,) = [line for line in f if "--dataset folder --data-dir" in line and not line.startswith("#")]
    backend, program, train, task, *argv = command.split()
    assert (backend, program, train, task) == ("KERAS_BACKEND=jax", "keras-tse", "train", "vit")
    argv[argv.index("--data-dir") + 1] = image_folder(tmp_path / "pets", per_class=5)
    quick = ["--smoke", "--depth", "1", "--epochs", "1", "--out", str(tmp_path / "runs")]
    result = fresh([*CLI, train, task, *argv, *quick], tmp_path, backend="jax", hide_tensorflow=True)
    assert result.returncode == 0, result.stderr[-3000:]
    norm = argv[argv.index("--norm") + 1]
    with open(tmp_path / "runs" / norm / "summary.json") as f:
        summary = json.load(f)
    assert summary["epochs"] == 1 and np.isfinite(summary["train_loss"])
    with open(tmp_path / "runs" / norm / "config.json") as f:
        assert json.load(f)["overrides"]["num_classes"] == 2


@pytest.mark.starts_processes
@pytest.mark.parametrize("argv", [["train", "--help"], ["train", "-h"]])
def test_train_help_answers_where_keras_json_names_a_backend_that_is_not_installed(tmp_path, argv):
    """The quick install (no TensorFlow), KERAS_BACKEND unset and keras.json naming TensorFlow, as Keras writes
    it at its first import: `keras-tse train --help` lists the names, on the backend that is installed."""
    (tmp_path / "keras_home").mkdir()
    (tmp_path / "keras_home" / "keras.json").write_text(json.dumps({"backend": "tensorflow"}))
    result = fresh([*CLI, *argv], tmp_path, hide_tensorflow=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "NAME: vit, lm, " in result.stdout and "Traceback" not in result.stderr


# --- the same numbers whatever else is installed -----------------------------------------------------

SAME_RUN = ["train", "vit", "--dataset", "digits", "--norm", "post", "--depth", "1", "--hidden-dim", "8"]
SAME_RUN += ["--num-heads", "2", "--patch-size", "4", "--epochs", "2", "--batch-size", "64", "--seed", "3"]


def _history(folder):
    """history.csv's columns but its clock's: what a run computed, epoch by epoch."""
    with open(folder / "post" / "history.csv") as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in row.items() if "time" not in k and "seconds" not in k} for row in rows]


# the command line's module run as `python -m` runs it, saying at exit whether TensorFlow was imported
TELLS_TENSORFLOW = """
import atexit, runpy, sys
atexit.register(lambda: print("tensorflow imported:", "tensorflow" in sys.modules, file=sys.stderr))
sys.argv = ["keras-tse", *sys.argv[1:]]
runpy.run_module("keras_tse.cli.main", run_name="__main__")
"""


@pytest.mark.starts_processes
def test_a_training_gives_the_same_history_with_tensorflow_installed_or_not(tmp_path):
    """A run that draws nothing but its order trains on the NumPy pipeline, whatever is installed: the same
    command (JAX, shuffled epochs) in a process that can import TensorFlow and one that cannot writes the same
    history digit for digit, and where it can, TensorFlow is not imported (Keras would, to seed it and at each
    save); a run that trained on tf.data (its augmentation drawn there) refuses, in one line, to go on where
    TensorFlow is missing."""
    runs = {}
    for hidden in (False, True):
        out = tmp_path / f"hidden_{hidden}"
        argv = [*SAME_RUN, "--out", str(out)]
        result = fresh(["-c", TELLS_TENSORFLOW, *argv] if not hidden else [*CLI, *argv], tmp_path, "jax", hidden)
        assert result.returncode == 0, result.stderr[-3000:]
        assert hidden or "tensorflow imported: False" in result.stderr
        runs[hidden] = _history(out)
    assert len(runs[True]) == 2 and runs[True] == runs[False]
    with open(tmp_path / "hidden_True" / "post" / "config.json") as f:
        assert json.load(f)["train"]["data_pipeline"] == "numpy"
    # augmented, a run takes tf.data where TensorFlow is installed: its draws are tf.data's, so it says so
    tf_run = [*SAME_RUN[:-6], "--epochs", "1", "--augment", "crop_flip", "--out", str(tmp_path / "tf")]
    done = fresh(["-c", TELLS_TENSORFLOW, *tf_run], tmp_path, backend="jax")
    assert done.returncode == 0 and "tensorflow imported: True" in done.stderr, done.stderr[-3000:]
    tf_run = [*CLI, *tf_run]
    with open(tmp_path / "tf" / "post" / "config.json") as f:
        assert json.load(f)["train"]["data_pipeline"] == "tf"
    refused = fresh(tf_run, tmp_path, backend="jax", hide_tensorflow=True)
    assert refused.returncode == 2 and refused.stderr.count("error:") == 1, refused.stderr[-3000:]
    assert "--data-pipeline: received tf (given, or the pipeline the run in --out trained with)" in refused.stderr


# --- the README's own-data minimums are the code's --------------------------------------------------


def test_the_readmes_own_data_minimums_are_the_checks(tmp_path):
    from keras_tse import data
    from keras_tse._checks import InputError

    with open(os.path.join(ROOT, "README.md")) as f:
        section = f.read().split("<!-- own-data minimums")[1].split("\n\n")[0]
    from keras_tse.training import text_runs as txl

    batch, segment = txl.PTB_MODEL["batch_size"], txl.PTB_MODEL["segment_len"]
    train, held_out = batch * (segment + 1), batch * (2 * segment + 1)
    assert f"(batch {batch}, segment {segment}), {train:,} tokens in `train.txt` and {held_out:,} in each" in section
    assert "2 classes; in one folder, 2 images per class" in section and "1 image per class in each" in section
    ids = {"train": np.zeros(train), "valid": np.zeros(held_out), "test": np.zeros(held_out)}
    txl.check_text_length(ids, batch, segment, str)  # exactly the minimum passes; one token fewer does not
    for split in ids:
        with pytest.raises(InputError, match=f"^{split}: received {len(ids[split]) - 1:,} tokens"):
            txl.check_text_length({**ids, split: ids[split][1:]}, batch, segment, str)
    # "a token is a word or a line's end"
    text_folder(tmp_path / "txt")
    (tmp_path / "txt" / "test.txt").write_text("a b\nc\n")
    assert len(data.load_text_folder(str(tmp_path / "txt"))[0]["test"]) == 5
    # images: two per class in one folder, one per class in each of train/ and test/, two classes
    layout, names = data.image_folder_layout(image_folder(tmp_path / "one", per_class=2))
    assert (len(layout["train"]), len(layout["test"]), names) == (2, 2, ["cat", "dog"])
    layout, _ = data.image_folder_layout(image_folder(tmp_path / "split", per_class=1, splits=("train", "test")))
    assert (len(layout["train"]), len(layout["test"])) == (2, 2)
    for fewer in (image_folder(tmp_path / "few", per_class=1), image_folder(tmp_path / "cls", classes=("cat",))):
        with pytest.raises(InputError):
            data.image_folder_layout(fewer)


def test_claim_folder_new_ours_other_settings_legacy_and_a_killed_manifest_write(tmp_path):
    from keras_tse import run_lock
    from keras_tse.run_files import RunFolderMismatch, claim_folder

    def claim(folder, **settings):
        return claim_folder(str(folder), "cmd", settings, writes=("post", "plots"), marker="*/config.json")

    assert claim(tmp_path / "a", lr=0.1) == "new" and claim(tmp_path / "a", lr=0.1) == "ours"
    with pytest.raises(RunFolderMismatch, match=r"a cmd run with lr 0.1; expected a folder for lr 0.2"):
        claim(tmp_path / "a", lr=0.2)
    user_files(tmp_path / "legacy", "post/config.json")  # a run made before manifests: adopted
    assert claim(tmp_path / "legacy", lr=0.1) == "new" and (tmp_path / "legacy" / MANIFEST).exists()
    user_files(tmp_path / "theirs", "post/config.json", "notes.txt")
    with pytest.raises(RunFolderMismatch, match=r"holds files keras-tse did not write \(notes.txt\)"):
        claim(tmp_path / "theirs", lr=0.1)
    user_files(tmp_path / "killed", MANIFEST + ".partial")  # a kill inside the manifest's write
    assert claim(tmp_path / "killed", lr=0.1) == "new"
    assert sorted(os.listdir(tmp_path / "killed")) == [MANIFEST, run_lock.LOCK]  # held until the command ends
    run_lock.release_all()
    assert os.listdir(tmp_path / "killed") == [MANIFEST]


def test_the_figure_numbers_the_flag_takes_are_the_figures_made():
    from keras_tse.cli.commands import figures as command
    from recipes.lab import figures

    assert command.NUMBERS == tuple(figures.FIGURES)


def test_a_savedmodel_export_without_tensorflow_is_one_line_naming_it(tmp_path):
    """Under JAX a SavedModel is TensorFlow's work: without TensorFlow, one line saying so (was 40 lines of
    ImportError), nothing written."""
    user_files(tmp_path / "run", "post/checkpoints/last.keras")
    source = str(tmp_path / "run" / "post")
    argv = [*CLI, "export", source, "--format", "tf_saved_model", "--out", str(tmp_path / "saved")]
    result = fresh(argv, tmp_path, backend="jax", hide_tensorflow=True)
    (line,) = result.stderr.strip().splitlines()
    assert result.returncode == 2 and "Traceback" not in result.stderr
    expected = "expected tensorflow installed (pip install tensorflow)"
    assert line == f"keras-tse export: error: --format: received tf_saved_model; {expected}"
    assert not (tmp_path / "saved").exists()


@pytest.mark.large
def test_ctrl_c_is_one_line_exit_130_and_the_same_command_resumes(tmp_path):
    import signal
    import subprocess
    import time

    out = tmp_path / "run"
    argv = [*CLI, "train", "vit", "--dataset", "digits", "--norm", "post", "--depth", "1", "--hidden-dim", "8"]
    argv += ["--num-heads", "2", "--epochs", "100000", "--verbose", "2", "--out", str(out)]
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}
    run = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out / "post" / "history.csv").exists() and time.monotonic() < deadline:  # an epoch is saved
        time.sleep(0.5)
    while run.poll() is None and time.monotonic() < deadline:  # as a user does: Ctrl-C again if it goes on
        run.send_signal(signal.SIGINT)  # (one can land in a JAX callback that swallows it)
        try:
            run.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    _, err = run.communicate(timeout=120)
    assert run.returncode == 130 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == (
        "keras-tse train vit: interrupted; every file it had saved is whole, and the same command resumes"
    )
    assert not (out / "keras_tse.lock").exists()  # the folder is free for the rerun


def test_ctrl_c_in_a_command_that_does_not_resume_does_not_say_it_resumes(monkeypatch, capsys):
    import importlib

    from keras_tse.cli import main as cli

    presets = importlib.import_module("keras_tse.zoo.presets")  # the module: the package exports a function so named

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(presets, "from_preset", interrupted)  # Ctrl-C while the model loads
    assert cli.main(["generate", "gpt4_ptb", "--prompt", "the", "--max-new-tokens", "2"]) == 130
    assert (
        capsys.readouterr().err.strip().splitlines()[-1]
        == "keras-tse generate: interrupted; every file it had saved is whole"
    )


def test_own_images_are_read_by_their_real_bit_depth_and_transparency(tmp_path):
    """16-bit grey scaled by its depth (Pillow's own convert clips it white), transparency over white,
    a palette through its colours; a float image refused naming the file."""
    from PIL import Image

    from keras_tse._checks import InputError
    from keras_tse.data import own

    ramp = (np.arange(64).reshape(8, 8) * 1000).astype("uint16")  # 0..63,000 of 65,535
    root = tmp_path / "imgs"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    Image.fromarray(ramp).save(root / "a" / "sixteen.png")  # Pillow writes a 16-bit grey PNG
    rgba = np.zeros((8, 8, 4), "uint8")
    rgba[..., 0] = 200
    rgba[:4, ..., 3] = 255  # top half opaque red-ish, bottom half transparent (black beneath)
    Image.fromarray(rgba, "RGBA").save(root / "b" / "alpha.png")
    palette = Image.fromarray(np.arange(64, dtype="uint8").reshape(8, 8), "L").convert("P")
    palette.save(root / "b" / "palette.png")
    items = [
        (str(root / "a" / "sixteen.png"), 0),
        (str(root / "b" / "alpha.png"), 1),
        (str(root / "b" / "palette.png"), 1),
    ]
    images, _ = own._read_images(items, 8)
    assert Image.open(root / "a" / "sixteen.png").mode.startswith("I")
    np.testing.assert_array_equal(images[0][..., 0], np.round(ramp / 257.0).astype("uint8"))  # not clipped at 255
    assert (images[1][:4] == (200, 0, 0)).all() and (images[1][4:] == 255).all()  # transparent: white
    np.testing.assert_array_equal(images[2][..., 1], np.arange(64).reshape(8, 8))
    Image.fromarray(np.ones((8, 8), "float32"), "F").save(root / "a" / "float.tif")
    with pytest.raises(InputError, match=r"float.tif: received a 32-bit float image"):
        own._read_images([(str(root / "a" / "float.tif"), 0)], 8)


def test_a_change_of_data_is_named_file_by_file_and_array_by_array(tmp_path):
    from keras_tse.data import contents
    from keras_tse.run_files import describe_change

    before = contents(npz(tmp_path / "a.npz"))
    after = contents(npz(tmp_path / "b.npz", x_train=np.zeros((30, 8, 8), "uint8"), drop="y_test"))
    assert (
        describe_change(before, after) == "1 removed: y_test; 1 changed: x_train (uint8[20, 8, 8] -> uint8[30, 8, 8])"
    )
    folder = image_folder(tmp_path / "imgs", per_class=5)
    first = contents(folder)
    os.remove(os.path.join(folder, "cat", "0.png"))
    png(os.path.join(folder, "dog", "1.png"), seed=99)
    for i in range(5, 9):
        png(os.path.join(folder, "dog", f"{i}.png"), seed=i)
    assert describe_change(first, contents(folder)) == (
        "4 added: dog/5.png, dog/6.png, dog/7.png and 1 more; 1 removed: cat/0.png; 1 changed: dog/1.png"
    )
    assert contents(folder) == contents(folder)  # a record of the same data is the same record


def test_a_hidden_folder_is_no_class_and_is_said_to_be_skipped(tmp_path, capsys):
    """A notebook's `.ipynb_checkpoints/` beside the class folders was read as a third class ("received 0
    image(s)"): hidden folders are a tool's, skipped in one line."""
    from keras_tse.data.own import load_image_folder

    root = image_folder(tmp_path / "images", per_class=5)
    os.makedirs(os.path.join(root, ".ipynb_checkpoints"))
    (_, _), (_, _), names = load_image_folder(root, 8)
    assert names == ["cat", "dog"]
    assert f"{root}: skipping hidden folder(s) .ipynb_checkpoints (not classes)" in capsys.readouterr().out


def test_a_sixteen_bit_tiff_is_an_image_and_other_files_are_said_to_be_skipped(tmp_path, capsys):
    """A 16-bit TIFF was left out without a word (12 of 14 images loaded): it is read at its depth, and a
    file that is no image is named as skipped."""
    from PIL import Image

    from keras_tse.data.own import load_image_folder

    root = image_folder(tmp_path / "images", per_class=5)
    ramp = (np.arange(64).reshape(8, 8) * 1000).astype("uint16")
    Image.fromarray(ramp).save(os.path.join(root, "cat", "scan.tif"))
    with open(os.path.join(root, "dog", "notes.txt"), "w") as f:
        f.write("not an image")
    os.makedirs(os.path.join(root, "dog", "extra"))  # a folder inside a class: skipped as a folder, not a file
    (x_train, _), (x_test, _), _ = load_image_folder(root, 8)
    assert len(x_train) + len(x_test) == 11
    tiff = np.round(ramp / 257.0).astype("uint8")
    assert any((image[..., 0] == tiff).all() for image in np.concatenate([x_train, x_test]))
    printed = capsys.readouterr().out
    assert "skipping 1 file(s) that are no image (notes.txt)" in printed and "skipping 1 folder(s) (extra)" in printed
