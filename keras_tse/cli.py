"""`keras-tse`: the command line of the zoo.

    keras-tse demo            the paper's claim on 8x8 digits: similarity at init, then training
    keras-tse escalation      token similarity after each block at initialisation (Sec. 2.4)
    keras-tse probe M.keras   per-block similarity and attention diagnostics of a saved model
    keras-tse figures         the paper's analysis figures (1, 2, 3, 4, 5, 8) as PNG + CSV
"""

import argparse
import os
import sys
import time


def _demo(args):
    from keras_tse.demo import DemoConfig, run_demo

    config = DemoConfig(depth=args.depth, epochs=args.epochs, learning_rate=args.learning_rate, seed=args.seed)
    run_demo(args.out, config, verbose=args.verbose)
    return 0


def _escalation(args):
    import keras

    from keras_tse.escalation import EscalationConfig, format_table, similarity_at_init

    config = EscalationConfig(
        depth=args.depth,
        num_tokens=args.tokens,
        hidden_dim=args.hidden,
        num_heads=args.heads,
        ffn_dim=args.ffn,
        tau=args.tau,
        seeds=tuple(range(args.seeds)),
    )
    start = time.perf_counter()
    profiles = similarity_at_init(tuple(args.kinds.split(",")), config)
    print(
        f"Token similarity t_sim (Definition 1) of random tokens X ~ N(0, 1) after each freshly "
        f"initialised block,\nmean of {args.seeds} seeds; n={config.num_tokens}, d={config.hidden_dim}, "
        f"h={config.num_heads}, ffn={config.ffn_dim}, alpha={config.alpha}, tau={config.tau} "
        f"(Yu & Zhang, Sec. 2.4).\n"
    )
    print(format_table(profiles))
    print(f"\nbackend {keras.backend.backend()}, {time.perf_counter() - start:.1f} s")
    if args.csv:
        _write_csv(args.csv, profiles)
        print(f"wrote {args.csv}")
    return 0


def _probe(args):
    import keras

    import keras_tse  # noqa: F401  registers the classes a saved model names
    from keras_tse.probe import format_rows, probe_model

    if not os.path.exists(args.model):
        raise ValueError(f"No such file. Received: model={args.model!r}")
    model = keras.saving.load_model(args.model)
    rows = probe_model(model, batch_size=args.batch_size, seed=args.seed)
    print(f"{model.name}: {len(rows)} blocks, random inputs (seed {args.seed}), backend {keras.backend.backend()}\n"
          f"t_sim / t_cos: token / cosine similarity after the block (Definition 1, eq. 1); entropy: attention\n"
          f"entropy per query row, head mean (nats); qk_*: eigenvalue mean, variance and xi of W_Q W_K^T, head mean.\n")
    print(format_rows(rows))
    return 0


def _figures(args):
    from keras_tse.figures import make_figures

    which = [w.strip() for w in args.which.split(",") if w.strip()]
    start = time.perf_counter()
    make_figures(which, args.out, quick=args.quick)
    print(f"wrote {', '.join(f'fig{w}.png/.csv' for w in which)} to {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


def _write_csv(path, profiles):
    kinds = list(profiles)
    with open(path, "w") as f:
        f.write("block," + ",".join(kinds) + "\n")
        for block in range(len(profiles[kinds[0]])):
            f.write(f"{block}," + ",".join(f"{profiles[k][block]:.6g}" for k in kinds) + "\n")


def _demo_defaults():
    from keras_tse.demo import DemoConfig

    return DemoConfig()


def _parser():
    parser = argparse.ArgumentParser(prog="keras-tse", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="post vs pre vs de-escalated deep ViT on 8x8 digits (CPU, minutes)")
    defaults = _demo_defaults()
    demo.add_argument("--out", default="runs/demo", help="run folder (default: runs/demo)")
    demo.add_argument("--depth", type=int, default=defaults.depth, help=f"blocks (default: {defaults.depth})")
    demo.add_argument("--epochs", type=int, default=defaults.epochs, help=f"epochs (default: {defaults.epochs})")
    demo.add_argument("--learning-rate", type=float, default=defaults.learning_rate,
                      help=f"AdamW learning rate for all variants (default: {defaults.learning_rate:g})")
    demo.add_argument("--seed", type=int, default=defaults.seed)
    demo.add_argument("--verbose", type=int, default=0, help="fit's progress output: 0, 1 or 2 (default: 0)")
    demo.set_defaults(run=_demo)

    escalation = commands.add_parser("escalation", help="token similarity at initialisation, per block kind")
    escalation.add_argument("--depth", type=int, default=20, help="blocks per stack (default: 20, as Fig. 2)")
    escalation.add_argument("--tokens", type=int, default=64, help="n, tokens per example (default: 64)")
    escalation.add_argument("--hidden", type=int, default=512, help="d, hidden size (default: 512)")
    escalation.add_argument("--heads", type=int, default=8, help="h, attention heads (default: 8)")
    escalation.add_argument("--ffn", type=int, default=2048, help="FFN width (default: 2048 = 4d)")
    escalation.add_argument("--tau", type=float, default=1.0, help="de-escalation strength (default: 1.0)")
    escalation.add_argument("--seeds", type=int, default=3, help="seeds averaged (default: 3)")
    escalation.add_argument(
        "--kinds",
        default="post,pre,deescalate,deescalate_pre_ffn",
        help="comma-separated block kinds (default: post,pre,deescalate,deescalate_pre_ffn)",
    )
    escalation.add_argument("--csv", help="also write the table to this CSV file")
    escalation.set_defaults(run=_escalation)

    probe = commands.add_parser("probe", help="per-block similarity and attention diagnostics of a .keras model")
    probe.add_argument("model", help="a saved .keras model built from keras_tse blocks")
    probe.add_argument("--batch-size", type=int, default=8, help="probe batch (a fixed model batch wins)")
    probe.add_argument("--seed", type=int, default=0)
    probe.set_defaults(run=_probe)

    figures = commands.add_parser("figures", help="regenerate the paper's analysis figures (PNG + CSV)")
    figures.add_argument("--which", default="1,2,3,4,5,8", help="comma-separated figure numbers (default: all, 1,2,3,4,5,8)")
    figures.add_argument("--out", default="runs/figures", help="output folder (default: runs/figures)")
    figures.add_argument("--quick", action="store_true", help="fewer trials and blocks: seconds, for CI")
    figures.set_defaults(run=_figures)
    return parser


def main(argv=None):
    # TensorFlow's C++ start-up notices drown the table when TF is installed; errors still show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except ValueError as error:  # bad settings: say what was wrong, without a traceback
        print(f"keras-tse {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
