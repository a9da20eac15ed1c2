"""Language-model runs (`keras-tse train lm`, Yu & Zhang Sec. 3.4, Fig. 7): how a plan is made from the
settings, and how the text is read once and each variant fitted (`plans.RunKind`, `KIND`).

The paper's settings: Transformer-XL's WikiText-103 base configuration (Dai et al. 2019) with depth 16 -> 60,
FFN 2100 -> 820, batch 60 -> 40, no dropout, no gradient clipping; so 10 heads of 41, width 410, segment and
memory 150, adaptive input and softmax with cutoffs 20000/40000/200000 (tied), Adam at 2.5e-4 with cosine
decay, no warm-up. The paper-size set of its task (`DatasetSpec.paper_size`, WikiText-103) trains that model;
every other text set a word-level model sized for a CPU (`PTB_MODEL`), or Fig. 7's widths with `size="paper"`.
"""

import dataclasses
import functools
import math
import os
import shutil
import time

import numpy as np

import keras_tse
from keras_tse import data
from keras_tse._checks import InputError
from keras_tse.layouts import get_layout, layout_names
from keras_tse.norms import PAPER_NORMS
from keras_tse.training import configs, plans
from keras_tse.training.configs import LMTrainConfig, options_of
from keras_tse.training.run_settings import check_lora, check_updates, kit_settings, model_keywords, taken_by

# The name a run folder's manifest records: the name of the recipe that first wrote such folders, kept so
# that they resume under `keras-tse train lm` too.
NAME = "wikitext103_txl"
LEAKY = "deescalate_leaky_global"  # measurement only: the global segment mean reads later tokens
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
# Fig. 7's model on PTB (`size="paper"`): the depth-60 preset's widths and Sec. 3.4's training. A plain
# softmax, as the reference's train.py allows the adaptive one only for WikiText-103 and One Billion Words;
# 4,000 steps of 40 x 150 tokens are 26 passes over PTB's 929k training words.
PAPER_PTB_MODEL = dict(cutoffs=())
PAPER_PTB_TRAIN = dataclasses.replace(LMTrainConfig(), steps=4000, eval_interval=500, log_interval=50)

# === Optimisation: Transformer-XL base settings as Sec. 3.4 keeps them ===
TRAIN = LMTrainConfig()

# === Smoke: a CPU-sized model (the family's `smoke_preset`), end to end in about a minute per variant ===
SMOKE_MODEL = dict(depth=4)
SMOKE_TRAIN = dataclasses.replace(TRAIN, steps=60, eval_interval=20, batch_size=8, learning_rate=1e-3, log_interval=10)

# Every setting of a language-model run, by its flag's name, at its default (`keras-tse train lm`'s flags).
DEFAULTS = {
    "norm": PAPER_NORMS, "model": "transformer_xl", "dataset": "wikitext103", "epochs": None, "size": "cpu",
    "steps": None, "tau": None, "learn_tau": False, "deescalate_at": None, "segment_mean": False,
    "eval_interval": None, "data_dir": None, "no_download": False, "out": None, "depth": None, "hidden_dim": None,
    "learning_rate": None, "batch_size": None, "similarity_every": None, "seed": 0, "init": None,
    "layout_option": None, "mixed_precision": None, "jit_compile": False, "data_parallel": False,
    "compile_cache": None, "smoke": False, "verbose": None, "drop_path_rate": None, "remat": False,
    **{field.name: None for field in options_of(TRAIN)}, "coordinator": None, "num_processes": None,
    "process_id": None, "join_timeout": 180, "distributed": None, "from_preset": None, "lora_rank": None,
    "tokenizer": "word", "vocab_size": None,
}  # fmt: skip
TOKENS = "tokens"  # the run folder's token files of a text folder (`token_folder`)
TOKENIZERS = ("word", "bpe")  # word: the set's own words (the paper's); bpe: byte-level BPE learned from train.txt
# The flags that shape the model: a trained model's weights fix every one of them (`from_preset`).
MODEL_SETTINGS = ("depth", "hidden_dim", "init", "tau", "learn_tau", "deescalate_at", "segment_mean",
                  "drop_path_rate", "layout_option")  # fmt: skip
DEESCALATION = ("tau", "learn_tau", "deescalate_at", "segment_mean")  # eq. (21)'s settings
PLACEMENT = ("deescalate_at", "segment_mean")  # where it applies: measured at Sec. 3.4's place only


