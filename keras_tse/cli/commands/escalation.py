"""`keras-tse escalation`: token similarity after each freshly initialised block (Sec. 2.4)."""

import argparse
import time

from keras_tse.cli import flags
from keras_tse.norms import FIG2_KINDS, INITIALIZERS, escalation_kinds
from keras_tse.run_files import claim_file

HELP = "token similarity at initialisation, per block kind"


def add_arguments(parser):
    parser.add_argument("--depth", type=flags.depth, default=20, help="blocks per stack (default: 20, as Fig. 2)")
    # each flag's destination is its EscalationConfig field (flags.config_from)
    parser.add_argument(
        "--tokens", dest="num_tokens", type=flags.positive_int, default=64, help="n, tokens per example (default: 64)"
    )
    parser.add_argument(
        "--hidden", dest="hidden_dim", type=flags.positive_int, default=512, help="d, hidden size (default: 512)"
    )
    parser.add_argument(
        "--heads", dest="num_heads", type=flags.positive_int, default=8, help="h, attention heads (default: 8)"
    )
    parser.add_argument(
        "--ffn", dest="ffn_dim", type=flags.positive_int, default=2048, help="FFN width (default: 2048 = 4d)"
    )
    parser.add_argument("--tau", type=flags.tau, default=1.0, help="de-escalation strength (default: 1.0)")
    parser.add_argument("--seeds", type=flags.positive_int, default=3, help="seeds averaged (default: 3)")
    parser.add_argument(
        "--init", dest="initializer", choices=INITIALIZERS, default="glorot", help="weight scheme (default: glorot)"
    )
    parser.add_argument(
        "--kinds",
        type=flags.choice_list(escalation_kinds(), {}),
        default=",".join(FIG2_KINDS),
        help=f"comma-separated block kinds, of {', '.join(escalation_kinds())} (default: {','.join(FIG2_KINDS)})",
    )
    parser.add_argument("--csv", help="also write the table to this CSV file")


def run(args):
    import keras

    from keras_tse.analysis.escalation import EscalationConfig, format_table, similarity_at_init, write_csv

    if args.csv:
        claim_file(args.csv, flags.reads_as(lambda text: text.startswith("block,")), "the table", "--csv")
    config = flags.config_from(
        EscalationConfig, argparse.Namespace(**{**vars(args), "seeds": tuple(range(args.seeds))})
    )
    start = time.perf_counter()
    profiles = similarity_at_init(args.kinds, config, verbose=1)
    print(
        f"Token similarity t_sim (Definition 1) of random tokens X ~ N(0, 1) after each freshly "
        f"initialised block,\nmean of {args.seeds} seeds; n={config.num_tokens}, d={config.hidden_dim}, "
        f"h={config.num_heads}, ffn={config.ffn_dim}, alpha={config.alpha}, tau={config.tau}, "
        f"init {config.initializer} "
        f"(Yu & Zhang, Sec. 2.4).\n"
    )
    print(format_table(profiles))
    if args.csv:
        write_csv(args.csv, profiles)
    where = f"outputs in {args.csv}" if args.csv else "the table above is the output (--csv FILE saves it)"
    print(f"\nbackend {keras.backend.backend()}, {time.perf_counter() - start:.1f} s; {where}")
    return 0
