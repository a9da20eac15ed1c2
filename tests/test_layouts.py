"""The residual layouts' registry: names without Keras, one validation, one error line, configs that
rebuild each layout's block."""

import argparse
import json
import math
import os
import subprocess
import sys
import types

import keras
import numpy as np
import pytest

from keras_tse import layouts
from keras_tse.layers import TransformerBlock, TransformerXLBlock
from keras_tse.layouts.admin import admin_omega
from tests.helpers import train_tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_paper_s_layouts_come_first_and_listing_imports_no_keras():
    code = "import sys, keras_tse.layouts as l\nprint(l.layout_names()[:6], 'keras' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "('post', 'pre', 'deescalate', 'deepnorm', 'rezero', 'layerscale') False"
    assert "deescalate_leaky_global" in layouts.layout_names(measurement=True)
    assert "deescalate_leaky_global" not in layouts.layout_names()


def test_an_unknown_layout_or_another_layout_s_option_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"`norm` must be one of \('post', 'pre'.*Received: norm='rmsnorm'"):
        layouts.get_layout("rmsnorm")
    with pytest.raises(ValueError, match=r"option of norm='deepnorm'.*Received: norm='post', residual_scale=2.0"):
        TransformerBlock(2, 8, norm="post", residual_scale=2.0)
    with pytest.raises(ValueError, match=r"Received: tau=1.5"):
        TransformerBlock(2, 8, norm="deescalate", tau=1.5)
    with pytest.raises(ValueError, match="measures a causal model's leak. Received: causal=False"):
        TransformerBlock(2, 8, norm="deescalate_leaky_global")
    # a config saved before the layouts named their options holds every option at its default: kept loadable
    assert TransformerBlock(2, 8, norm="post", residual_scale=1.0, layer_scale_init=0.1).layout_options == {}


def test_a_layout_is_registered_once_under_its_name():
    class Post(layouts.Layout):
        name = "post"

    with pytest.raises(ValueError, match="A layout named 'post' is registered already"):
        layouts.register_layout(Post)
    with pytest.raises(ValueError, match="named by an identifier"):
        layouts.register_layout(layouts.Layout())

    class Both(layouts.Layout):  # two layers at one place: the block would apply only eq. (21)
        name, deescalates, places = "both", True, True

    with pytest.raises(ValueError, match=r"eq. \(21\) \(`deescalates`\) or a layer of its own \(`places`\), not both"):
        layouts.register_layout(Both)
    assert "both" not in layouts.layout_names(measurement=True)


@pytest.mark.parametrize("norm", layouts.layout_names(measurement=True))
def test_every_layout_s_block_rebuilds_from_its_config_with_its_depth_constants(norm):
    layout = layouts.get_layout(norm)
    options = layout.for_depth(24)
    tokens = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    kinds = ((TransformerBlock, dict(causal=True)), (TransformerXLBlock, dict(mem_len=3)))
    for cls, extra in kinds if layout.causal else ((TransformerBlock, {}),):  # a layout reading every position
        block = cls(2, 16, norm=norm, **options, **extra)
        outputs = keras.ops.convert_to_numpy(block(tokens))
        twin = cls.from_config(block.get_config())
        twin(tokens[:, :1]) if cls is TransformerBlock else twin.build(tokens.shape)
        twin.set_weights(block.get_weights())
        if cls is TransformerXLBlock:
            twin.reset_memory()
            block.reset_memory()
            outputs = keras.ops.convert_to_numpy(block(tokens))
        assert twin.get_config() == block.get_config()
        assert all(twin.layout_options[key] == value for key, value in options.items())  # the depth's constants
        np.testing.assert_allclose(keras.ops.convert_to_numpy(twin(tokens)), outputs, atol=1e-5)


def test_a_builder_resolves_its_layout_once_and_hands_the_blocks_the_layout_itself(monkeypatch):
    """`zoo.vit(depth=80, norm="deescalate")` looks the name up once, not once a block; each block holds
    the builder's `Layout` object (`get_layout` returns a `Layout` as it is)."""
    from keras_tse import zoo
    from keras_tse.layouts import layout as layout_module

    looked_up = []
    lookup = layout_module.LAYOUTS.get
    monkeypatch.setattr(layout_module.LAYOUTS, "get", lambda name: looked_up.append(name) or lookup(name))
    model = zoo.vit(depth=80, norm="deescalate")
    assert looked_up == ["deescalate"]
    blocks = [layer for layer in model.layers if isinstance(layer, TransformerBlock)]
    assert len(blocks) == 80 and all(block.layout is lookup("deescalate") for block in blocks)
    assert {block.get_config()["norm"] for block in blocks} == {"deescalate"}  # saved by name, as before
    looked_up.clear()
    zoo.vit(depth=4, norm="deescalate", pool="mean", hidden_dim=16, ffn_dim=32, num_heads=2)
    assert looked_up == ["deescalate", "post"]  # the last block's twin without eq. (21): the second look-up