# === The plan ===


def resolve(settings):
    spec = data.get_dataset(settings.dataset)
    if spec.own and settings.data_dir is None:
        raise InputError(
            "--data-dir", "nothing", f"the folder of train.txt, valid.txt and test.txt (--dataset {spec.name})"
        )
    _check_tokenizer(settings, spec)
    if settings.size == "paper" and spec.paper_size:
        raise InputError(
            "--size",
            "'paper' with --dataset " + spec.name,
            f"a text set other than {spec.name} ({spec.title} trains the paper's size already)",
        )
    if settings.from_preset is not None:
        found = source(settings)
        if tuple(settings.norm) not in (tuple(DEFAULTS["norm"]), (found.layout,)):
            given = ",".join(settings.norm)
            raise InputError(
                "--norm", given, f"{found.layout} or no --norm (--from-preset {settings.from_preset}'s layout)"
            )
        if settings.model not in (DEFAULTS["model"], found.family):
            raise InputError(
                "--model", settings.model, f"{found.family} or no --model (--from-preset {settings.from_preset}'s)"
            )
        return settings.replace(norm=(found.layout,), model=found.family)
    return settings.replace(norm=tuple(settings.norm))


def _check_tokenizer(settings, spec):
    """A byte-pair vocabulary is learned from a text folder's train.txt; the named sets keep their words."""
    if settings.tokenizer not in TOKENIZERS:
        raise InputError("--tokenizer", settings.tokenizer, f"one of {', '.join(TOKENIZERS)}")
    if settings.tokenizer == "bpe" and not spec.own:
        raise InputError(
            "--tokenizer", f"bpe with --dataset {spec.name}",
            f"--dataset text for bpe (a folder of your text; {spec.name} keeps its word-level vocabulary, the "
            "paper's setting)",
        )  # fmt: skip
    if settings.vocab_size is not None and settings.tokenizer != "bpe":
        raise InputError("--vocab-size", settings.vocab_size, "--tokenizer bpe beside it (word: the text's words)")
    if settings.vocab_size is not None and settings.vocab_size < 258:
        raise InputError("--vocab-size", settings.vocab_size, "at least 258 (<eos>, the 256 bytes and one merge)")
    if settings.tokenizer == "bpe" and settings.from_preset is not None:
        raise InputError("--tokenizer", "bpe with --from-preset", "no --tokenizer (the trained model's reads the text)")


@dataclasses.dataclass(frozen=True)
class Source:
    """A trained language model a run starts from: `trained` (`zoo.trained.Trained`), its blocks' `layout`, its
    `family`, the `stream` it reads (`(batch or None, segment length)`) and its `tokenizer`."""

    trained: object
    layout: str
    family: str
    stream: tuple
    tokenizer: object


def source(settings):
    """The trained language model --from-preset names, with what its files record; one line for anything else.
    Its family is its preset's (a shipped preset, or the preset a run started from), else --model's."""
    from keras_tse.zoo.trained import input_shape, layout_of, trained

    found = trained(settings.from_preset)
    config = found.model_config()
    layout, shape, tokenizer = layout_of(config), input_shape(config), found.tokenizer()
    if layout is None or tokenizer is None or not shape or len(shape) != 2:
        text = " (an image classifier: keras-tse train vit --from-preset)" if shape and len(shape) == 4 else ""
        raise InputError(
            "--from-preset", settings.from_preset, f"a language model of the zoo's blocks with its words{text}"
        )
    preset = found.path if found.kind == "preset" else found.record.get("preset")
    presets = keras_tse.zoo.presets()
    family = presets[preset]["builder"] if preset in presets else settings.model
    return Source(found, layout, family, tuple(shape), tokenizer)


def own_preset(settings, norm):
    """The preset of `settings.model` the run builds for layout `norm` (its own, or its default layout's with
    `norm` over it: the overrides always set `norm`)."""
    return keras_tse.zoo.registry.preset_for_layout(settings.model, norm)[0]


