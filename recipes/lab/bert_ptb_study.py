"""KerasHub's BERT, post-norm as published, against `keras_tse.deescalate` of the same model and against its
pre-norm twin (`normalize_first=True`), at 24 and 48 layers, on masked-word prediction over Penn Treebank;
each arm's rate bracketed on seed 0 by validation loss, then verdict seeds 1-5 there. Resumable cell by cell.

    nice -n 19 keras-tse study bert_ptb [--jobs 2] [--part 24|48] [--runs runs/bert_ptb]

Each cell is one process (`recipes/lab/bert_ptb_cell.py`, JAX backend, the step compiled) that builds
`keras_hub.models.BertBackbone` (width 32, 2 heads, FFN 128, 32 tokens, random weights), makes the arm's model
from it, trains a masked-word head (`keras_hub.layers.MaskedLMHead`, tied to the token embedding) for
`STEPS` steps through the runner every recipe uses (validated and backed up every 500 steps: a killed cell
resumes there) and writes its `summary.json`; a finished cell becomes one row of `zoo/bert_ptb/results.csv`.
One backend for every cell wherever it runs, so that rows from a CPU and a GPU compare: JAX, because on a
GPU one compiled step beats eager per-op launches, while on the 2-core CPU the two are alike (24 layers,
batch 128: 0.31 s a step compiled under JAX, 0.27 s eager under PyTorch).
The token ids go to the backbone directly (KerasHub's tokenizers need TensorFlow Text): Penn Treebank's
`VOCABULARY` most frequent training words (`<eos>` and `<unk>` among them, every rarer word read as `<unk>`),
plus one id for the mask.

Choices where the issue and the paper are silent:
- the cell's size, from the pilots (`PILOTS`, the card's first table): at all 10,000 words no cell of this
  width, 2 layers or 24, got 0.15 nat below the words' unigram entropy in 2,000 steps of batch 32 or 128;
  with the 2,000 most frequent words and batch 128 a 2-layer cell leaves the unigram plateau after about
  2,000 steps and at 8,000 (lr 3e-3) is 1.35 nats below it. A comparison of depths needs a cell whose
  shallow model learns context, so: 2,000 words, batch 128, 8,000 steps;
- the data: the training text cut into 32-word windows at random offsets; in each window 5 positions (15.6%,
  BERT's 15%) drawn at random and replaced by the mask id (always the mask: BERT's 80/10/10 replacement
  mixes in a fine-tuning concern this comparison does not need); validation and test: 512 windows each of
  their split, one fixed draw of positions (seed 1234), the mean cross-entropy of the masked words;
- the training: AdamW (weight decay 0.01, BERT's), gradient norm clipped at 1, the rate decayed by a cosine
  to 0 over `STEPS` steps of batch 128, no warmup (warmup is the other known remedy: one variable at a
  time), dropout 0 (short runs whose losses are compared);
- the pre-norm twin is the same backbone with every `TransformerEncoder` rebuilt with `normalize_first=True`
  (the masked-word head's own layer norm normalizes its input, so no final norm is added);
- de-escalation: `keras_tse.deescalate(backbone)` with tau 1 (eq. 21 after every encoder block, Sec. 3.3);
- the best rate is the one of lowest validation loss on seed 0; the verdicts compare test loss on seeds 1-5
  (`recipes/lab/verdicts.py`, minimum effect 0.03 nats).
"""

import json
import os
import sys

from recipes.lab import ROOT, engine
from recipes.lab.engine import spread

