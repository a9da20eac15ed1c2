"""The residual layouts' registry: names without Keras, one validation, one error line, configs that
rebuild each layout's block."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_tse import layouts
from keras_tse.layers import TransformerBlock, TransformerXLBlock

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


@pytest.mark.parametrize("norm", layouts.layout_names(measurement=True))
def test_every_layout_s_block_rebuilds_from_its_config_with_its_depth_constants(norm):
    options = layouts.get_layout(norm).for_depth(24)
    tokens = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    for cls, extra in ((TransformerBlock, dict(causal=True)), (TransformerXLBlock, dict(mem_len=3))):
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