def base_model(settings, norm):
    """(preset, its builder overrides, training settings) of one variant before the run's own changes. A
    family with presets of its own for each layout (Transformer-XL) starts from its layout's preset on the
    paper-size set, from its smoke preset with --smoke; any other family from its declared presets."""
    family = keras_tse.zoo.get_family(settings.model)
    spec = data.get_dataset(settings.dataset)
    layouts = keras_tse.zoo.registry.has_training_presets(settings.model)
    if settings.smoke:
        return family.smoke_preset, dict(SMOKE_MODEL), SMOKE_TRAIN
    if not spec.paper_size:  # a word-level model sized for a CPU (a user's text: its own vocabulary)
        sizes = (PAPER_PTB_MODEL, PAPER_PTB_TRAIN) if settings.size == "paper" else (PTB_MODEL, PTB_TRAIN)
        return (own_preset(settings, "post") if layouts else family.base_preset), dict(sizes[0]), sizes[1]
    return (own_preset(settings, norm) if layouts else family.base_preset), {}, TRAIN


def base_config(settings, jit_compile):
    """The settings every variant starts from: the size's (or the smoke run's), with the given ones."""
    _, _, base_train = base_model(settings, settings.norm[0])
    config = dataclasses.replace(base_train, jit_compile=jit_compile)
    if settings.steps is not None:
        config = dataclasses.replace(
            config, steps=settings.steps, eval_interval=min(config.eval_interval, settings.steps)
        )
    if settings.batch_size is not None:
        config = dataclasses.replace(config, batch_size=settings.batch_size)
    if settings.eval_interval is not None:
        config = dataclasses.replace(config, eval_interval=settings.eval_interval)
    config = dataclasses.replace(config, **kit_settings(settings, TRAIN))
    lr = settings.learning_rate if settings.learning_rate is not None else config.learning_rate
    return _logged(dataclasses.replace(config, learning_rate=lr, similarity_every_n_batches=settings.similarity_every))


def _logged(config):
    """`config` with a steps.csv row at least every validation: a run shorter than the log interval
    would otherwise have no training curve."""
    return dataclasses.replace(config, log_interval=min(config.log_interval, config.eval_interval))


def _accepts(settings, keyword):
    return keras_tse.zoo.registry.accepts(settings.model, keyword)


def _own_family(settings):
    return settings.model == DEFAULTS["model"]  # the task's own family: its run folders' names as they were


def model_overrides(plan, norm):
    settings, spec = plan.settings, plan.spec
    if settings.from_preset is not None:  # its weights fix the model
        found = source(settings).trained
        return (found.path if found.kind == "preset" else None), {}
    preset, overrides, _ = base_model(settings, norm)
    overrides = {key: value for key, value in overrides.items() if _accepts(settings, key)}  # the task's sizes
    overrides["norm"] = norm
    if settings.smoke:
        overrides["name"] = f"smoke_{norm}" if _own_family(settings) else f"{settings.model}_smoke_{norm}"
    elif not spec.paper_size or not _own_family(settings):
        overrides["name"] = f"{settings.model}_{settings.dataset}_{norm}"
    if spec.own and _accepts(settings, "cutoffs"):
        overrides["cutoffs"] = ()  # a plain softmax: a user's vocabulary may be smaller than any cluster bound
    if spec.own:  # the vocabulary is the text's, known once it is read (then checked, on resume too)
        overrides.pop("vocab_size", None)
    if settings.batch_size is not None and _accepts(settings, "batch_size"):  # Transformer-XL's memory: one size
        overrides["batch_size"] = settings.batch_size
    heads = overrides.get("num_heads") or keras_tse.zoo.full_config(preset or settings.model).get("num_heads", 1)
    accepts = functools.partial(_accepts, settings)
    overrides.update(model_keywords(settings, norm, heads=heads, ffn_ratio=4, accepts=accepts))
    overrides = {key: value for key, value in overrides.items() if key != "name" or _accepts(settings, key)}
    return preset, taken_by(settings.model, overrides)


def variant(plan, norm, base):
    from keras_tse.training import runner, scale  # Keras: once the plan has chosen the backend

    settings = plan.settings
    preset, overrides = model_overrides(plan, norm)
    record = {
        "preset": preset,
        "smoke": settings.smoke,
        "seed": settings.seed,
        "dataset": settings.dataset,
        **runner.backend_settings(settings.jit_compile or "auto"),
        "data_parallel": settings.data_parallel,
        "processes": scale.process()[1],
        **({"data": plan.fingerprint} if plan.fingerprint else {}),
        **({"model": settings.model} if not _own_family(settings) else {}),
        **({"from_preset": _source_name(settings)} if settings.from_preset else {}),
        **({"lora_rank": settings.lora_rank} if settings.lora_rank else {}),
        **({"tokenizer": "bpe", "vocab_size": settings.vocab_size} if settings.tokenizer == "bpe" else {}),
    }
    config = runner.as_started(os.path.join(plan.out, norm), base, kit_settings(settings, TRAIN))
    train = configs.recorded(config)
    if settings.epochs is not None:
        del train["steps"]  # known once the text is read
    known = {"train": train, "overrides": overrides, **record}
    return plans.Variant(norm, preset, overrides, config, record, known)


