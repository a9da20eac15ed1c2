"""The GPT family's presets (`keras_tse.zoo.gpt`), kept beside the family as KerasHub keeps a model's presets."""

from keras_tse.zoo.families.transformer_xl_presets import SMALL_CORPUS, SMALL_TXL
from keras_tse.zoo.registry import preset

# The language-model task's Penn Treebank widths (keras_tse/cli/train_lm.py), 4 blocks: 2.09M parameters,
# 8 MiB of float32 weights, under the 10 MiB a package's preset may take.
_SHIPPED_GPT = dict(depth=4, vocab_size=10_000, hidden_dim=128, num_heads=4, head_dim=32, ffn_dim=512, segment_len=64,
                    cutoffs=(), norm="deescalate")  # fmt: skip

PRESETS = {
    "gpt4_ptb": preset(
        _SHIPPED_GPT,
        "A 4-block GPT with causal de-escalation trained on Penn Treebank (CPU, minutes): weights and vocabulary.",
        "Penn Treebank word ids: the preset's assets/tokenizer/vocabulary.txt (10,000 words with <eos>)",
        "gpt4_ptb",
        weights="weights/gpt4_ptb",
        dataset="ptb",
    ),
    "gpt8_small": preset(
        {**SMALL_TXL, "depth": 8, "norm": "deescalate", "segment_len": 32},
        "CPU-sized 8-block GPT-style decoder with causal de-escalation at each FFN input (smoke runs, tests).",
        SMALL_CORPUS,
        "gpt8_small",
    ),
}
