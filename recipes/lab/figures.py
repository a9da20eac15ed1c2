"""The analysis figures of Yu & Zhang, Sec. 2 and 3.2, regenerated: each a CSV of its numbers and a PNG.

- Fig. 1: 100-block BERT and ALBERT (KerasHub backbones, default initialisation, base widths):
  token and cosine similarity after each block, and BERT's per-block gradient norm (`figure_1`).

Settings (Sec. 2.4): ViT blocks of Algorithm 1 with n = 64 tokens, d = 512, h = 8 heads, alpha = 1,
inputs X ~ N(0, 1), fresh weights per trial (the value kernels' Glorot variance 2/(d + d) = 1/d is
the paper's N(0, I/d); FFN width 2048 = 4d, which the paper does not state).

- Fig. 2: per block, over `trials` trials: token similarity of the block input, xi_1/xi_2 of each
  of the four steps of Algorithm 1, and delta, omega (eq. 12) averaged over the heads.
- Fig. 3: one forward pass fixes X and P at every block; `draws` draws of W ~ N(0, I/d) (per head,
  d x d/h) in step 1 only give the sample means of xi_1/xi_2 - 1 and r(X, Y), beside Estimate 1
  (from (16)) and Estimate 2 (from (17)). For h heads the estimates use the head averages of
  (1 - omega_k)^2, delta_k^2 and |lambda_2(P_k)|^2, the averaged bounds after Proposition 9.
- Fig. 4 (left two plots): pre-norm blocks (eq. 19): token similarity of each block input and the
  Frobenius norms of X, LN(X) and the attention branch, mean over `trials` (depth 40; the LLM
  plots on its right need pretrained weights and are not reproduced).
- Fig. 5: token diversity after each of 40 blocks with de-escalation (eq. 21) at each block output,
  tau in {0, 0.1, ..., 0.5}, mean of `trials` runs (the same weights for every tau within a run).
- Fig. 8 (arXiv v2): mean of eta = E[xi_1]/E[xi_2] - xi_1/xi_2 over 50 draws of W ~ N(0, I/d),
  Y = X + P X W, X = e v^T + t Q (n = 100, d in {10, 20, 40}), P from the softmax formula (2) with
  fixed random query/key maps; E[xi_i] = 1 + mu_i^2 by Lemma 4 (alpha = 1, d sigma^2 = 1).

`quick=True` shrinks trial counts (and depths) so that every figure runs in seconds. Each CSV's first
line (`# ...`) and each PNG's caption name the settings that made them; a `<column>_sd` column is the
standard deviation over the trials (or draws) whose mean is `<column>`, drawn as a band.
"""

import csv
import inspect
import os
import textwrap

import keras
import numpy as np
from keras import ops

from keras_tse import run_files
from keras_tse.analysis import spectral
from keras_tse.analysis.similarity import escalation_rate, token_diversity, token_similarity
from keras_tse.layers import PostNormBlock, PreNormBlock

N, D, H, FFN = 64, 512, 8, 2048


def _bar(total, verbose):
    """Keras' progress bar over a figure's outer loop; silent unless `verbose` (the CLI's is on)."""
    return keras.utils.Progbar(total, verbose=1 if verbose else 0)


def _trials(trials, seed, verbose):
    """Per trial: `(trial, X)`, Keras' seed set first (the trial's fresh weights) and X ~ N(0, 1) of
    shape [1, n, d] (Sec. 2.4); a progress bar over the trials."""
    bar = _bar(trials, verbose)
    for trial in range(trials):
        keras.utils.set_random_seed(seed + trial)
        x = np.random.default_rng(seed + trial).standard_normal((1, N, D)).astype("float32")
        yield trial, ops.convert_to_tensor(x)
        bar.add(1)


def _mean_sd(values, names, axis=0):
    """{name: mean over `axis`, name_sd: standard deviation over it}, one per last-axis column."""
    mean, sd = values.mean(axis=axis), values.std(axis=axis)
    return {k: v for i, n in enumerate(names) for k, v in ((n, mean[..., i]), (f"{n}_sd", sd[..., i]))}


def _np(x):
    return np.asarray(ops.convert_to_numpy(x), dtype="float64")


def _block(ffn_dim=FFN, x_shape=(1, N, D), **kwargs):
    block = PostNormBlock(H, ffn_dim, **kwargs)
    block.build(x_shape)
    return block


def _steps(block, x):
    """Algorithm 1 step by step: (P, [X, Y1, Y2, Y3, Y4])."""
    steps = block.steps(x, return_attention_scores=True)
    return steps["scores"][0], [x, *(steps[k] for k in ("y1", "y2", "y3", "y4"))]


