"""Check or rewrite the generated tables of README.md and the cards from the committed result files.

Every table of measured numbers in README.md, zoo/depth_study.md and zoo/vit24_digits.md sits between
`<!-- generated: NAME -->` and `<!-- end generated -->` and is the output of `render(NAME)`, applied to
the committed file that the command which made the numbers wrote. Nobody types those numbers:

    python -m recipes.lab.generated_tables            # rewrite every generated block
    python -m recipes.lab.generated_tables --check    # exit 1 if any block differs from its result file

| NAME | result file | written by |
|---|---|---|
| demo | zoo/vit24_digits/demo.json | `KERAS_BACKEND=jax keras-tse demo --out runs/demo` (then copied) |
| escalation | zoo/figures/escalation.csv | `KERAS_BACKEND=jax keras-tse escalation --csv zoo/figures/escalation.csv` |
| demo_similarity | zoo/vit24_digits/demo.json | the same |
| depth_study, depth_study_verdicts, depth_study_progress, depth_study_edges, depth_study_ordering, depth_study_cells, depth_study_init | zoo/depth_study/sweep.csv | `KERAS_BACKEND=jax keras-tse sweep --out zoo/depth_study`, then the extension's sweeps merged by `recipes/lab/depth_study_card.py --merge` |
| depth_study_earlier | zoo/depth_study/first_study.csv | the first study's sweep (commits up to 86f315c), kept as written |
| gradients | zoo/depth_study/gradients.csv | `KERAS_BACKEND=jax python -m recipes.lab.deescalation_gradients --csv zoo/depth_study/gradients.csv` |
| bench | zoo/figures/bench_quick_{jax,tensorflow,torch}.json | `KERAS_BACKEND=<b> keras-tse bench --quick --out ...` |
| bench_timm, bench_timm_compiled | zoo/figures/bench_timm_cpu_torch.json, bench_timm_cpu_torch_compiled.json | `KERAS_BACKEND=torch keras-tse bench --quick --peer timm --out ...` (timm installed; the second with `--cases vit_post,timm_post --jit-compile --isolate --budget-s 1200`) |
| STUDY, STUDY_verdicts, STUDY_similarity, ptb_txl16_leak (STUDY one of BENCHMARKS) | zoo/<card>/<study>.json | `python -m recipes.lab.benchmark_results runs/<study> --out zoo/<card>/<study>.json` after the recipe commands of each card |
| ptb_lm_study, ptb_lm_study_verdicts | zoo/ptb_transformer_xl16/lm_study.json and ptb_txl16.json | the commands of the card's language-model study, then `benchmark_results.py` |
| scan_compile | zoo/figures/scan_compile.json | `KERAS_BACKEND=jax python -m recipes.lab.scan_compile_time --depth 80 --out zoo/figures/scan_compile.json` |
| torch_compile | zoo/figures/torch_compile.json | `KERAS_BACKEND=torch python -m recipes.lab.torch_compile_time --modes eager,whole_model --out zoo/figures/torch_compile.json` |
| torch_block_compile_12, torch_block_compile_48 | zoo/figures/torch_block_compile_{12,48}.json | `KERAS_BACKEND=torch python -m recipes.lab.torch_compile_time --modes eager,blocks --depth D --out ...` |
| bench_torch_nn_eager, bench_torch_nn_compiled | zoo/figures/bench_torch_nn_cpu_{eager,compiled}.json | `KERAS_BACKEND=torch keras-tse bench --quick --peer torch --cases vit_post,vit_pre,torch_post,torch_pre --out ...` (the second with `--jit-compile`) |
| depth80_results, depth80_grid, depth80_verdicts | zoo/depth80_fashion_mnist/results.csv | `keras-tse study depth80 --jobs 2` (cell by cell, resumable) |
| tau_sweep | zoo/depth_study/tau_sweep.csv | `keras-tse study tau_sweep --jobs 2` (cell by cell, resumable) |
| ptb_warmup | zoo/ptb_transformer_xl16/warmup_study.csv | `keras-tse study ptb_warmup --jobs 2 [--part deep]` (cell by cell, resumable) |
| shipped_presets, shipped_NAME | keras_tse/zoo/weights/NAME/metadata.json | `KERAS_BACKEND=jax python -m recipes.lab.ship_presets NAME` |
| depth_ladder | zoo/depth80_fashion_mnist/depth_ladder.csv (and results.csv) | `keras-tse study depth_ladder --part cpu --jobs 2` here, `--part gpu` on a GPU machine |
| depth_rates, depth_rates_results, depth_rates_grid, depth_rates_verdicts | zoo/depth80_fashion_mnist/depth_rates.csv | `keras-tse study depth_rates --jobs 2` (cell by cell, resumable) |
| depth_dynamics, depth_dynamics_profiles | zoo/depth80_fashion_mnist/depth_dynamics.json | `KERAS_BACKEND=jax python -m recipes.lab.depth_dynamics --out zoo/depth80_fashion_mnist/depth_dynamics.json` |
| depth_rates320, depth_rates320_results | zoo/depth80_fashion_mnist/depth_rates320.csv | `keras-tse study depth_rates320 --jobs 2` (cell by cell, resumable) |
| bert_ptb, bert_ptb_seeds, bert_ptb_verdicts | zoo/bert_ptb/results.csv | `keras-tse study bert_ptb --jobs 2` (cell by cell, resumable) |
| bert_ptb_pilot | zoo/bert_ptb/pilot_400_steps.csv, pilot_2000_steps.json | the study's first cells, then `train_cell` at `STEPS = 2000` |
| depth_remedies, depth_remedies_results, depth_remedies_verdicts | zoo/depth80_fashion_mnist/depth_remedies.csv | `keras-tse study depth_remedies --jobs 2` (cell by cell, resumable) |
| depth_fixes, depth_fixes_results, depth_fixes_verdicts | zoo/depth80_fashion_mnist/depth_fixes.csv | `keras-tse study depth_fixes --jobs 2` (cell by cell, resumable) |
| vit6_selection | zoo/vit6_fashion_mnist/selection.csv | `keras-tse study vit6_selection --jobs 2` (cell by cell, resumable) |
| recipe_defaults | zoo/depth80_fashion_mnist/recipe_defaults.csv (and results.csv) | `keras-tse study recipe_defaults --jobs 2` (cell by cell, resumable) |
| gpu_fig6 | zoo/gpu/cells.csv, fig6.json, fig6_stopped.json | the GPU's first Fig. 6 runs (`recipes.lab.gpu_cells_card`) |
| gpu_fig7 | zoo/gpu/fig7_paper.csv | `keras-tse study fig7_paper --jobs 3 --budget-s 540 --out "$OUT"` on a GPU machine |
| gpu_speed | zoo/gpu/speed_paper.csv and zoo/gpu/returned/*_bench_*.json | `keras-tse study speed_paper --jobs 1 --budget-s 540 --out "$OUT"` on a GPU machine |
| gpu_profile | zoo/gpu/returned/*_profile_*.json | `KERAS_BACKEND=jax python3 tests/gpu_profile.py OUT.json --variants V` on a GPU machine |
| verdict_rates | zoo/figures/verdict_rates.json | `python -m recipes.lab.verdict_rates` |
| remat_memory | zoo/figures/remat_memory.json | `KERAS_BACKEND=jax python -m recipes.lab.remat_memory --depths 48,80 --out zoo/figures/remat_memory.json` |
| generation_speed | zoo/figures/generation_speed.json | `KERAS_BACKEND=jax python -m recipes.lab.generation_speed --out zoo/figures/generation_speed.json` |
| generation_gpt4_ptb | zoo/figures/generation_gpt4_ptb.json | `KERAS_BACKEND=jax python -m recipes.lab.generation_speed --preset gpt4_ptb --out zoo/figures/generation_gpt4_ptb.json` |
| generation_batches | zoo/figures/generation_batches.json | `for b in jax tensorflow torch; do KERAS_BACKEND=$b python -m recipes.lab.generation_speed --batches --out zoo/figures/generation_batches.json; done` |
| stream_memory | zoo/figures/stream_memory.json | `KERAS_BACKEND=jax python -m recipes.lab.stream_memory --images 50000 --image-size 192 --out zoo/figures/stream_memory.json` |
| text_memory | zoo/figures/text_memory_1m.json, text_memory.json | `KERAS_BACKEND=jax python -m recipes.lab.text_memory --tokens N --out F` for N = 1,000,000 and 100,000,000 |
| remat_ladder | zoo/figures/remat_ladder.json | `KERAS_BACKEND=jax python -m recipes.lab.remat_memory --depths 320,640,1000 --out zoo/figures/remat_ladder.json` |
| quantized_PRESET | zoo/figures/quantized_presets.json | `KERAS_BACKEND=jax python -m recipes.lab.quantized_presets --out zoo/figures/quantized_presets.json` |
| ci | tests/ci_times.json | `CI=true bash .ci/run > ci.log 2>&1`, then `python tests/ci_times.py ci.log ...` |
"""

