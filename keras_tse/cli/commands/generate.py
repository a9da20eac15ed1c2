"""`keras-tse generate RUN_OR_PRESET --prompt TEXT`: a trained language model continues a text.

keras-tse generate gpt4_ptb --prompt "the company said" --max-new-tokens 20 --temperature 0
keras-tse generate runs/lm/deescalate --prompt "the company said" --top-k 40 --seed 0
keras-tse generate gpt4_ptb --prompt "the company said" --sampler beam --num-beams 4 --no-stop
"""

import os

SAMPLERS = ("greedy", "random", "top_k", "top_p", "beam")  # keras_tse.zoo.sampling.NAMES, without importing Keras
HELP = "continue a text with a trained language model (a shipped preset, a preset folder, a run folder, a .keras file)"


def add_arguments(parser):
    from keras_tse.cli import flags

    parser.add_argument(
        "source",
        metavar="RUN_OR_PRESET",
        help="a language model with its vocabulary: a preset that ships one (gpt4_ptb), a preset folder or "
        "hf://owner/name (assets/tokenizer/vocabulary.txt), a run's variant folder (vocabulary.txt, and its "
        "checkpoint chosen on the validation text, else checkpoints/last.keras), or a .keras file that carries "
        "its tokenizer (a keras-tse export of such a model)",
    )
    parser.add_argument("--prompt", required=True, help="the text to continue, words split on whitespace")
    parser.add_argument("--max-new-tokens", type=flags.non_negative_int, default=50, help="words to add (default: 50)")
    parser.add_argument(
        "--temperature", type=flags.non_negative_float, default=1.0, help="0: the most likely word (default: 1.0)"
    )
    parser.add_argument("--top-k", type=flags.positive_int, default=None, help="sample among the K most likely")
    parser.add_argument(
        "--top-p", type=flags.probability_mass, default=None, help="sample within this probability mass"
    )
    parser.add_argument("--seed", type=flags.non_negative_int, default=None, help="the sampler's seed")
    parser.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default=None,
        help="KerasHub's samplers by name (top_k: 5, top_p: 0.1, beam: 5 beams unless set); default: from "
        "--temperature, --top-k and --top-p",
    )
    parser.add_argument("--num-beams", type=flags.positive_int, default=None, help="beam search's width")
    parser.add_argument(
        "--no-stop", action="store_true", help="draw all --max-new-tokens words, past <eos> (default: stop there)"
    )
    parser.add_argument("--show-special", action="store_true", help="print <eos> where it is drawn")
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="compile the decode step on every backend (PyTorch: torch.compile, about 40-55 s on a 2-core CPU "
        "before the first word); default: XLA on JAX and TensorFlow, eager PyTorch",
    )


def check(args):
    """(a function that loads the model, its tokenizer); one line for a source that is not a trained language
    model with its words, before any model is read."""
    import zipfile

    from keras_tse._checks import InputError
    from keras_tse.data.tokenizer import VOCABULARY_FILE
    from keras_tse.data.tokenizers import load_tokenizer, tokenizer_from_archive
    from keras_tse.run_files import chosen_checkpoint
    from keras_tse.zoo.preset_folder import VOCABULARY_ASSET, tokenizer_folder
    from keras_tse.zoo.presets import folder_of, from_preset
    from keras_tse.zoo.saved_file import load_keras_file

    if args.source.endswith(".keras") and os.path.isfile(args.source):  # an export or a checkpoint: words inside
        tokenizer = tokenizer_from_archive(args.source) if zipfile.is_zipfile(args.source) else None
        if tokenizer is None:
            raise InputError("RUN_OR_PRESET", args.source, "a language model's .keras file with its tokenizer inside")
        return (lambda: load_keras_file(args.source, compile=False)), tokenizer
    checkpoint = chosen_checkpoint(args.source)[0]  # chosen on the validation text, else the last
    folder = None if os.path.isfile(checkpoint) else folder_of(args.source)  # a run's config.json is not a preset's
    if folder is None:
        vocabulary = os.path.join(args.source, VOCABULARY_FILE)
        last = os.path.join(args.source, "checkpoints", "last.keras")
        missing = [os.path.relpath(p, args.source) for p in (last, vocabulary) if not os.path.isfile(p)]
        if missing:
            expected = f"a shipped language model's preset or a run's variant folder (it has no {', '.join(missing)})"
            raise InputError("RUN_OR_PRESET", args.source, expected)
        return (lambda: load_keras_file(checkpoint, compile=False)), load_tokenizer(args.source)
    if tokenizer_folder(folder) is None:  # a preset with weights: its words are an asset
        expected = f"a language model's preset (it has no assets/{VOCABULARY_ASSET})"
        raise InputError("RUN_OR_PRESET", args.source, expected)
    return (lambda: from_preset(args.source)), load_tokenizer(tokenizer_folder(folder))


def run(args):
    import sys
    import warnings

    from keras_tse import zoo
    from keras_tse.zoo import sampling

    load, tokenizer = check(args)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        prompt = tokenizer.tokenize(args.prompt)
    for warning in said:  # the prompt's unknown words: one line, not a warning's source location
        print(f"keras-tse generate: {warning.message}", file=sys.stderr)
    if not len(prompt):
        from keras_tse._checks import InputError

        raise InputError("--prompt", repr(args.prompt), "at least one word")
    sampler = args.sampler or ("beam" if args.num_beams is not None else None)
    beams = sampler == "beam"
    sampling.choose(sampler, args.temperature, args.top_k, args.top_p, args.num_beams)  # one line, before the model
    model = load()
    print(tokenizer.detokenize(prompt), end="", flush=True)  # then each word as it is drawn

    def word(new_ids):
        text = tokenizer.detokenize(new_ids, skip_special_tokens=not args.show_special)
        print(" " + text if text else "", end="", flush=True)

    new = zoo.generate(
        model,
        prompt,
        args.max_new_tokens,
        sampler=sampler,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        num_beams=args.num_beams,
        seed=args.seed,
        stop_token_ids=None if args.no_stop else "auto",
        strip_prompt=True,
        jit_compile=True if args.jit_compile else "auto",
        on_token=None if beams else word,
        tokenizer=tokenizer,
    )
    if beams:  # the best beam is known only at the end
        word(new)
    print()
    return 0