def _xi_ratio(x, y):
    xi1, xi2 = spectral.xi(x, y)
    return _np(xi1 / xi2)[0]


def figure_1(
    depth=100,
    hidden_dim=768,
    num_heads=12,
    intermediate_dim=3072,
    vocabulary_size=30522,
    embedding_dim=128,
    sequence_length=128,
    batch_size=2,
    seed=0,
    verbose=0,
):
    """BERT and ALBERT (KerasHub backbones, their default initialisation) with `depth` blocks: per
    block, t_sim and t_cos of both, and for BERT the norm of the gradient w.r.t. the block's weights
    for the cross-entropy of a fresh 2-class head on the pooled output with random labels (the paper
    does not say which loss; like the paper, no gradient for ALBERT, whose blocks share weights)."""
    try:
        import keras_hub
    except ImportError as error:
        raise ValueError(
            "Fig. 1 builds BERT with KerasHub: pip install keras-hub (or the `figures` extra). "
            "Received: which includes '1' without keras_hub installed"
        ) from error
    from keras_tse.analysis.gradients import block_gradient_norms
    from keras_tse.analysis.similarity import (
        block_outputs_model,
        cosine_similarity,
        measure_blocks,
    )

    bar = _bar(3, verbose)  # ALBERT's similarity, BERT's, BERT's gradients
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    inputs = {
        "token_ids": rng.integers(0, vocabulary_size, (batch_size, sequence_length)).astype("int32"),
        "segment_ids": np.zeros((batch_size, sequence_length), "int32"),
        "padding_mask": np.ones((batch_size, sequence_length), "int32"),
    }
    common = dict(
        vocabulary_size=vocabulary_size,
        num_layers=depth,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=intermediate_dim,
        max_sequence_length=max(512, sequence_length),
    )
    albert = keras_hub.models.AlbertBackbone(embedding_dim=embedding_dim, **common)
    albert_sim, albert_cos = measure_blocks(
        block_outputs_model(albert, ["group_0_inner_layer_0"]), inputs, (token_similarity, cosine_similarity)
    )
    del albert
    bar.add(1)
    bert = keras_hub.models.BertBackbone(**common)
    names = [f"transformer_layer_{i}" for i in range(depth)]
    tsim, tcos = measure_blocks(block_outputs_model(bert, names), inputs, (token_similarity, cosine_similarity))
    bar.add(1)
    classifier = keras.Model(bert.input, keras.layers.Dense(2)(bert.output["pooled_output"]))
    grads = block_gradient_norms(
        classifier,
        inputs,
        rng.integers(0, 2, batch_size),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        names,
    )
    bar.add(1)
    return {
        "block": np.arange(1, depth + 1),
        "bert_t_sim": np.asarray(tsim),
        "bert_t_cos": np.asarray(tcos),
        "bert_gradient_norm": np.array(grads),
        "albert_t_sim": np.asarray(albert_sim),
        "albert_t_cos": np.asarray(albert_cos),
    }


def figure_2(trials=50, depth=20, seed=0, verbose=0):
    """Columns per block: t_sim, xi ratio of steps 1-4, delta, omega (means and sds over trials)."""
    rows = np.zeros((trials, depth, 7))
    for trial, x in _trials(trials, seed, verbose):
        for layer in range(depth):
            p, ys = _steps(_block(), x)
            ratios = [_xi_ratio(a, b) for a, b in zip(ys[:-1], ys[1:])]
            rows[trial, layer] = [
                _np(token_similarity(x))[0],
                *ratios,
                _np(spectral.delta(p)).mean(),
                _np(spectral.omega(x[0], p)).mean(),
            ]
            x = ys[-1]
    columns = ["t_sim", "xi_ratio_step1", "xi_ratio_step2", "xi_ratio_step3", "xi_ratio_step4", "delta", "omega"]
    return {"block": np.arange(1, depth + 1), **_mean_sd(rows, columns)}