def before(settings):
    return None


# === The checks, before any text is read ===


def _source_name(settings):
    """What a run records it started from: a shipped preset's name, else the absolute path."""
    kind = source(settings).trained.kind
    return settings.from_preset if kind == "preset" else os.path.abspath(settings.from_preset)


def check(settings, survey):
    check_lora(settings)
    if settings.from_preset is not None:
        given = [name for name in MODEL_SETTINGS if getattr(settings, name) not in (None, False, ())]
        if given or settings.size != "cpu":
            flag = "--" + (given[0] if given else "size").replace("_", "-").replace("-rate", "")
            value = getattr(settings, given[0]) if given else settings.size
            raise InputError(flag, value, "no model flag with --from-preset (its weights fix the model)")
        batch, _ = source(settings).stream
        if batch is not None and settings.batch_size not in (None, batch):  # Transformer-XL's memory: one size
            raise InputError(
                "--batch-size", settings.batch_size, f"{batch} (--from-preset's memory is {batch} streams)"
            )
    families = keras_tse.zoo.list_families("text")
    if settings.model not in families:
        raise InputError("--model", settings.model, f"a text model family: {', '.join(families)}")
    if not all(_accepts(settings, keyword) for keyword in NEEDED):
        raise InputError("--model", settings.model, f"a text family whose builder takes {' and '.join(NEEDED)}")
    causal = [name for name in layout_names(measurement=True) if get_layout(name).causal]
    for norm in settings.norm:
        if norm not in causal:  # a language model's blocks read no later position
            raise InputError("--norm", norm, f"a layout a causal block takes: {', '.join(causal)}")
        model_keywords(settings, norm)  # each variant's layout takes every --layout-option
        _check_deescalation(settings, norm)
    # a builder that names `remat` (Transformer-XL's takes **kwargs, but its blocks write their memory in the call)
    takes_remat = lambda name: "remat" in keras_tse.zoo.registry.family_config(name)  # noqa: E731
    if settings.remat and not takes_remat(settings.model):
        takers = [name for name in families if takes_remat(name)]
        raise InputError(
            "--remat", f"with --model {settings.model}", f"a family whose builder takes it: {', '.join(takers)}"
        )
    import keras  # the backend: the one Keras imports with (Keras-free until here, for --help)

    if settings.data_parallel and keras.backend.backend() == "tensorflow":
        raise InputError(
            "--data-parallel",
            "KERAS_BACKEND=tensorflow",
            "KERAS_BACKEND=jax for the language model (MirroredStrategy cannot update its memory per replica)",
        )
    if settings.epochs is not None and settings.steps is not None:
        raise InputError("--epochs", settings.epochs, "either --epochs or --steps, not both")
    if settings.size == "paper" and not keras_tse.zoo.registry.has_training_presets(settings.model):
        raise InputError(
            "--size", "paper", f"a family with presets of each layout, --model {DEFAULTS['model']} (Fig. 7's widths)"
        )
    if settings.hidden_dim is not None:
        preset, overrides, _ = base_model(settings, settings.norm[0])
        heads = overrides.get("num_heads") or keras_tse.zoo.full_config(preset or settings.model).get("num_heads", 1)
        if settings.hidden_dim % heads:
            raise InputError(
                "--hidden-dim", settings.hidden_dim, f"a multiple of the {heads} heads (the width is split)"
            )


def _check_deescalation(settings, norm):
    """Eq. (21)'s settings, given, only for a layout that de-escalates (where it applies: a causal one)."""
    given = ["--" + name.replace("_", "-") for name in DEESCALATION if getattr(settings, name) not in (None, False)]
    if not given:
        return
    placed = any(getattr(settings, name) not in (None, False) for name in PLACEMENT)
    deescalating = [name for name in layout_names(measurement=True) if get_layout(name).deescalates]
    allowed = [name for name in deescalating if get_layout(name).causal_mean] if placed else deescalating
    if norm not in allowed:
        raise InputError("--norm", norm, f"{' or '.join(allowed)}: {', '.join(given)} set(s) eq. (21)")


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


