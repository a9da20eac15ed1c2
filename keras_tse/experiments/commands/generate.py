"""`keras-tse generate RUN --prompt TEXT`: a trained language model continues a text."""

import os

HELP = "continue a text with a trained language model (a run's variant folder: its last.keras and vocabulary)"


def add_arguments(parser):
    from keras_tse.experiments import flags

    parser.add_argument(
        "source", metavar="RUN", help="a language model's variant folder (checkpoints/last.keras, vocabulary.txt)"
    )
    parser.add_argument("--prompt", required=True, help="the text to continue, words split on whitespace")
    parser.add_argument("--max-new-tokens", type=flags.non_negative_int, default=50, help="words to add (default: 50)")
    parser.add_argument(
        "--temperature", type=flags.non_negative_float, default=1.0, help="0: the most likely word (default: 1.0)"
    )
    parser.add_argument("--top-k", type=flags.positive_int, default=None, help="sample among the K most likely")
    parser.add_argument("--top-p", type=flags.unit_float, default=None, help="sample within this probability mass")
    parser.add_argument("--seed", type=flags.non_negative_int, default=None, help="the sampler's seed")


def check(args):
    """One line for a folder that is not a trained language model's, before any model is read."""
    from keras_tse._checks import InputError

    checkpoint = os.path.join(args.source, "checkpoints", "last.keras")
    vocabulary = os.path.join(args.source, "vocabulary.txt")
    missing = [os.path.relpath(p, args.source) for p in (checkpoint, vocabulary) if not os.path.isfile(p)]
    if missing:
        raise InputError("RUN", args.source, f"a language model's variant folder (it has no {', '.join(missing)})")
    if args.top_p == 0:
        raise InputError("--top-p", 0, "a number in (0, 1]")
    return checkpoint, vocabulary


def run(args):
    import keras

    from keras_tse import zoo
    from keras_tse.data import Vocabulary

    checkpoint, vocabulary = check(args)
    vocab = Vocabulary.load(vocabulary)
    prompt = vocab.encode([args.prompt])[:-1]  # its words, without the line's closing <eos>
    if not len(prompt):
        from keras_tse._checks import InputError

        raise InputError("--prompt", repr(args.prompt), "at least one word")
    model = keras.saving.load_model(checkpoint, compile=False)
    ids = zoo.generate(
        model,
        prompt,
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
    )
    print(vocab.decode(ids))
    return 0