def figure_3(draws=1000, depth=20, seed=0, chunk=100, verbose=0):
    """Per block: t_sim(X); sample means (and sds over the draws) of xi_1/xi_2 - 1 and r(X, Y);
    Estimates 1 and 2 of both."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x = ops.convert_to_tensor(rng.standard_normal((1, N, D)).astype("float32"))
    out = {
        k: []
        for k in (
            "t_sim",
            "xi_ratio_minus_1",
            "estimate1_xi",
            "estimate2_xi",
            "rate",
            "estimate1_rate",
            "estimate2_rate",
            "xi_ratio_minus_1_sd",
            "rate_sd",
        )
    }
    bar = _bar(depth, verbose)
    for _ in range(depth):
        p, ys = _steps(_block(), x)
        ratios, rates = [], []
        for start in range(0, draws, chunk):
            w = (rng.standard_normal((min(chunk, draws - start), H, D, D // H)) / np.sqrt(D)).astype("float32")
            heads = ops.einsum("hnd,khde->knhe", ops.matmul(p, x[0]), w)
            y = x + ops.reshape(heads, (w.shape[0], N, D))  # Prop. 9: heads side by side
            xi1, xi2 = spectral.xi(ops.broadcast_to(x, y.shape), y)
            ratios.append(_np(xi1 / xi2))
            rates.append(_np(escalation_rate(ops.broadcast_to(x, y.shape), y)))
        t_sim = _np(token_similarity(x))[0]
        w_, d_ = _np(spectral.omega(x[0], p)), _np(spectral.delta(p))
        l2 = _np(spectral.lambda2(p))
        estimate1 = (np.mean((1 - w_) ** 2) - np.mean(d_**2)) / (1 + np.mean(d_**2))
        estimate2 = (1 - np.mean(l2**2)) / (1 + np.mean(l2**2))
        for key, value in (
            ("t_sim", t_sim),
            ("xi_ratio_minus_1", np.concatenate(ratios).mean() - 1),
            ("estimate1_xi", estimate1),
            ("estimate2_xi", estimate2),
            ("rate", np.concatenate(rates).mean()),
            ("estimate1_rate", 1 + estimate1 * t_sim),
            ("estimate2_rate", 1 + estimate2 * t_sim),
            ("xi_ratio_minus_1_sd", np.concatenate(ratios).std()),
            ("rate_sd", np.concatenate(rates).std()),
        ):
            out[key].append(value)
        x = ys[-1]
        bar.add(1)
    return {"block": np.arange(1, depth + 1), **{k: np.array(v) for k, v in out.items()}}


def figure_4(trials=20, depth=40, seed=0, verbose=0):
    """Pre-norm (eq. 19): per block, t_sim of the block input and the Frobenius norms of X, LN(X)
    and the attention branch P(LN X) LN(X) W (eq. 20: the residual grows, the branch does not)."""
    rows = np.zeros((trials, depth, 4))
    for trial, x in _trials(trials, seed, verbose):
        for layer in range(depth):
            block = PreNormBlock(H, FFN)
            block.build((1, N, D))
            steps = block.steps(x)
            rows[trial, layer] = [
                _np(token_similarity(x))[0],
                *(_np(ops.sqrt(ops.sum(ops.square(t)))) for t in (x, steps["x_hat"], steps["attention_branch"])),
            ]
            x = steps["outputs"]
    names = ["t_sim", "norm_x", "norm_ln_x", "norm_attention_branch"]
    return {"block": np.arange(1, depth + 1), **_mean_sd(rows, names)}


def figure_5(trials=20, depth=40, taus=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5), seed=0, verbose=0):
    """Token diversity after each block, one column per tau, mean (and sd) over trials."""
    values = np.zeros((trials, depth, len(taus)))
    for trial, x0 in _trials(trials, seed, verbose):
        blocks = [_block(deescalate="output") for _ in range(depth)]
        for j, tau in enumerate(taus):
            x = x0
            for layer, block in enumerate(blocks):
                block.de_escalation.tau = tau  # same weights for every tau within a run
                x = block(x)
                values[trial, layer, j] = _np(token_diversity(x))[0]
    return {"block": np.arange(1, depth + 1), **_mean_sd(values, [f"tau_{tau:.1f}" for tau in taus])}


FIGURE_8_TS = tuple(np.linspace(0.05, 1.0, 20))  # the perturbation sizes t of Fig. 8


def figure_8(draws=50, dims=(10, 20, 40), n=100, ts=FIGURE_8_TS, seed=0, verbose=0):
    """Mean eta (and its sd) over `draws` draws of W, per perturbation size t (rows) and width d."""
    rng = np.random.default_rng(seed)
    result = {"t": np.array(ts)}
    bar = _bar(len(dims), verbose)
    for d in dims:
        v, q = rng.standard_normal(d), rng.standard_normal((n, d))
        wq, wk = rng.standard_normal((d, d)) / np.sqrt(d), rng.standard_normal((d, d)) / np.sqrt(d)
        etas = []  # per t: eta over the draws
        for t in ts:
            x_np = np.outer(np.ones(n), v) + t * q
            p = ops.softmax(ops.convert_to_tensor((x_np @ wq) @ (x_np @ wk).T / np.sqrt(d), "float32"), axis=-1)
            x = ops.convert_to_tensor(x_np, "float32")
            w = (rng.standard_normal((draws, d, d)) / np.sqrt(d)).astype("float32")
            y = x + ops.einsum("nd,kde->kne", ops.matmul(p, x), w)
            xi1, xi2 = spectral.xi(ops.broadcast_to(x, y.shape), y)
            mu1, mu2 = (_np(m) for m in spectral.mu(x, p))
            expected = (1 + mu1**2) / (1 + mu2**2)  # Lemma 4 with alpha = 1, d sigma^2 = 1
            etas.append(expected - _np(xi1 / xi2))
        result.update(_mean_sd(np.array(etas)[..., None], [f"eta_d{d}"], axis=1))
        bar.add(1)
    return result


# --quick: Figure 1 with 6-block BERT and ALBERT models of width 32 (seconds on a CPU)
_FIGURE_1_QUICK = dict(depth=6, hidden_dim=32, num_heads=2, intermediate_dim=64, embedding_dim=16)
_FIGURE_1_QUICK.update(vocabulary_size=100, sequence_length=16)

FIGURES = {
    "1": (figure_1, _FIGURE_1_QUICK),
    "2": (figure_2, dict(trials=2, depth=6)),
    "3": (figure_3, dict(draws=50, depth=6)),
    "4": (figure_4, dict(trials=2, depth=6)),
    "5": (figure_5, dict(trials=2, depth=8)),
    "8": (figure_8, dict(draws=10, ts=(0.1, 0.5, 1.0))),
}


def make_figures(which, out_dir, quick=False, verbose=0):
    """Compute, write `fig{N}.csv` and `fig{N}.png` into `out_dir`; returns {N: columns}. With
    `verbose`, a progress bar per figure and a line naming its files when it is written."""
    unknown = [w for w in which if w not in FIGURES]
    if unknown:
        raise ValueError(f"Figures available: {sorted(FIGURES)}. Received: which={list(which)}")
    # `out_dir` is the user's until proven ours: new, empty, or figures of these settings
    run_files.claim_folder(out_dir, "figures", {"quick": quick}, writes=("fig*.csv", "fig*.png"), marker="fig*.csv")
    results = {}
    for name in which:
        function, quick_settings = FIGURES[name]
        chosen = quick_settings if quick else {}
        used = settings(name, chosen)
        if verbose:
            print(f"Fig. {name}: {used}", flush=True)
        columns = function(**chosen, verbose=verbose)
        paths = [os.path.join(out_dir, f"fig{name}.{ext}") for ext in ("csv", "png")]
        write_csv(paths[0], columns, f"Yu & Zhang, Fig. {name}{' (--quick)' if quick else ''}: {used}")
        run_files.save_figure(draw(name, columns, used, quick), paths[1])
        if verbose:
            print(f"Fig. {name} written: {', '.join(paths)}", flush=True)
        results[name] = columns
    return results


def settings(name, chosen):
    """The words of a figure's settings: its function's arguments as run, then Sec. 2.4's fixed sizes
    (the blocks of Figs. 2-5), the Keras version and backend."""
    function = FIGURES[name][0]
    arguments = {
        k: chosen.get(k, p.default) for k, p in inspect.signature(function).parameters.items() if k != "verbose"
    }
    words = [f"{k}={_word(v)}" for k, v in arguments.items()]
    if name in ("2", "3", "4", "5"):
        words.append(f"n={N} d={D} h={H} ffn={FFN} alpha=1")
    return " ".join(words) + f"; keras {keras.__version__}, {keras.backend.backend()}"


def _word(value):
    if isinstance(value, (tuple, list)):
        return ",".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in value)
    return str(value)


def write_csv(path, columns, caption):
    """The figure's columns, after one `# caption` line (pandas: `read_csv(path, comment="#")`)."""
    names = list(columns)
    with run_files.replacing(path) as f:
        f.write(f"# {caption}\n")
        writer = csv.writer(f)
        writer.writerow(names)
        for i in range(len(columns[names[0]])):
            writer.writerow([f"{columns[n][i]:.6g}" for n in names])


