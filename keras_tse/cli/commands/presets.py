"""`keras-tse presets`: every model preset with its parameter count, input and card."""

import json

from keras_tse.cli import flags
from keras_tse.run_files import claim_file

HELP = "every model preset: parameters, input, card (from the preset metadata)"


def add_arguments(parser):
    parser.add_argument("--count", action="store_true", help="build every preset and count its parameters (a minute)")
    parser.add_argument(
        "--write", help="with the counts: write them to this JSON file (keras_tse/zoo/preset_sizes.json)"
    )


def _sizes_json(text):
    payload = json.loads(text)
    return isinstance(payload, dict) and all(isinstance(v, dict) and "params" in v for v in payload.values())


def run(args):
    from keras_tse.cli.preset_sizes import count_sizes, format_presets, write_sizes

    if args.write:
        claim_file(args.write, flags.reads_as(_sizes_json), "the parameter counts", "--write")
    if args.count or args.write:
        sizes = count_sizes(progress=True)
        if args.write:
            write_sizes(sizes, args.write)
            print(f"wrote the parameter counts of {len(sizes)} presets to {args.write}")
        print(format_presets(sizes))
    else:
        print(format_presets())
    return 0
