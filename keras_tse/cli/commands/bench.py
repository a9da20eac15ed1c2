"""`keras-tse bench`: train-step throughput and memory, ours beside a KerasHub or timm peer."""

import json
import time

from keras_tse.cli import flags
from keras_tse.run_files import claim_file
from keras_tse.training.bench_cases import CASES, DTYPES, PEERS

HELP = "train-step throughput and peak memory, ours beside a KerasHub or timm peer"


def add_arguments(parser):
    parser.add_argument(
        "--quick", action="store_true", help="CPU-sized models (ViT-8 batch 32, TXL-4 batch 8): minutes"
    )
    parser.add_argument(
        "--cases",
        type=flags.choice_list(CASES, {}),
        help="comma-separated cases (default: ours, --peer's and TXL's): vit_post, vit_pre, vit_deescalate, "
        "peer_post, peer_pre (KerasHub), timm_post, timm_pre, torch_post, torch_pre (torch.nn), txl_post, txl_pre, "
        "txl_deescalate",
    )
    parser.add_argument(
        "--peer",
        type=flags.choice_list(tuple(PEERS), {}),
        help="whose ViT to time beside ours: keras_hub (default), timm (plain PyTorch, `pip install timm`), torch "
        "(torch.nn.TransformerEncoderLayer, post- and pre-norm), or several",
    )
    parser.add_argument(
        "--budget-s",
        type=flags.positive_float,
        help="stop a case's process still running after this many seconds of the whole run (with --isolate: per case)",
    )
    parser.add_argument("--dtype", choices=DTYPES, help="the training dtype policy (default: float32)")
    parser.add_argument("--vit-depth", type=flags.depth, help="ViT blocks (default: 80; --quick 8)")
    parser.add_argument("--vit-batch", type=flags.positive_int, help="ViT batch (default: 128; --quick 32)")
    parser.add_argument("--txl-depth", type=flags.depth, help="Transformer-XL blocks (default: 60; --quick 4)")
    parser.add_argument("--txl-batch", type=flags.positive_int, help="Transformer-XL batch (default: 40; --quick 8)")
    parser.add_argument(
        "--txl-segment", type=flags.positive_int, help="segment = memory length (default: 150; --quick 32)"
    )
    parser.add_argument(
        "--steps", type=flags.positive_int, help="timed steps per case and round (default: 10; --quick 6)"
    )
    parser.add_argument(
        "--rounds", type=flags.positive_int, help="turns of timed steps per case (default: 2; --quick 3)"
    )
    parser.add_argument(
        "--isolate", action="store_const", const=True, help="one process per case: each peak memory its own"
    )
    parser.add_argument(
        "--warmup", type=flags.non_negative_int, help="untimed steps after the first (default: 3; --quick 2)"
    )
    flags.add_jit_compile(parser, default=None)  # the plain-PyTorch peers are torch.compile-d with it
    parser.add_argument(
        "--peak-tflops", type=flags.positive_float, help="the device's peak TFLOP/s for --dtype, to report MFU"
    )
    parser.add_argument("--out", help="also write the results to this JSON file")
    # off by default: the bench reports compile times, which a warm cache would hide
    flags.add_compile_cache(parser, default="off")


def _bench_json(text):
    payload = json.loads(text)
    return isinstance(payload, dict) and {"config", "results"} <= set(payload)


def run(args):
    from keras_tse.training.benchmark import BenchConfig, run_bench

    config = flags.config_from(BenchConfig, args)
    if args.out:
        claim_file(args.out, flags.reads_as(_bench_json), "the results")
    start = time.perf_counter()
    results = run_bench(config, out=args.out)
    print(f"{time.perf_counter() - start:.0f} s")
    return 1 if any("error" in r for r in results) else 0