def read_csv(path):
    """A figure CSV as column -> NumPy array (its `#` caption line skipped)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


PANELS = {  # figure -> (x column, x label, [(panel title, y label, [columns], or None: all the rest)])
    "1": (
        "block",
        "block",
        [
            ("token similarity (Definition 1)", "t_sim", ["bert_t_sim", "albert_t_sim"]),
            ("cosine similarity (eq. 1)", "t_cos", ["bert_t_cos", "albert_t_cos"]),
            ("gradient norm (BERT)", "||dL/dW_block||", ["bert_gradient_norm"]),
        ],
    ),
    "2": (
        "block",
        "block",
        [
            ("token similarity of the block input", "t_sim", ["t_sim"]),
            ("xi_1 / xi_2 per step of Algorithm 1", "xi_1 / xi_2", [f"xi_ratio_step{i}" for i in range(1, 5)]),
            ("delta, omega (eq. 12, head means)", "value", ["delta", "omega"]),
        ],
    ),
    "3": (
        "block",
        "block",
        [
            ("token similarity of the block input", "t_sim", ["t_sim"]),
            ("xi_1 / xi_2 - 1 after step 1", "xi_1 / xi_2 - 1", ["xi_ratio_minus_1", "estimate1_xi", "estimate2_xi"]),
            ("escalation rate r(X, Y)", "r(X, Y)", ["rate", "estimate1_rate", "estimate2_rate"]),
        ],
    ),
    "4": (
        "block",
        "block",
        [
            ("token similarity (pre-norm, eq. 19)", "t_sim", ["t_sim"]),
            ("Frobenius norms (eq. 20)", "Frobenius norm", ["norm_x", "norm_ln_x", "norm_attention_branch"]),
        ],
    ),
    "5": ("block", "block", [("token diversity after each block", "token diversity", None)]),
    "8": ("t", "perturbation size t", [("eta = E[xi_1]/E[xi_2] - xi_1/xi_2", "mean eta", None)]),
}

# Legend names in words for the CSV's column names; `tau_0.4` and `eta_d10` are read by `label`.
LABELS = {
    "bert_t_sim": "BERT",
    "albert_t_sim": "ALBERT",
    "bert_t_cos": "BERT",
    "albert_t_cos": "ALBERT",
    "bert_gradient_norm": "BERT",
    "t_sim": "t_sim",
    "xi_ratio_step1": "step 1: attention + residual",
    "xi_ratio_step2": "step 2: LayerNorm",
    "xi_ratio_step3": "step 3: FFN + residual",
    "xi_ratio_step4": "step 4: LayerNorm",
    "delta": "delta",
    "omega": "omega",
    "xi_ratio_minus_1": "sample mean",
    "rate": "sample mean",
    "estimate1_xi": "Estimate 1, from (16)",
    "estimate2_xi": "Estimate 2, from (17)",
    "estimate1_rate": "Estimate 1, from (16)",
    "estimate2_rate": "Estimate 2, from (17)",
    "norm_x": "||X||",
    "norm_ln_x": "||LN(X)||",
    "norm_attention_branch": "||attention branch||",
}


def label(column):
    """A column's legend name: `tau_0.4` -> `tau = 0.4`, `eta_d10` -> `d = 10`, others from LABELS."""
    if column.startswith("tau_"):
        return f"tau = {column[4:]}"
    if column.startswith("eta_d"):
        return f"d = {column[5:]}"
    return LABELS[column]