RESULTS = os.path.join(ROOT, "zoo", "bert_ptb", "results.csv")
WIDTH, HEADS, FFN, TOKENS, MASKED = 32, 2, 128, 32, 5
STEPS, BATCH, EVAL_WINDOWS, VOCABULARY = 8000, 128, 512, 2000
DEPTHS = (24, 48)
BACKEND = "jax"
LAYOUTS = ("post", "deescalate", "pre")
ARMS = {f"{layout}_{depth}": (layout, depth) for depth in DEPTHS for layout in LAYOUTS}
SEEDS = (0, 1, 2, 3, 4, 5)  # seed 0 chooses the rate; the verdicts rest on seeds 1-5 (zoo/README.md)
# The 2-layer pilot's rate that learns (3e-3) and the one below; the bracket grows past an end that holds the
# best (`engine.Plan.max_extensions`), so a rate above a failing one is run only where the failing one is best.
GRID = (1e-3, 3e-3)
PARTS = {
    str(depth): (engine.Plan(tuple(f"{layout}_{depth}" for layout in LAYOUTS), GRID, SEEDS, select_by="valid_loss"),
                 f"the {depth}-layer arms")
    for depth in DEPTHS
}  # fmt: skip
FIELDS = (
    "arm", "layout", "depth", "learning_rate", "seed", "steps", "train_loss", "valid_loss", "test_loss",
    "test_accuracy", "similarity_init", "similarity_end", "loss_curve", "seconds", "backend", "machine",
)  # fmt: skip
QUESTIONS = engine.questions("""
    deescalate_24  post_24  at 24 layers: de-escalation against post-norm as published
    deescalate_24  pre_24   at 24 layers: de-escalation against the pre-norm twin
    pre_24         post_24  at 24 layers: pre-norm against post-norm
    deescalate_48  post_48  at 48 layers: de-escalation against post-norm as published
    deescalate_48  pre_48   at 48 layers: de-escalation against the pre-norm twin
    pre_48         post_48  at 48 layers: pre-norm against post-norm
""")


def run_cell(runs, arm, learning_rate, seed):
    """One cell's process (`recipes/lab/bert_ptb_cell.py`: a killed one resumes from its last `CHUNK` of steps);
    its row."""
    out = os.path.join(runs, f"{arm}_lr{learning_rate:g}_s{seed}")
    layout, depth = ARMS[arm]
    cell = [out, layout, str(depth), f"{learning_rate:g}", str(seed)]
    seconds = engine.run_process([sys.executable, "-m", "recipes.lab.bert_ptb_cell", *cell], out + ".log",
                                 f"{arm} seed {seed}", backend=BACKEND)  # fmt: skip
    summary = engine.read_summary(out)
    return {
        "arm": arm, "layout": layout, "depth": depth, "learning_rate": f"{learning_rate:g}", "seed": seed,
        **{k: summary[k] for k in FIELDS[5:13]}, "seconds": seconds, "backend": BACKEND,
        "machine": summary["machine"],
    }  # fmt: skip


def markdown_table(rows):
    """One line per arm at its best rate (verdict seeds' means, min-max); "not run" before any row."""
    lines = [
        "| layers | layout | best lr (seed 0, valid loss) | rates tried | verdict seeds | test loss | "
        "masked-word accuracy (%) | similarity, last block, init -> end |",
        "|---:|---|---:|---|---:|---:|---:|---|",
    ]
    for arm, (layout, depth) in ARMS.items():
        rate, at_best = engine.at_best(rows, arm, PARTS[str(depth)][0])
        tried = sorted({float(r["learning_rate"]) for r in rows if r["arm"] == arm and int(r["seed"]) == 0})
        if rate is None:
            lines.append(f"| {depth} | {layout} | not run | | 0 | | | |")
            continue
        seeds = [r for r in at_best if int(r["seed"]) != engine.SELECTION_SEED] or at_best
        label = "" if seeds is not at_best else " (seed 0 only)"
        pending = engine.next_cells(rows, arm, PARTS[str(depth)][0])
        best = f"{rate:g}" + (" so far" if any(seed == engine.SELECTION_SEED for _, seed in pending) else "")
        loss = spread([float(r["test_loss"]) for r in seeds], 3)
        accuracy = spread([100 * float(r["test_accuracy"]) for r in seeds], 2)
        similarity = f"{spread([float(r['similarity_init']) for r in seeds], 3)} -> "
        similarity += spread([float(r["similarity_end"]) for r in seeds], 3)
        rates = "/".join(f"{t:g}" for t in tried)
        lines.append(
            f"| {depth} | {layout} | {best} | {rates} | {len(seeds)}{label} | {loss} | {accuracy} | {similarity} |"
        )
    measured = f"{len(rows)} cell{'s' * (len(rows) != 1)} measured (`zoo/bert_ptb/results.csv`)."
    return "\n".join(lines) + f"\n\n{measured}{cell_times(rows)}"


