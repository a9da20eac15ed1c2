"""`keras-tse export`: the artefact gives the `.keras` model's logits (1e-4) where this backend exports
the format, and one line naming the way where it does not."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_tse.cli import main as cli
from tests.helpers import only_on

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

BACKEND = keras.backend.backend()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "vit_deescalate.keras")  # a trained ViT and its logits


@pytest.fixture
def run_folder(tmp_path):
    """A run's variant folder as the recipes leave it: the model in checkpoints/last.keras."""
    os.makedirs(tmp_path / "run" / "checkpoints")
    shutil.copy(FIXTURE, tmp_path / "run" / "checkpoints" / "last.keras")
    saved = np.load(FIXTURE.replace(".keras", ".npz"))
    return str(tmp_path / "run"), saved["inputs"], saved["expected"]


def test_a_keras_artefact_predicts_as_the_run_did(run_folder, tmp_path, capsys):
    run, x, expected = run_folder
    out = str(tmp_path / "model.keras")
    assert cli.main(["export", run, "--out", out]) == 0
    assert "as keras" in capsys.readouterr().out
    model = keras.saving.load_model(out)
    assert getattr(model, "optimizer", None) is None  # an inference artefact: the forward pass, no training state
    np.testing.assert_allclose(np.asarray(model.predict(x, verbose=0)), expected, atol=1e-4)
    assert cli.main(["export", run, "--out", out]) == 2  # never over an existing path
    assert "--out: received" in capsys.readouterr().err


def test_a_tf_saved_model_gives_the_same_logits_or_one_line_saying_where_it_does(run_folder, tmp_path, capsys):
    tf = pytest.importorskip("tensorflow")
    run, x, expected = run_folder
    out = str(tmp_path / "saved_model")
    code = cli.main(["export", run, "--format", "tf_saved_model", "--out", out])
    if BACKEND == "torch":  # exported from TensorFlow and JAX (the command's EXPORTED_FROM)
        assert code == 2 and not os.path.exists(out)
        err = capsys.readouterr().err.strip()
        assert err.endswith("expected a backend it is exported from (tensorflow or jax); run it with KERAS_BACKEND=jax")
        return
    assert code == 0
    artefact = tf.saved_model.load(out)  # held: its variables live as long as it does
    served = artefact.serve(x).numpy()
    np.testing.assert_allclose(served, expected, atol=1e-4)


def test_onnx_gives_the_same_logits_on_tensorflow_and_one_line_elsewhere(run_folder, tmp_path, capsys):
    run, x, expected = run_folder
    out = str(tmp_path / "model.onnx")
    code = cli.main(["export", run, "--format", "onnx", "--out", out])
    if BACKEND != "tensorflow":
        assert code == 2 and not os.path.exists(out)
        assert capsys.readouterr().err.strip().endswith("(tensorflow); run it with KERAS_BACKEND=tensorflow")
        return
    assert code == 0
    onnxruntime = pytest.importorskip("onnxruntime")
    session = onnxruntime.InferenceSession(out)
    served = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(served, expected, atol=1e-4)


@pytest.mark.one_backend  # the packages are looked for before Keras is asked anything
def test_onnx_without_its_packages_is_one_line_naming_them(run_folder, tmp_path, capsys, monkeypatch):
    from keras_tse.cli.commands import export

    run, _, _ = run_folder
    monkeypatch.setattr(export, "EXPORTED_FROM", {**export.EXPORTED_FROM, "onnx": (BACKEND,)})
    from keras_tse.cli import flags

    monkeypatch.setattr(flags, "installed", lambda name: name not in ("onnx", "tf2onnx"))  # a machine without them
    assert cli.main(["export", run, "--format", "onnx", "--out", str(tmp_path / "m.onnx")]) == 2
    expected = "expected onnx and tf2onnx installed (pip install onnx tf2onnx)"
    assert capsys.readouterr().err.strip().endswith(expected)


@pytest.mark.parametrize("mode", ["int8", only_on("int4", "torch")])  # int4's save and load: tests/test_saving.py
def test_a_quantized_export_of_a_shipped_preset_scores_as_the_float_model(mode, tmp_path, capsys):
    """`--quantize int8|int4`: every Dense kernel in 8 or 4 bits (int4's two output columns to a byte); on the digits
    test split's raw images the float preset and the quantized file score what the card's table says
    (zoo/figures/quantized_presets.json, measured on JAX: 344 float32 and int8, 345 int4, of 359, the same on each
    backend)."""
    from keras_tse import data, zoo

    out = str(tmp_path / f"{mode}.keras")
    assert cli.main(["export", "vit6_digits", "--quantize", mode, "--out", out]) == 0
    assert f"as keras, {mode} weights" in capsys.readouterr().out
    quantized, model = keras.saving.load_model(out), zoo.from_preset("vit6_digits")
    dense = [w for w in quantized.weights if w.name == "kernel" and len(w.shape) == 2]
    assert len(dense) >= 36 and {w.dtype for w in dense} == {"int8"}  # 6 blocks x 6 projections, and the head
    floats = {w.path: w.shape for w in model.weights if w.name == "kernel" and len(w.shape) == 2}
    packed = 2 if mode == "int4" else 1  # two output columns a byte (every width here is even)
    assert {w.path: (w.shape[0], w.shape[1] * packed) for w in dense} == floats
    _, (x, y) = data.get_dataset("digits").load_data(None, download=False)  # raw pixels, as the preset takes them
    right = [int(np.sum(np.argmax(m.predict(x, verbose=0), -1) == np.ravel(y))) for m in (model, quantized)]
    with open(os.path.join(ROOT, "zoo", "figures", "quantized_presets.json")) as f:
        card = {row["mode"]: row["right"] for row in json.load(f)["rows"] if row["preset"] == "vit6_digits"}
    assert right == [card["float32"], card[mode]], (right, card)