# === The text, read once ===


def load_data(plan):
    """(token ids per split, vocabulary) of the data set; a slice of it (or its smoke stand-in) with --smoke."""
    settings, spec = plan.settings, plan.spec
    if settings.smoke and spec.smoke is not None:
        return spec.smoke_data(seed=settings.seed)
    given = source(settings).tokenizer if settings.from_preset is not None else None
    if isinstance(given, data.BytePairTokenizer):  # a byte-pair model reads the text itself, with its merges
        if not spec.own:
            raise InputError("--from-preset", settings.from_preset, f"a word-level model for --dataset {spec.name} (a "
                             "byte-pair model reads a folder of text: --dataset text)")  # fmt: skip
        return spec.load_data(settings.data_dir, tokenizer=given, token_dir=token_folder(plan))
    # a text folder's loader takes them: its words, and where its token files go (read memory-mapped)
    words = dict(tokenizer=settings.tokenizer, vocab_size=settings.vocab_size, token_dir=token_folder(plan))
    ids, vocab = spec.load_data(settings.data_dir, download=not settings.no_download, **words)
    if settings.smoke:
        train, held_out = SMOKE_PTB_TOKENS
        ids = {"train": ids["train"][:train], "valid": ids["valid"][:held_out], "test": ids["test"][:held_out]}
    if settings.from_preset is not None:
        return in_words_of(source(settings).tokenizer.vocabulary, ids, vocab)
    return ids, vocab


def token_folder(plan):
    """Where a text folder's splits are encoded (`data.token_file`): the run folder's `tokens/`, encoded again
    whenever the run starts or resumes, from the text its fingerprint checked."""
    return os.path.join(plan.out, TOKENS)


def in_words_of(words, ids, vocab):
    """(`ids`, read in `vocab`, as ids of vocabulary `words`, `words`): a trained model reads the text in its own
    words, each of the text's words it lacks as `<unk>`; one line where it has no `<unk>` to read them as."""
    from keras_tse.data.text import UNK  # Keras: once the plan has chosen the backend

    unk = words.index.get(UNK)
    table = np.asarray([words.index.get(symbol, -1 if unk is None else unk) for symbol in vocab.symbols], "int32")
    if (table < 0).any():
        missing = [vocab.symbols[i] for i in np.flatnonzero(table < 0)[:5]]
        raise InputError("--from-preset", f"a vocabulary without {UNK}", f"every word of the text ({missing} lack ids)")
    return {split: table[split_ids] for split, split_ids in ids.items()}, words


def _stream_shape(plan):
    """(batch size, segment length) every variant's model is built for (a GPT without a fixed batch:
    the training batch)."""
    first = plan.variants[0]
    if plan.settings.from_preset is not None:
        batch, segment_len = source(plan.settings).stream
        return batch or first.config.batch_size, segment_len
    built = {**keras_tse.zoo.full_config(first.preset or plan.settings.model), **first.overrides}
    return built.get("batch_size") or first.config.batch_size, built["segment_len"]


def prepare(plan):
    """The text read once, checked against the stream every variant is built for; the training settings with
    the step count `epochs` gives. A text refused (or a read stopped) leaves no token files behind."""
    try:
        return _prepare(plan)
    except (Exception, KeyboardInterrupt):
        shutil.rmtree(token_folder(plan), ignore_errors=True)
        raise


def _prepare(plan):
    from keras_tse.training import scale  # Keras: once the plan has chosen the backend

    settings = plan.settings
    start = time.perf_counter()
    print(f"loading {settings.dataset}{' (smoke slice)' if settings.smoke else ''} ...", flush=True)
    ids, vocab = load_data(plan)
    print(
        f"loaded {len(ids['train']):,} training tokens, vocabulary {len(vocab):,}, in "
        f"{time.perf_counter() - start:.1f} s; the first training step also compiles the model",
        flush=True,
    )
    batch_size, segment_len = _stream_shape(plan)
    processes = scale.process()[1]
    if batch_size % processes:
        raise InputError("--batch-size", batch_size, f"a multiple of the {processes} processes (each feeds a part)")
    files = dict(zip(("train", "valid", "test"), plan.survey.files)) if plan.survey else {}
    check_text_length(ids, batch_size, segment_len, lambda split: files.get(split, split))
    steps = None
    if settings.epochs is not None:  # passes over the training stream, in optimizer steps
        steps = math.ceil(settings.epochs * len(ids["train"]) / (batch_size * segment_len))
    for variant in plan.variants:
        check_updates(_with_steps(variant.config, steps), steps or variant.config.steps)
    return dict(ids=ids, vocab=vocab, steps=steps)