def cell_times(rows):
    """A cell's time as its rows recorded it (compile, validation and similarity included), by depth and machine:
    what the next cell of that kind will cost there."""
    kinds = sorted({(int(r["depth"]), r["backend"], r["machine"]) for r in rows})
    times = []
    for depth, backend, machine in kinds:
        cells = [r for r in rows if (int(r["depth"]), r["backend"], r["machine"]) == (depth, backend, machine)]
        seconds = sorted(float(r["seconds"]) for r in cells)
        span = f"{seconds[0]:,.0f}" + (f"-{seconds[-1]:,.0f}" if len(cells) > 1 else "")
        per_step = spread([float(r["seconds"]) / int(r["steps"]) for r in cells], 2)
        kind = f"{depth} layers, {backend}, {machine}"
        times.append(f"{kind}: {span} s a cell ({per_step} s a step; {len(cells)} of them)")
    return " A cell's time, from its row: " + "; ".join(times) + "." if times else ""


PILOTS = (
    os.path.join(ROOT, "zoo", "bert_ptb", "pilot_400_steps.csv"),
    os.path.join(ROOT, "zoo", "bert_ptb", "pilot_2000_steps.json"),
    os.path.join(ROOT, "zoo", "bert_ptb", "pilot_vocabulary.json"),
)
FIRST_PLAN = {"vocabulary": 10000, "batch": 32}  # the pilots' first cell, before VOCABULARY and BATCH were chosen


def pilot_rows():
    """Every pilot cell as a row: the 400-step grid's seed-0 rows, the 2,000-step cells, the vocabulary pilots."""
    rows = [{**FIRST_PLAN, **r} for r in engine.read_rows(PILOTS[0])]
    for path in PILOTS[1:]:
        with open(path) as f:
            rows += [{**FIRST_PLAN, "arm": arm, **cell} for arm, cell in json.load(f)["cells"].items()]
    return rows