def draw(name, columns, used, quick=False):
    """The figure as a matplotlib `Figure` (no pyplot): a panel per PANELS entry, every axis labelled,
    legends in words outside the curves, and a band of +-1 sd wherever a `_sd` column exists."""
    import matplotlib.ticker

    x_name, x_label, panels = PANELS[name]
    width = max(6.5, 5.2 * len(panels))
    fig, axes = run_files.new_figure((width, 4.4), len(panels))
    for ax, (title, y_label, names) in zip(axes, panels):
        names = names or [c for c in columns if c != x_name and not c.endswith("_sd")]
        for column in names:
            (line,) = ax.plot(columns[x_name], columns[column], marker=".", markersize=3, label=label(column))
            if f"{column}_sd" in columns:
                low, high = columns[column] - columns[f"{column}_sd"], columns[column] + columns[f"{column}_sd"]
                ax.fill_between(columns[x_name], low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set(xlabel=x_label, ylabel=y_label, title=title)
        ax.title.set_fontsize(10)
        if x_name == "block":
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        if len(names) > 1:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=min(3, len(names)))
    spread = f" Bands: mean +- 1 sd over the {SPREAD_OVER[name]}." if name in SPREAD_OVER else ""
    caption = f"Yu & Zhang, Fig. {name}{' (--quick: fewer trials)' if quick else ''}.{spread}\n{used}"
    lines = [textwrap.fill(part, int(width * 14)) for part in caption.split("\n")]  # ~14 characters an inch
    fig.suptitle("\n".join(lines), fontsize=9)
    return fig


SPREAD_OVER = {"2": "trials", "3": "draws of W", "4": "trials", "5": "trials", "8": "draws of W"}