def _with_steps(config, steps):
    if steps is None:
        return config
    return _logged(dataclasses.replace(config, steps=steps, eval_interval=min(config.eval_interval, steps)))


def build_model(settings, preset, overrides):
    """A variant's model: the preset with `overrides`, or (a family without one) its builder with them."""
    if preset is None:
        return keras_tse.zoo.create_model(settings.model, **overrides)
    return keras_tse.zoo.from_preset(preset, **overrides)


def fit(plan, variant, prepared):
    """One variant built and trained into its folder, its words beside it."""
    settings = plan.settings
    ids, vocab = prepared["ids"], prepared["vocab"]
    config = _with_steps(variant.config, prepared["steps"])
    overrides = {**variant.overrides, "vocab_size": len(vocab)}
    run_dir = plans.variant_folder(plan, variant)
    if settings.from_preset is not None:  # the trained model, its words those it was trained with
        model = source(settings).trained.load()
    else:
        model = build_model(settings, variant.preset, overrides)
        # the ids' words travel with the run, split and cased as the data set's, and inside each checkpoint
        # (`run_files.save_model`): its model reads and writes text
        model.tokenizer = data.as_tokenizer(vocab, lowercase=plan.spec.lowercase)
    model.tokenizer.save(run_dir)
    # a subword model's perplexity per word too, so that runs of either tokenizer compare (`fit_language_model`)
    subwords = not isinstance(model.tokenizer, data.WordTokenizer)
    test_words = len(model.tokenizer.detokenize(ids["test"]).split()) if subwords else None
    if settings.lora_rank:
        from keras_tse import lora

        lora.enable_lora(model, settings.lora_rank)  # the output layer tied to the embedding: frozen with it
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)  # count_params adds the memory
    trained = f" trained (LoRA rank {settings.lora_rank})" if settings.lora_rank else ""
    print(f"\n=== {variant.norm}: {model.name}, {trainable:,} parameters{trained}, {config.steps} steps -> {run_dir}")
    # the leaky model's causal counterpart: its weights read there show how much of its perplexity was the leak
    twin = functools.partial(build_model, settings, variant.preset, {**overrides, "norm": "deescalate"})
    from keras_tse.training import language_model  # Keras: once a model is built

    return language_model.fit_language_model(
        model,
        ids["train"],
        ids["valid"],
        run_dir,
        config,
        test_ids=ids["test"],
        test_words=test_words,
        verbose=settings.verbose or "auto",
        extra_config={"overrides": overrides, **variant.settings},
        causal_twin=twin if variant.norm == LEAKY and settings.from_preset is None else None,  # a file: no builder
        checked=variant.known,
    )


def finish(plan, summaries):
    from keras_tse.training import (
        language_model,
        plots,
        runner,  # Keras: once the plan has chosen the backend
    )

    settings, spec = plan.settings, plan.spec
    name = "text in " + str(settings.data_dir) if spec.own else spec.title
    model = keras_tse.zoo.get_family(settings.model).title
    title = f"{model} on {name} (Yu & Zhang Fig. 7 layout)" + (
        f" - smoke run, {spec.smoke_note}" if settings.smoke else ""
    )
    runner.finish_recipe(
        summaries,
        language_model.summary_line,
        plan.out,
        layout_names(measurement=True),
        "steps.csv",
        plots.plot_training_loss,
        title,
    )


KIND = plans.RunKind(
    task="text",
    name=NAME,
    defaults=DEFAULTS,
    variant_names=functools.partial(layout_names, measurement=True),
    resolve=resolve,
    check=check,
    base_config=base_config,
    variant=variant,
    before=before,
    prepare=prepare,
    fit=fit,
    finish=finish,
)
