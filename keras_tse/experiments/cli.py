"""`keras-tse`: the command line of the zoo.

keras-tse demo            the paper's claim on 8x8 digits: similarity at init, then training
keras-tse escalation      token similarity after each block at initialisation (Sec. 2.4)
keras-tse probe M.keras   per-block similarity and attention diagnostics of a saved model
keras-tse presets         every model preset with its parameter count, input and card
keras-tse figures         the paper's analysis figures (1, 2, 3, 4, 5, 8) as PNG + CSV
keras-tse bench           train-step throughput and memory, ours beside a KerasHub or timm peer
keras-tse sweep           resumable depth x norm x tau x init x lr x seed grid on 8x8 digits (the depth study)
keras-tse info            versions, backend, the devices it sees (is the GPU used?), dtype policy
"""

import dataclasses
import json
import os
import sys
import time

from keras_tse._checks import InputError
from keras_tse.experiments import flags
from keras_tse.experiments.info import environment, format_environment, package_version
from keras_tse.norms import BASELINE_NORMS, ESCALATION_KINDS, FIG2_KINDS, INITIALIZERS, NORMS, PAPER_NORMS
from keras_tse.run_files import claim_file, claim_folder


def _written_by(path, test):
    """Whether `path` reads as a file this command wrote (`test` of its text): it may be replaced."""
    try:
        with open(path) as f:
            return test(f.read())
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def _bench_json(text):
    payload = json.loads(text)
    return isinstance(payload, dict) and {"config", "results"} <= set(payload)


def _sizes_json(text):
    payload = json.loads(text)
    return isinstance(payload, dict) and all(isinstance(v, dict) and "params" in v for v in payload.values())


def _demo(args):
    from keras_tse.experiments.demo import DemoConfig, run_demo

    config = _settings(DemoConfig, args)
    run_demo(args.out or ("runs/demo_quick" if args.quick else "runs/demo"), config, verbose=args.verbose)
    return 0


def _escalation(args):
    import keras

    from keras_tse.experiments.escalation import (
        EscalationConfig,
        format_table,
        similarity_at_init,
        write_csv,
    )

    if args.csv:
        claim_file(args.csv, lambda p: _written_by(p, lambda t: t.startswith("block,")), "the table", "--csv")
    config = EscalationConfig(
        depth=args.depth,
        num_tokens=args.tokens,
        hidden_dim=args.hidden,
        num_heads=args.heads,
        ffn_dim=args.ffn,
        tau=args.tau,
        seeds=tuple(range(args.seeds)),
        initializer=args.init,
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


def _probe(args):
    import keras

    import keras_tse  # noqa: F401  registers the classes a saved model names
    from keras_tse.analysis.probe import format_rows, probe_model

    if not os.path.isfile(args.model):
        raise InputError("MODEL", args.model, "a saved .keras file")
    try:
        model = keras.saving.load_model(args.model)
    except Exception as error:  # noqa: BLE001 - a damaged file fails in zipfile, h5py, json or Keras
        reason = f"a readable .keras model ({type(error).__name__}: {error})"
        raise InputError(args.model, "a file Keras cannot load", reason) from None
    layers = args.layers.split(",") if args.layers else None
    missing = [name for name in layers or () if name not in {layer.name for layer in model.layers}]
    if missing:
        raise InputError("--layers", ",".join(missing), f"names of layers of {model.name}")
    rows = probe_model(model, batch_size=args.batch_size, seed=args.seed, layers=layers)
    print(
        f"{model.name}: {len(rows)} blocks, random inputs (seed {args.seed}), backend {keras.backend.backend()}\n"
        f"t_sim / t_cos: token / cosine similarity after the block (Definition 1, eq. 1); entropy: attention\n"
        f"entropy per query row, head mean (nats); qk_*: eigenvalue mean, variance and xi of W_Q W_K^T, head mean.\n"
    )
    print(format_rows(rows))
    return 0


def _presets(args):
    from keras_tse.experiments.preset_sizes import count_sizes, format_presets, write_sizes

    if args.write:
        claim_file(args.write, lambda p: _written_by(p, _sizes_json), "the parameter counts", "--write")
    if args.count or args.write:
        sizes = count_sizes(progress=True)
        if args.write:
            write_sizes(sizes, args.write)
            print(f"wrote the parameter counts of {len(sizes)} presets to {args.write}")
        print(format_presets(sizes))
    else:
        print(format_presets())
    return 0


def _figures(args):
    from keras_tse.experiments.figures import make_figures

    which = [w.strip() for w in args.which.split(",") if w.strip()]
    start = time.perf_counter()
    make_figures(which, args.out, quick=args.quick, verbose=1)
    names = ", ".join(f"fig{w}.png/.csv" for w in which)
    print(f"{time.perf_counter() - start:.0f} s; outputs in {args.out}/: {names}")
    return 0


def _settings(cls, args):
    """A subcommand's settings: `cls` (or its `quick()` preset) with every field the user gave a flag for.

    A flag's destination is the field's name, so the table of fields is the dataclass itself.
    """
    given = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(cls)}
    given = {name: value for name, value in given.items() if value is not None}
    return cls.quick(**given) if getattr(args, "quick", False) else cls(**given)


