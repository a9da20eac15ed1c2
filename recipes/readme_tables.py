"""Print, check or rewrite the README's generated tables from the committed result files.

Every table of measured numbers in README.md sits between `<!-- generated: NAME -->` and
`<!-- end generated -->` and is the output of the function below for NAME, applied to the committed
file the command that made the numbers wrote. Nobody types those numbers:

    python recipes/readme_tables.py            # rewrite the README's generated blocks
    python recipes/readme_tables.py --check    # exit 1 if any block differs from its result file

| NAME | result file | written by |
|---|---|---|
| demo | zoo/vit24_digits/demo.json | `KERAS_BACKEND=jax keras-tse demo --out runs/demo` (then copied) |
| escalation | zoo/figures/escalation.csv | `KERAS_BACKEND=jax keras-tse escalation --csv zoo/figures/escalation.csv` |
| depth_study | zoo/depth_study/sweep.csv | `KERAS_BACKEND=jax keras-tse sweep --out zoo/depth_study` |
| depth_study_verdicts | zoo/depth_study/sweep.csv | the same |
| bench | zoo/figures/bench_quick_{jax,tensorflow,torch}.json | `KERAS_BACKEND=<b> keras-tse bench --quick --out ...` |
"""

import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n)(.*?)(<!-- end generated -->)", flags=re.S)


def _path(*parts):
    return os.path.join(ROOT, *parts)


def _study_rows():
    sys.path.insert(0, os.path.join(ROOT, "recipes"))
    from depth_study_card import split_by_grid

    from keras_tse.sweep import read_rows

    return split_by_grid(read_rows(_path("zoo", "depth_study", "sweep.csv")))[0]


def render(name):
    """The markdown of generated block `name`, from its committed result file."""
    if name == "demo":
        from keras_tse.demo import markdown_table

        with open(_path("zoo", "vit24_digits", "demo.json")) as f:
            return markdown_table(json.load(f))
    if name == "escalation":
        from keras_tse.escalation import markdown_table, read_csv

        return markdown_table(read_csv(_path("zoo", "figures", "escalation.csv")))
    if name == "depth_study":
        from keras_tse.sweep import best_lr_table

        return best_lr_table(_study_rows())
    if name == "depth_study_verdicts":
        from keras_tse.sweep import verdicts

        return verdicts(_study_rows())
    if name == "bench":
        from keras_tse.bench import markdown_table

        results = {}
        for backend in ("jax", "tensorflow", "torch"):
            with open(_path("zoo", "figures", f"bench_quick_{backend}.json")) as f:
                results[backend] = json.load(f)["results"]
        return markdown_table(results)
    raise ValueError(f"No generated README table is called {name!r}.")


def rewrite(text):
    """`text` with every generated block replaced by its rendering; also the names of the blocks."""
    names = []

    def replace(match):
        names.append(match.group(2))
        return f"{match.group(1)}{render(match.group(2))}\n{match.group(4)}"

    return BLOCK.sub(replace, text), names


def main(argv):
    with open(README) as f:
        text = f.read()
    new, names = rewrite(text)
    if "--check" in argv:
        if new != text:
            print(f"README.md: a generated table differs from its result file (blocks: {', '.join(names)}); "
                  "run python recipes/readme_tables.py", file=sys.stderr)
            return 1
        print(f"README.md: {len(names)} generated tables match their result files ({', '.join(names)})")
        return 0
    with open(README, "w") as f:
        f.write(new)
    print(f"rewrote {len(names)} generated tables: {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
