"""The Transformer-XL family's presets (`keras_tse.zoo.transformer_xl`), kept beside the family as KerasHub
keeps a model's presets. A preset with a `learning_rate` is one the training command builds for its layout
(`keras-tse train lm --norm NAME`)."""

from keras_tse.zoo.registry import preset

SMALL_TXL = dict(vocab_size=4000, hidden_dim=64, num_heads=4, head_dim=16, ffn_dim=128, cutoffs=(1000, 2000))
SMALL_CORPUS = "word ids of the offline corpus or Penn Treebank (keras_tse.data.load_python_docs / load_ptb)"
_WT103 = "WikiText-103 word ids (vocabulary 267,735 with <eos>, keras_tse.data.load_wikitext103)"


def _txl60(norm, description, **config):
    # Sec. 3.4 trains the three at Transformer-XL's base rate, 2.5e-4 (the training command's default)
    return preset(
        {"depth": 60, "norm": norm, **config}, description, _WT103, "transformer_xl60_wt103", learning_rate=2.5e-4
    )


PRESETS = {
    "transformer_xl60_wt103_post": _txl60(
        "post", "Yu & Zhang Sec. 3.4: 60-block post-norm Transformer-XL on WikiText-103, the one that fails."
    ),
    "transformer_xl60_wt103_pre": _txl60(
        "pre", "Yu & Zhang Sec. 3.4: 60-block pre-norm Transformer-XL (the reference's pre_lnorm)."
    ),
    "transformer_xl60_wt103_deescalate": _txl60(
        "deescalate",
        "Yu & Zhang Sec. 3.4: 60-block post-norm Transformer-XL with causal de-escalation at each FFN input.",
        tau=1.0,
    ),
    "transformer_xl16_wt103_base": preset(
        {"depth": 16, "norm": "post", "ffn_dim": 2100, "batch_size": 60, "dropout": 0.1},
        "Dai et al. 2019: the 16-block base WikiText-103 Transformer-XL.",
        _WT103,
        "transformer_xl60_wt103",
    ),
    "transformer_xl8_small": preset(
        {**SMALL_TXL, "depth": 8, "norm": "deescalate", "segment_len": 32, "mem_len": 32, "batch_size": 8},
        "CPU-sized 8-block de-escalated Transformer-XL (the offline corpus, smoke runs, tests).",
        SMALL_CORPUS,
        "transformer_xl8_small",
    ),
}