def pilot_table():
    """The pilot cells, one line each."""
    lines = [
        "| cell | words | batch | lr | steps | valid loss | test loss | masked-word accuracy | "
        "similarity, last block, init -> end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in pilot_rows():
        arm = f"{r['layout']}_{r['depth']}" if "layout" in r else r["arm"]
        arm += f", width {r['width']}" if int(r.get("width", WIDTH)) != WIDTH else ""
        numbers = [f"{float(r[c]):.3f}" for c in ("valid_loss", "test_loss")] + [
            f"{100 * float(r['test_accuracy']):.2f}%"
        ]
        similarity = f"{float(r['similarity_init']):.3f} -> {float(r['similarity_end']):.3f}"
        lines.append(
            f"| {arm} | {r['vocabulary']} | {r['batch']} | {float(r['learning_rate']):g} | {r['steps']} | "
            f"{' | '.join(numbers)} | {similarity} |"
        )
    return "\n".join(lines)


def seeds_tables(rows):
    """`seeds_table` of each depth that has a row; a line for each that has none."""
    blocks = []
    for depth in DEPTHS:
        run = any(int(r["depth"]) == depth for r in rows)
        blocks.append(f"{depth} layers:\n\n{seeds_table(rows, depth)}" if run else f"{depth} layers: not run.")
    return "\n\n".join(blocks)


def seeds_table(rows, depth):
    """Every seed at each arm's rate, side by side: each arm's test loss and the last block's similarity
    (init -> end), then the questions' paired differences in test loss (A - B, nats: below 0, A ends lower),
    the values the verdicts rank. Seed 0 chose the rates and is marked: the verdicts leave it out."""
    arms = [f"{layout}_{depth}" for layout in LAYOUTS]
    best = {arm: engine.at_best(rows, arm, PARTS[str(depth)][0]) for arm in arms}
    cell = {(arm, int(r["seed"])): r for arm, (_, members) in best.items() for r in members}
    pairs = [(a, b) for a, b, _ in QUESTIONS if {a, b} <= set(arms)]
    header = [f"{arm} at {rate:g}" if rate is not None else f"{arm} (not run)" for arm, (rate, _) in best.items()]
    header += [f"{a} - {b}" for a, b in pairs]
    lines = ["| seed | " + " | ".join(header) + " |", "|---:|" + "---:|" * len(header)]
    for seed in SEEDS:
        if not any((arm, seed) in cell for arm in arms):
            continue
        values = [_seed_cell(cell.get((arm, seed))) for arm in arms]
        values += [_difference(cell.get((a, seed)), cell.get((b, seed))) for a, b in pairs]
        label = f"{seed} (chose the rates)" if seed == engine.SELECTION_SEED else str(seed)
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def _seed_cell(row):
    """A seed's test loss (the last block's similarity, init -> end), or nothing before its row."""
    if row is None:
        return ""
    return f"{float(row['test_loss']):.3f} ({float(row['similarity_init']):.3f} -> {float(row['similarity_end']):.3f})"


def _difference(a, b):
    """Test loss of row `a` less row `b`'s, or nothing until both rows are there."""
    return "" if a is None or b is None else f"{float(a['test_loss']) - float(b['test_loss']):+.2f}"


def family(rows):
    """The card's verdict family: (A, B, "test_loss", `Comparison`) of each question whose arms have their
    verdict seeds, each arm at its best rate. A diverged seed counts as worse than any finite one: the rank
    test decides (a model that predicts the words' frequencies is no floor a diverged run would reach)."""
    from recipes.lab import verdicts

    best = {arm: engine.at_best(rows, arm, PARTS[str(depth)][0]) for arm, (_, depth) in ARMS.items()}
    found = []
    for a, b, _ in QUESTIONS:
        seeds = [engine.verdict_seeds(best[arm][1], "test_loss") for arm in (a, b)]
        if min(map(len, seeds)) >= verdicts.MIN_SEEDS:
            found.append((a, b, "test_loss", verdicts.measure_seeds(*seeds, metric="test_loss")))
    return found


def verdicts_table(rows):
    """The card's questions, each arm at its best rate, decided on test loss over the verdict seeds (one family);
    beside each verdict the seeds' difference A - B and the gap they could see (`Comparison.smallest_visible_effect`:
    found 80% of the time at 5%, asked alone)."""
    from recipes.lab import verdicts

    found = family(rows)
    measured = {(a, b): c for a, b, _, c in found}
    said = dict(zip(measured, verdicts.stated(list(measured.values()))))
    lines = [
        "| question | A | B | on test loss (verdict seeds 1-5, one family) | A - B, nats | "
        "smallest gap visible, nats |",
        "|---|---|---|---|---:|---:|",
    ]
    for a, b, question in QUESTIONS:
        verdict = verdicts.table_cell(said.get((a, b), "not measured"))
        c = measured.get((a, b))  # its estimate favours A when positive: A's loss less B's is its negative
        gaps = "| | |" if c is None else f"| {-c.estimate:+.2f} | {c.smallest_visible_effect():.2f} |"
        lines.append(f"| {question} | {a} | {b} | {verdict} {gaps}")
    return "\n".join(lines)


def figure(rows):
    """Training-loss curves (50-step means) of every arm at its best rate, a panel a depth: the card's figure."""
    from keras_tse.run_files import new_figure, save_figure

    path = os.path.join(ROOT, "zoo", "bert_ptb", "curves.png")
    if not rows:
        return None
    fig, axes = new_figure((10, 3.6), ncols=len(DEPTHS))
    for ax, depth in zip(axes, DEPTHS):
        for layout in LAYOUTS:
            rate, members = engine.at_best(rows, f"{layout}_{depth}", PARTS[str(depth)][0])
            for i, row in enumerate(members):
                curve = [float(v) for v in row["loss_curve"].split(";")]
                steps = [50 * (k + 1) for k in range(len(curve))]
                label = f"{layout} (lr {rate:g})" if i == 0 else None
                ax.plot(steps, curve, color=COLOURS[layout], alpha=0.6, label=label)
        ax.set(title=f"{depth} layers", xlabel="step", ylabel="masked-word training loss (50-step mean)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        else:  # an empty panel says so, rather than show axes that read as a measurement
            ax.text(0.5, 0.5, "not run yet", ha="center", va="center", transform=ax.transAxes, color="grey")
            ax.set(xticks=[], yticks=[])
    save_figure(fig, path)
    return path


COLOURS = {"post": "tab:red", "deescalate": "tab:blue", "pre": "tab:green"}
TITLE = "KerasHub's BERT on Penn Treebank masked words: post-norm, de-escalated and pre-norm at 24 and 48 layers"
CLAIM_METRIC = "test_loss"  # what a verdict claim about its arms is judged on (recipes/lab/verdict_claims.py)
CARD = os.path.join(ROOT, "zoo", "bert_ptb.md")
STUDY = engine.study_of(
    sys.modules[__name__], figure=lambda: figure(STUDY.read_rows()), families=lambda rows: [family(rows)]
)
