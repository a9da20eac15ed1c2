"""`keras-tse study`: the lab's studies, each a plan run cell by cell by one engine
(`recipes.lab.engine`), resumable, its rows in a committed result file under `zoo/`.

    keras-tse study                                  # every study: its result file, rows, cells that can start
    keras-tse study depth80 --dry-run                # the cells that would start now
    nice -n 19 keras-tse study depth80 --jobs 2      # run or resume (a killed cell resumes its own folder)
    keras-tse study ptb_warmup --jobs 12 --budget-s 540 --out "$OUT"   # on a GPU: stops in time, results in OUT
    keras-tse study depth80 --card                   # regenerate the card's tables (and figure) from the rows
"""

import os

HELP = "the lab's studies, each a plan of cells run by one engine: list, run or resume, dry-run, card"
# The cells run the recipes in processes of their own, under JAX; this process trains nothing.
NEEDS_BACKEND = False
RESUMES = True  # the same command goes on from the run folders it saved


def studies():
    """name -> the study (`engine.Study`) of each study module of the lab."""
    from keras_tse.cli import checkout

    return checkout.studies()


def add_arguments(parser):
    import argparse

    from keras_tse.cli import checkout, flags

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if checkout.root() is not None:  # outside a checkout the command says where the studies live
        parser.epilog = "studies:\n" + "\n".join(f"  {s.name:<12} {s.title}" for s in studies().values())

    parser.add_argument("name", nargs="?", help="the study (default: list every study)")
    parser.add_argument("--part", help="one part of a study that has several (default: every part)")
    parser.add_argument("--arms", help="comma-separated arms (default: every arm of the part)")
    parser.add_argument("--jobs", type=flags.positive_int, default=1, help="cells at once (default: 1)")
    parser.add_argument("--runs", help="the cells' run folders (default: runs/<study>)")
    parser.add_argument(
        "--budget-s", type=flags.positive_float, help="stop after this many seconds; running cells resume next time"
    )
    parser.add_argument(
        "--out",
        help="copy the result file and the cells' logs (one archive) here as cells finish (new or empty)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the cells that would start now, run nothing")
    parser.add_argument("--card", action="store_true", help="regenerate the study's card from its result file")


def run(args):
    from keras_tse.cli.flags import InputError

    found = studies()
    if args.name is None:
        return _list(found)
    if args.name not in found:
        raise InputError("study", repr(args.name), f"one of {', '.join(found)}")
    study = found[args.name]
    arms = _arms(study, args)
    if args.card:
        return _card(study)
    if args.dry_run:
        cells = study.pending(arms)
        for arm, lr, seed in cells:
            print(f"{arm} lr {lr:g} seed {seed}")
        print(f"{len(cells)} cell(s) can start now; {len(study.read_rows())} rows in {_relative(study.results)}")
        return 0
    from keras_tse.cli.checkout import lab

    ROOT, engine = lab().ROOT, lab("engine")
    if args.out and os.path.isdir(args.out) and os.listdir(args.out):
        raise InputError("--out", repr(args.out), "a new or empty folder (it receives the study's files)")
    runs = args.runs or os.path.join(ROOT, "runs", study.name)
    written = engine.run(study, arms, runs, jobs=args.jobs, budget_s=args.budget_s, out=args.out, log=_log)
    left = len(study.pending(arms))
    print(f"{study.name}: {written} row(s) written, {len(study.read_rows())} in {_relative(study.results)}; "
          f"{left} cell(s) can start next")  # fmt: skip
    return 0


def _arms(study, args):
    from keras_tse.cli.flags import InputError

    if args.part is not None and args.part not in study.parts:
        raise InputError("--part", repr(args.part), f"one of {', '.join(study.parts)}")
    arms = study.arms([args.part] if args.part else None)
    if not args.arms:
        return arms
    chosen = tuple(args.arms.split(","))
    unknown = [arm for arm in chosen if arm not in arms]
    if unknown:
        raise InputError("--arms", ",".join(unknown), f"some of {', '.join(arms)}")
    return chosen


def _list(found):
    for study in found.values():
        rows = len(study.read_rows())
        pending = len(study.pending(study.arms()))
        print(f"{study.name:<12} {study.title}")
        print(
            f"{'':<12} {rows} rows in {_relative(study.results)}, {pending} cell(s) can start; "
            f"card {_relative(study.card)}"
        )
    return 0


def _card(study):
    from keras_tse.cli.checkout import lab

    generated_tables = lab("generated_tables")

    with open(study.card) as f:
        text = f.read()
    new, names = generated_tables.rewrite(text)
    if new != text:
        from keras_tse.run_files import write_text

        write_text(study.card, new)
    print(f"{_relative(study.card)}: {len(names)} generated tables {'rewritten' if new != text else 'unchanged'}")
    if study.figure is not None:
        drawn = study.figure()
        print(f"{_relative(drawn)}: redrawn" if drawn else "no rows yet: no figure")
    return 0


def _relative(path):
    from keras_tse.cli.checkout import lab

    return os.path.relpath(path, lab().ROOT)


def _log(line):
    print(line, flush=True)
