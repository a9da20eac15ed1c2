"""The verdict rule's error rates and power, by simulation: how often it names a winner between two
identical arms, how often it calls arms a minimum effect apart equivalent, and how often it finds a gap
of one and two standard deviations, at 3, 5 and 8 seeds, unpaired (Welch) and paired (seeds sharing half
their variance), with the minimum effect at half a standard deviation. zoo/README.md's rule section
prints the file this writes; tests/test_verdicts.py draws them again and checks them.

    python -m recipes.lab.verdict_rates --out zoo/figures/verdict_rates.json
"""

import argparse
import os

from keras_tse import run_files
from recipes.lab import ROOT, verdicts

SEEDS = (3, 5, 8)
DRAWS = 2000
MIN_EFFECT = 0.5  # in units of the seeds' standard deviation
RESULTS = os.path.join(ROOT, "zoo", "figures", "verdict_rates.json")


def measure(seeds, paired, draws=DRAWS):
    """The rates of one setting: false winners between identical arms, false equivalence at the minimum
    effect, and the power at gaps of 1 and 2 standard deviations."""

    def rates(gap):
        return verdicts.verdict_rates(seeds, gap, min_effect=MIN_EFFECT, paired=paired, draws=draws)

    null, boundary = rates(0.0), rates(MIN_EFFECT)
    return {
        "seeds": seeds,
        "paired": paired,
        "false_winner": null[verdicts.BEATS] + null[verdicts.LOSES],
        "false_equivalent": boundary[verdicts.EQUIVALENT],
        "power_1sd": rates(1.0)[verdicts.BEATS],
        "power_2sd": rates(2.0)[verdicts.BEATS],
    }


def measure_all(draws=DRAWS):
    return [measure(seeds, paired, draws) for paired in (False, True) for seeds in SEEDS]


def markdown_table(records):
    lines = [
        "| seeds an arm | pairing | false winner, identical arms | false equivalent, arms 0.5 sd apart | "
        "power at 1 sd | power at 2 sd |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in records:
        cells = [f"{100 * r[k]:.1f}%" for k in ("false_winner", "false_equivalent", "power_1sd", "power_2sd")]
        lines.append(f"| {r['seeds']} | {'paired' if r['paired'] else 'Welch'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n{DRAWS:,} draws a cell, minimum effect 0.5 sd (`{os.path.relpath(RESULTS, ROOT)}`)."


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m recipes.lab.verdict_rates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=RESULTS, help="the JSON file to write (default: %(default)s)")
    args = parser.parse_args(argv)
    records = measure_all()
    run_files.write_json(args.out, {"draws": DRAWS, "min_effect_sd": MIN_EFFECT, "rates": records}, indent=1)
    print(markdown_table(records))


if __name__ == "__main__":
    main()