@pytest.mark.one_backend  # which file is taken: the folder's record, read before Keras loads anything
@pytest.mark.parametrize("chosen_on", ["validation", "test", None])
def test_a_run_is_exported_from_the_checkpoint_its_validation_split_chose_and_says_which(
    run_folder, tmp_path, capsys, chosen_on
):
    """best.keras where the finished run chose it on a validation split, else last.keras (a best checkpoint
    chosen on the test split is not shipped); the line says which."""

    run, _, _ = run_folder
    shutil.copy(FIXTURE.replace("vit_deescalate", "vit_post"), os.path.join(run, "checkpoints", "best.keras"))
    if chosen_on is not None:
        with open(os.path.join(run, "summary.json"), "w") as f:
            json.dump({"epochs": 2, "best_chosen_on": chosen_on}, f)
    out = str(tmp_path / "model.keras")
    assert cli.main(["export", run, "--out", out]) == 0
    said = capsys.readouterr().out
    best = chosen_on == "validation"
    saved = np.load(FIXTURE.replace("vit_deescalate.keras", "vit_post.npz" if best else "vit_deescalate.npz"))
    exported = keras.saving.load_model(out).predict(saved["inputs"], verbose=0)
    np.testing.assert_allclose(exported, saved["expected"], atol=1e-4)  # the two fixtures' logits differ
    assert ("(best.keras, the epoch of lowest validation loss)" in said) == best
    assert ("chosen on the test split" in said) == (chosen_on == "test")


RUNTIMES = {  # a fresh process: the artefact, its runtime and NumPy, no Keras; the logits it gives, to a .npy file
    "openvino": (
        "model.xml",
        "import openvino\n"
        # float32 asked for: on a CPU with AVX512-BF16 (this 2-core AMD EPYC's) OpenVINO infers in bfloat16 unless
        # told, 0.01-0.04 off Keras's logits
        "core = openvino.Core()\n"
        "compiled = core.compile_model(core.read_model(ARTEFACT), 'CPU', {'INFERENCE_PRECISION_HINT': 'f32'})\n"
        "logits = compiled(images.astype(compiled.inputs[0].get_element_type().to_dtype()))[0]\n",
    ),
    "litert": (
        "model.tflite",
        "from ai_edge_litert.interpreter import Interpreter\n"
        "interpreter = Interpreter(ARTEFACT)\n"
        "(given,) = interpreter.get_input_details()\n"
        "interpreter.resize_tensor_input(given['index'], images.shape)\n"
        "interpreter.allocate_tensors()\n"
        "interpreter.set_tensor(given['index'], images.astype(given['dtype']))\n"
        "interpreter.invoke()\n"
        "logits = interpreter.get_tensor(interpreter.get_output_details()[0]['index'])\n",
    ),
}


@pytest.mark.parametrize("format", sorted(RUNTIMES))
def test_openvino_and_litert_give_the_keras_logits_on_raw_images_in_their_own_runtime(format, tmp_path, capsys):
    """The shipped Fashion-MNIST preset (its preprocessor inside) exported where this backend exports the format,
    run on raw uint8 pixels by OpenVINO or the LiteRT interpreter in a fresh process: Keras's logits to 1e-4; one
    line naming the backend elsewhere."""
    import subprocess
    import sys

    from keras_tse import zoo
    from keras_tse.cli.commands import export

    name, runner = RUNTIMES[format]
    out = str(tmp_path / name)
    code = cli.main(["export", "vit6_fashion_mnist", "--format", format, "--out", out])
    if BACKEND not in export.EXPORTED_FROM[format]:
        assert code == 2 and not os.path.exists(out)
        assert capsys.readouterr().err.strip().endswith(f"run it with KERAS_BACKEND={export.EXPORTED_FROM[format][-1]}")
        return
    assert code == 0
    pytest.importorskip({"openvino": "openvino", "litert": "ai_edge_litert"}[format])
    images = np.random.default_rng(0).integers(0, 256, (5, 28, 28, 1)).astype("uint8")
    np.save(tmp_path / "images.npy", images)
    script = (
        f"import numpy as np\nARTEFACT = {out!r}\nimages = np.load({str(tmp_path / 'images.npy')!r})\n{runner}"
        f"np.save({str(tmp_path / 'served.npy')!r}, np.asarray(logits))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    expected = zoo.from_preset("vit6_fashion_mnist").predict(images.astype("float32"), verbose=0)
    np.testing.assert_allclose(np.load(tmp_path / "served.npy"), expected, atol=1e-4)