import importlib
import json
import os
import re
import sys

from keras_tse.run_files import write_text
from recipes.lab import ROOT  # noqa: E402

# Every document of the project whose generated blocks are drawn here: the READMEs and every card of zoo/ (a new
# card is one more, found here).
DOCUMENTS = (
    "README.md",
    os.path.join("tests", "README.md"),
    *sorted(os.path.join("zoo", name) for name in os.listdir(os.path.join(ROOT, "zoo")) if name.endswith(".md")),
)
# The depth study's blocks, each a function of its rows: block name -> (module, function).
DEPTH_STUDY_BLOCKS = {
    "depth_study": ("recipes.lab.sweep", "best_lr_table"),
    "depth_study_verdicts": ("recipes.lab.sweep", "verdicts"),
    "depth_study_ordering": ("recipes.lab.sweep", "orderings"),
    "depth_study_cells": ("recipes.lab.sweep", "markdown_table"),
    "depth_study_progress": ("recipes.lab.depth_study_card", "progress"),
    "depth_study_edges": ("recipes.lab.depth_study_card", "edges_summary"),
    "depth_study_init": ("recipes.lab.depth_study_card", "initial_profile"),
}
# The benchmark studies: name -> the result file benchmark_results.py wrote from its run folders.
BENCHMARKS = {
    "fmnist_vit24": os.path.join("zoo", "fashion_mnist_vit", "fmnist_vit24.json"),
    "fmnist_vit48": os.path.join("zoo", "fashion_mnist_vit", "fmnist_vit48.json"),
    "ptb_txl16": os.path.join("zoo", "ptb_transformer_xl16", "ptb_txl16.json"),
    "gpt_ptb_d8": os.path.join("zoo", "gpt8_small", "gpt_ptb_d8.json"),
}
# The language-model study's arms, beside ptb_txl16 (`zoo/ptb_transformer_xl16.md`, "Where and how much").
LM_STUDY = ("zoo", "ptb_transformer_xl16", "lm_study.json")
# The bench runs shown case by case: block name -> the `keras-tse bench --out` JSON in zoo/figures/.
BENCH_RUNS = {
    "bench_timm": "bench_timm_cpu_torch.json",
    "bench_timm_compiled": "bench_timm_cpu_torch_compiled.json",
    "bench_torch_nn_eager": "bench_torch_nn_cpu_eager.json",
    "bench_torch_nn_compiled": "bench_torch_nn_cpu_compiled.json",
}
# The compile-time measurements: block name (= the JSON's name in zoo/figures/) -> the recipe that wrote it.
TIMING_RECIPES = {
    "scan_compile": "scan_compile_time",
    "torch_compile": "torch_compile_time",
    "torch_block_compile_12": "torch_compile_time",
    "torch_block_compile_48": "torch_compile_time",
}
BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n)(.*?)(<!-- end generated -->)", flags=re.S)