def _bench(args):
    from keras_tse.experiments.bench import BenchConfig, run_bench

    config = _settings(BenchConfig, args)
    if args.out:
        claim_file(args.out, lambda p: _written_by(p, _bench_json), "the results")
    start = time.perf_counter()
    results = run_bench(config, out=args.out)
    print(f"{time.perf_counter() - start:.0f} s")
    return 1 if any("error" in r for r in results) else 0


def _sweep(args):
    from keras_tse.experiments.sweep import SweepConfig, markdown_table, run_sweep

    config = _settings(SweepConfig, args)
    claim_folder(args.out, "sweep", {}, writes=("sweep.csv", "cells", "plots"), marker="sweep.csv")
    start = time.perf_counter()
    rows = run_sweep(config, args.out)
    print(
        f"\n{markdown_table(rows)}\n\n{len(rows)} cells in {args.out}/sweep.csv, plots in {args.out}/plots "
        f"({time.perf_counter() - start:.0f} s this run)"
    )
    return 0


def _info(args):
    print(format_environment(environment()))
    return 0


# keras-tse sweep's grid axes: (flags, type of the comma-separated list, help); the first flag names
# the SweepConfig field
SWEEP_AXES = (
    (("--depths",), flags.comma_list(flags.depth), "comma-separated depths (default: 12,24,48)"),
    (
        ("--norms",),
        flags.choice_list(NORMS, {}),
        f"comma-separated norms (default: {','.join(PAPER_NORMS)}; also {','.join(BASELINE_NORMS)})",
    ),
    (("--taus",), flags.comma_list(flags.unit_float), "de-escalation strengths (default: 1.0,0.5)"),
    (
        ("--initializers", "--inits"),
        flags.choice_list(INITIALIZERS, {}),
        "weight schemes (default: torch,glorot; also normal, transformer_xl)",
    ),
    (("--learning-rates",), flags.comma_list(flags.positive_float), "AdamW learning rates (default: 1e-3,3e-4,1e-4)"),
    (("--seeds",), flags.comma_list(flags.non_negative_int, distinct=True), "comma-separated seeds (default: 0,1,2)"),
)


def _command(commands, name, text):
    """A subcommand whose one-line text is both its entry in `keras-tse --help` and its own description."""
    return commands.add_parser(name, help=text, description=text)