def test_tau_s_range_is_checked_in_one_place(monkeypatch):
    """Every way tau enters (the layer, the blocks, a builder, a layout's options, the command line) is
    checked by `layouts.eq21_options`: widen its one range and every path takes tau = 1.5."""
    from keras_tse import zoo
    from keras_tse.cli import flags
    from keras_tse.layers import DeEscalation, PostNormBlock

    paths = {
        "layer": lambda: DeEscalation(tau=1.5).tau,
        "block": lambda: TransformerBlock(2, 8, norm="deescalate", tau=1.5).tau,
        "post-norm block": lambda: PostNormBlock(2, 8, tau=1.5).tau,
        "builder": lambda: zoo.vit(depth=1, hidden_dim=8, ffn_dim=8, num_heads=2, tau=1.5).get_layer("block_00").tau,
        "layout options": lambda: layouts.check_layout_options("deescalate_layerscale", {"tau": 1.5})["tau"],
        "command line": lambda: flags.tau("1.5"),
    }
    for path in paths.values():
        with pytest.raises((ValueError, argparse.ArgumentTypeError), match=r"\[0, 1\]"):
            path()
    # the range as the layouts' module alone sees it: a second check anywhere else still refuses 1.5
    monkeypatch.setattr(layouts.layout, "_checks", types.SimpleNamespace(unit_interval=lambda name, value: value))
    assert {name: path() for name, path in paths.items()} == dict.fromkeys(paths, 1.5)


def test_eq21_s_options_enter_once_a_keyword_or_the_layout_s_options_not_both():
    from keras_tse import zoo

    small = dict(depth=1, hidden_dim=8, ffn_dim=8, num_heads=2)
    assert zoo.vit(**small, layout_options={"tau": 0.25}).get_layer("block_00").tau == 0.25
    assert zoo.vit(**small, tau=0.25).get_layer("block_00").tau == 0.25
    with pytest.raises(ValueError, match=r"tau given twice.*Received: tau=0.5 and layout_options\['tau'\]=0.25"):
        zoo.vit(**small, tau=0.5, layout_options={"tau": 0.25})


class _Sandwich(layouts.Layout):
    """Sandwich norm (Ding et al. 2021, CogView, Sec. 4.1): pre-norm with a LayerNorm on each branch's
    output too, `x + LN(f(LN x))`: the one file a new layout of this kind takes."""

    name = "sandwich_test"
    body = "pre"
    branch_norm = True


def test_a_layout_may_normalise_each_branch_s_output_sandwich_norm():
    """A layout with `branch_norm` (defined above, nothing else changed) computes `Y = X + LN_a(SA(LN X))`,
    `Z = Y + LN_f(FFN(LN Y))`, checked against the sublayers called by hand; its block saves and rebuilds."""
    layouts.register_layout(_Sandwich)
    try:
        tokens = np.random.default_rng(1).normal(size=(2, 5, 8)).astype("float32")
        block = TransformerBlock(2, 16, norm="sandwich_test")
        block(tokens)  # builds it
        attention_norm, ffn_norm = block.attention_branch_norm, block.ffn_branch_norm
        for norm in (attention_norm, ffn_norm, block.attention_norm, block.ffn_norm):  # away from LN's init
            norm.gamma.assign(np.random.default_rng(2).uniform(0.5, 2.0, 8).astype("float32"))
        outputs = keras.ops.convert_to_numpy(block(tokens))
        x = keras.ops.convert_to_tensor(tokens)  # the backend's tensors: PyTorch does not add NumPy to its own
        y = x + attention_norm(block.self_attention(block.attention_norm(x)))
        z = y + ffn_norm(block._feed_forward(block.ffn_norm(y), False))
        np.testing.assert_allclose(outputs, keras.ops.convert_to_numpy(z), rtol=1e-5, atol=1e-5)
        plain = TransformerBlock(2, 16, norm="pre")
        plain(tokens)
        assert len(block.weights) == len(plain.weights) + 4  # two LayerNorms more: gamma and beta each
        twin = TransformerBlock.from_config(block.get_config())
        twin(tokens)
        twin.set_weights(block.get_weights())
        np.testing.assert_allclose(keras.ops.convert_to_numpy(twin(tokens)), outputs, rtol=1e-6, atol=1e-6)
    finally:
        layouts.layout.LAYOUTS.unregister("sandwich_test")


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "norm, flags, kept",
    [("contranorm", ("--layout-option", "contranorm_scale=0.2"), lambda block: block.placed.scale == 0.2),
     ("centred_attention", (), lambda block: block.self_attention.centred),
     ("subln", (), lambda block: block.layout_options["subln_gain"] == pytest.approx(math.sqrt(math.log(4)))),
     ("sigma_reparam", (), lambda block: type(block.ffn_outer).__name__ == "SigmaReparamDense"),
     ("admin", (), lambda block: block.layout_options["residual_scale"] == pytest.approx(admin_omega(2)))],
)  # fmt: skip
def test_the_literatures_depth_fixes_train_from_the_command_line(norm, flags, kept, tmp_path, capsys):
    """`keras-tse train vit --norm NAME` for the layouts of the depth-fix comparison: the run ends, its loss finite,
    and its checkpoint's blocks hold the layout's own part (the option given, the depth's constant)."""
    code, run = train_tiny_vit(tmp_path, norm, *flags)
    assert code == 0, capsys.readouterr().err[-2000:]
    with open(run / "summary.json") as f:
        assert np.isfinite(json.load(f)["train_loss"])
    model = keras.saving.load_model(run / "checkpoints" / "last.keras")
    assert all(kept(model.get_layer(f"block_{i:02d}")) for i in range(2))