def _path(*parts):
    return os.path.join(ROOT, *parts)


def _generator(name):
    """Another generator of the lab (or tests/ci_times.py, beside the file it writes)."""
    if name != "ci_times":
        return importlib.import_module(f"recipes.lab.{name}")
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    try:
        return importlib.import_module(name)
    finally:
        del sys.path[0]


def depth_study_rows():
    """The committed sweep's rows of the committed grid."""
    from recipes.lab.sweep import read_rows

    return _generator("depth_study_card").split_by_grid(read_rows(_path("zoo", "depth_study", "sweep.csv")))[0]


def _first_study():
    """The first study's rows (Glorot only, the sweep code of commits up to 86f315c), kept as they were written."""
    from recipes.lab.sweep import read_rows

    return read_rows(_path("zoo", "depth_study", "first_study.csv"))


def _demo():
    with open(_path("zoo", "vit24_digits", "demo.json")) as f:
        return json.load(f)


def _lm_study():
    with open(_path(*LM_STUDY)) as f:
        return json.load(f)


def benchmark(study):
    """A committed benchmark-study result file (`recipes/lab/benchmark_results.py`)."""
    with open(_path(BENCHMARKS[study])) as f:
        return json.load(f)


def render(name):
    """The markdown of generated block `name`, from its committed result file: a block a study declares
    (`Study.tables`) from that study's rows, else the block's own generator below."""
    for study in _generator("engine").studies().values():
        if name in study.tables:
            return study.tables[name](study.read_rows())
    for suffix, function in (("_verdicts", "verdicts"), ("_similarity", "similarity_table"), ("_leak", "leak_table")):
        if name.endswith(suffix) and name[: -len(suffix)] in BENCHMARKS:
            return getattr(_generator("benchmark_results"), function)(benchmark(name[: -len(suffix)]))
    if name in BENCHMARKS:
        return _generator("benchmark_results").markdown_table(benchmark(name))
    if name in ("ptb_lm_study", "ptb_lm_study_verdicts"):
        function = "study_table" if name == "ptb_lm_study" else "study_verdicts"
        return getattr(_generator("benchmark_results"), function)(benchmark("ptb_txl16"), _lm_study())
    if name == "demo":
        from keras_tse.training.demo import markdown_table

        return markdown_table(_demo())
    if name == "demo_similarity":
        from keras_tse.training.demo import similarity_table

        return similarity_table(_demo())
    if name == "escalation":
        from keras_tse.analysis.escalation import markdown_table, read_csv

        return markdown_table(read_csv(_path("zoo", "figures", "escalation.csv")))
    if name in DEPTH_STUDY_BLOCKS:
        module, function = DEPTH_STUDY_BLOCKS[name]
        return getattr(importlib.import_module(module), function)(depth_study_rows())
    if name == "depth_study_earlier":
        from recipes.lab.sweep import markdown_table

        return markdown_table(_first_study())
    if name == "gradients":
        return _generator("deescalation_gradients").markdown_table(_path("zoo", "depth_study", "gradients.csv"))
    if name == "bench":
        from keras_tse.training.benchmark import markdown_table

        results = {}
        for backend in ("jax", "tensorflow", "torch"):
            with open(_path("zoo", "figures", f"bench_quick_{backend}.json")) as f:
                results[backend] = json.load(f)["results"]
        return markdown_table(results)
    if name in BENCH_RUNS:
        from keras_tse.training.benchmark import cases_table

        with open(_path("zoo", "figures", BENCH_RUNS[name])) as f:
            return cases_table(json.load(f)["results"])
    if name in TIMING_RECIPES:
        with open(_path("zoo", "figures", f"{name}.json")) as f:
            return _generator(TIMING_RECIPES[name]).markdown_table(json.load(f))
    if name == "shipped_presets":
        return _generator("ship_presets").markdown_table()
    if name.startswith("shipped_"):
        return _generator("ship_presets").markdown_table([name[len("shipped_") :]])
    if name == "bert_ptb_pilot":
        return _generator("bert_ptb_study").pilot_table()
    if name == "bert_ptb_seeds":
        study = _generator("bert_ptb_study")
        return study.seeds_tables(study.STUDY.read_rows())
    if name == "bert_ptb_verdicts":
        study = _generator("bert_ptb_study")
        return study.verdicts_table(study.STUDY.read_rows())
    if name == "gpu_fig6":
        return _generator("gpu_cells_card").fig6_block()
    if name == "gpu_profile":
        return _generator("gpu_cells_card").profile_block() or "Not measured."
    if name == "generation_speed":
        with open(_path("zoo", "figures", "generation_speed.json")) as f:
            return _generator("generation_speed").markdown_table(json.load(f))
    if name in ("depth_dynamics", "depth_dynamics_profiles"):
        with open(_path("zoo", "depth80_fashion_mnist", "depth_dynamics.json")) as f:
            results = json.load(f)
        table = "markdown_table" if name == "depth_dynamics" else "profile_table"
        return getattr(_generator("depth_dynamics"), table)(results)
    if name == "generation_gpt4_ptb":
        with open(_path("zoo", "figures", "generation_gpt4_ptb.json")) as f:
            return _generator("generation_speed").preset_table(json.load(f))
    if name == "generation_batches":
        with open(_path("zoo", "figures", "generation_batches.json")) as f:
            return _generator("generation_speed").batches_table(json.load(f))
    if name == "stream_memory":
        with open(_path("zoo", "figures", "stream_memory.json")) as f:
            return _generator("stream_memory").markdown_table(json.load(f))
    if name == "text_memory":
        sizes = []
        for file in ("text_memory_1m.json", "text_memory.json"):
            with open(_path("zoo", "figures", file)) as f:
                sizes.append(json.load(f))
        return _generator("text_memory").markdown_table(sizes)
    if name in ("remat_memory", "remat_ladder"):
        with open(_path("zoo", "figures", f"{name}.json")) as f:
            return _generator("remat_memory").markdown_table(json.load(f))
    if name == "verdict_rates":
        with open(_path("zoo", "figures", "verdict_rates.json")) as f:
            return _generator("verdict_rates").markdown_table(json.load(f)["rates"])
    if name.startswith("quantized_"):
        with open(_path("zoo", "figures", "quantized_presets.json")) as f:
            return _generator("quantized_presets").markdown_table(json.load(f), [name[len("quantized_") :]])
    if name == "ci":
        ci_times = _generator("ci_times")
        records = ci_times.read()
        return ci_times.markdown_table(records[-1:]) + "\n\n" + ci_times.spread(records)  # the latest run
    raise ValueError(f"No generated README table is called {name!r}.")


def rewrite(text):
    """`text` with every generated block replaced by its rendering; also the names of the blocks."""
    names = []

    def replace(match):
        names.append(match.group(2))
        return f"{match.group(1)}{render(match.group(2))}\n{match.group(4)}"

    return BLOCK.sub(replace, text), names


def main(argv):
    stale = []
    for document in DOCUMENTS:
        with open(_path(document)) as f:
            text = f.read()
        new, names = rewrite(text)
        if "--check" not in argv:
            write_text(_path(document), new)
            print(f"{document}: rewrote {len(names)} generated tables ({', '.join(names)})")
        elif new != text:
            stale.append(document)
            print(
                f"{document}: a generated table differs from its result file; run python -m recipes.lab.generated_tables",
                file=sys.stderr,
            )
        else:
            print(f"{document}: {len(names)} generated tables match their result files ({', '.join(names)})")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