def _parser():
    parser = flags.Parser(prog="keras-tse", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"keras-tse {package_version('keras_tse')}")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = _command(commands, "demo", "post vs pre vs de-escalated deep ViT on 8x8 digits (CPU, minutes)")
    # defaults live in DemoConfig (None = not given); the help repeats them (tests/test_cli.py checks it)
    demo.add_argument("--out", help="run folder (default: runs/demo; with --quick runs/demo_quick)")
    demo.add_argument(
        "--quick", action="store_true", help="12 blocks, seed 0, 3 epochs: the three variants in about 90 s on a CPU"
    )
    demo.add_argument("--depth", type=flags.depth, help="blocks (default: 24)")
    demo.add_argument("--epochs", type=flags.positive_int, help="epochs (default: 10)")
    demo.add_argument(
        "--learning-rate", type=flags.positive_float, help="AdamW learning rate for all variants (default: 0.0003)"
    )
    demo.add_argument(
        "--seeds",
        type=flags.comma_list(flags.non_negative_int, distinct=True),
        help="comma-separated training seeds (default: 0,1,2)",
    )
    demo.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=2,
        help="fit's progress output: 0 (none), 1 (a bar) or 2 (a line per epoch; the default)",
    )
    flags.add_compile_cache(demo)
    demo.set_defaults(run=_demo)

    escalation = _command(commands, "escalation", "token similarity at initialisation, per block kind")
    escalation.add_argument("--depth", type=flags.depth, default=20, help="blocks per stack (default: 20, as Fig. 2)")
    escalation.add_argument("--tokens", type=flags.positive_int, default=64, help="n, tokens per example (default: 64)")
    escalation.add_argument("--hidden", type=flags.positive_int, default=512, help="d, hidden size (default: 512)")
    escalation.add_argument("--heads", type=flags.positive_int, default=8, help="h, attention heads (default: 8)")
    escalation.add_argument("--ffn", type=flags.positive_int, default=2048, help="FFN width (default: 2048 = 4d)")
    escalation.add_argument("--tau", type=flags.unit_float, default=1.0, help="de-escalation strength (default: 1.0)")
    escalation.add_argument("--seeds", type=flags.positive_int, default=3, help="seeds averaged (default: 3)")
    escalation.add_argument("--init", choices=INITIALIZERS, default="glorot", help="weight scheme (default: glorot)")
    escalation.add_argument(
        "--kinds",
        type=flags.choice_list(ESCALATION_KINDS, {}),
        default=",".join(FIG2_KINDS),
        help=f"comma-separated block kinds, of {', '.join(ESCALATION_KINDS)} (default: {','.join(FIG2_KINDS)})",
    )
    escalation.add_argument("--csv", help="also write the table to this CSV file")
    escalation.set_defaults(run=_escalation)

    probe = _command(commands, "probe", "per-block similarity and attention diagnostics of a .keras model")
    probe.add_argument("model", help="a saved .keras model (keras_tse blocks, or any with --layers)")
    probe.add_argument(
        "--batch-size", type=flags.positive_int, default=8, help="probe batch (a fixed model batch wins)"
    )
    probe.add_argument("--seed", type=flags.non_negative_int, default=0, help="seed of the random inputs (default 0)")
    probe.add_argument(
        "--layers",
        default=None,
        help="comma-separated names of the block layers, for a model not built from keras_tse blocks "
        "(similarity only; the attention columns need keras_tse blocks)",
    )
    probe.set_defaults(run=_probe)

    presets = _command(commands, "presets", "every model preset: parameters, input, card (from the preset metadata)")
    presets.add_argument("--count", action="store_true", help="build every preset and count its parameters (a minute)")
    presets.add_argument(
        "--write", help="with the counts: write them to this JSON file (keras_tse/zoo/preset_sizes.json)"
    )
    presets.set_defaults(run=_presets)

    figures = _command(commands, "figures", "regenerate the paper's analysis figures (PNG + CSV)")
    figures.add_argument(
        "--which", default="1,2,3,4,5,8", help="comma-separated figure numbers (default: all, 1,2,3,4,5,8)"
    )
    figures.add_argument("--out", default="runs/figures", help="output folder (default: runs/figures)")
    figures.add_argument("--quick", action="store_true", help="fewer trials and blocks: seconds, for CI")
    figures.set_defaults(run=_figures)

    bench = _command(commands, "bench", "train-step throughput and peak memory, ours beside a KerasHub or timm peer")
    bench.add_argument("--quick", action="store_true", help="CPU-sized models (ViT-8 batch 32, TXL-4 batch 8): minutes")
    bench.add_argument(
        "--cases",
        type=flags.comma_list(str),
        help="comma-separated cases (default: ours, --peer's and TXL's): vit_post, vit_pre, vit_deescalate, "
        "peer_post, peer_pre (KerasHub), timm_post, timm_pre, txl_post, txl_pre, txl_deescalate",
    )
    bench.add_argument(
        "--peer",
        type=flags.comma_list(str),
        help="whose ViT to time beside ours: keras_hub (default), timm (plain PyTorch, `pip install timm`) or both",
    )
    bench.add_argument(
        "--budget-s",
        type=flags.positive_float,
        help="stop a case's process still running after this many seconds of the whole run (with --isolate: per case)",
    )
    bench.add_argument("--dtype", help="float32 (default), mixed_bfloat16 or mixed_float16")
    bench.add_argument("--vit-depth", type=flags.depth, help="ViT blocks (default: 80; --quick 8)")
    bench.add_argument("--vit-batch", type=flags.positive_int, help="ViT batch (default: 128; --quick 32)")
    bench.add_argument("--txl-depth", type=flags.depth, help="Transformer-XL blocks (default: 60; --quick 4)")
    bench.add_argument("--txl-batch", type=flags.positive_int, help="Transformer-XL batch (default: 40; --quick 8)")
    bench.add_argument(
        "--txl-segment", type=flags.positive_int, help="segment = memory length (default: 150; --quick 32)"
    )
    bench.add_argument(
        "--steps", type=flags.positive_int, help="timed steps per case and round (default: 10; --quick 6)"
    )
    bench.add_argument(
        "--rounds", type=flags.positive_int, help="turns of timed steps per case (default: 2; --quick 3)"
    )
    bench.add_argument(
        "--isolate", action="store_const", const=True, help="one process per case: each peak memory its own"
    )
    bench.add_argument(
        "--warmup", type=flags.non_negative_int, help="untimed steps after the first (default: 3; --quick 2)"
    )
    bench.add_argument(
        "--jit-compile",
        action="store_const",
        const=True,
        help="compile=True: torch.compile on PyTorch (default: Keras's auto: XLA on JAX (TF: on a GPU), eager torch)",
    )
    bench.add_argument(
        "--peak-tflops", type=flags.positive_float, help="the device's peak TFLOP/s for --dtype, to report MFU"
    )
    bench.add_argument("--out", help="also write the results to this JSON file")
    # off by default: the bench reports compile times, which a warm cache would hide
    flags.add_compile_cache(bench, default="off")
    bench.set_defaults(run=_bench)

    sweep = _command(commands, "sweep", "resumable grid: depth x norm x tau x lr x seed, ViT on 8x8 digits")
    sweep.add_argument("--out", default="runs/sweep", help="folder of sweep.csv and plots/ (default: runs/sweep)")
    sweep.add_argument("--quick", action="store_true", help="depths 2,4; post, deescalate, rezero; 12 steps: seconds")
    for names, kind, text in SWEEP_AXES:  # the grid's axes, each a comma-separated list
        sweep.add_argument(*names, type=kind, help=text)
    sweep.add_argument("--steps", type=flags.positive_int, help="training steps per cell (default: 300)")
    sweep.add_argument("--batch-size", type=flags.positive_int, help="batch size (default: 64)")
    flags.add_compile_cache(sweep)
    sweep.set_defaults(run=_sweep)

    info = _command(commands, "info", "versions, the backend and the devices it sees, the dtype policy")
    info.set_defaults(run=_info)
    return parser


def main(argv=None):
    # TensorFlow's C++ start-up notices drown the table when TF is installed; errors still show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    prog = f"keras-tse {args.command}"
    # the backend before Keras is imported; `info` reports on any backend Keras knows
    code = flags.exit_code_of(prog, lambda: flags.choose_backend(prog, trains=args.command != "info"))
    # bad settings or an unreadable input file: one line naming it, no traceback, exit 2
    return code or flags.exit_code_of(prog, lambda: _run(args))


def _run(args):
    if "compile_cache" in args:  # the commands that train
        from keras_tse.training.compile_cache import use_compile_cache

        use_compile_cache(args.compile_cache)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
