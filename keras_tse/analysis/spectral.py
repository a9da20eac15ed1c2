"""The spectral quantities of Yu & Zhang, Sec. 2.2: why the SA-plus-residual step escalates similarity.

For one block input `X` `[n, d]` and an attention matrix `P` `[n, n]` (row-stochastic, eq. 2),
with `Pi_1 = 11^T/n` the projection onto span{1}, `Pi_2 = I - Pi_1` and `e = 1`:

- `xi(X, Y)`: `xi_i = ||Pi_i Y||_F^2 / ||Pi_i X||_F^2` (eq. 7), so that
  `r(X, Y) = 1 + (xi_1/xi_2 - 1) t_sim(X)` (Proposition 3);
- `mu(X, P)`: `mu_i = ||Pi_i P X||_F / ||Pi_i X||_F` (eq. 10); with `P` `[h, n, n]`, the
  multi-head averages `mu_bar_i = sqrt(mean_k mu_i(X, P_k)^2)` of Proposition 9;
- `omega(X, P) = ||e^T P Pi_2 X|| / ||e^T X||` and `delta(P) = ||Pi_2 P||_2` (eq. 12);
- `lambda2(P)`: the second largest eigenvalue modulus of `P` (its spectral gap is `1 - lambda2`);
- `estimate_16(X, P, alpha)`, `estimate_17(X, P)`: the expected escalation rate's lower bound (16)
  and its symmetric-P estimate (17); `estimates_of_xi_ratio` gives the matching estimates of
  `E[xi_1/xi_2] - 1` that Fig. 3 plots ("Estimate 1" and "Estimate 2");
- `sa_residual(X, P, W, alpha)`: the step `Y = X + alpha P X W` itself (per head with `[h, ...]`
  inputs, heads concatenated as in Proposition 9), whose `escalation_rate(X, Y)` is the empirical
  rate.

And the attention diagnostics of Bao, Hataya & Karakida (ICML 2024, "Self-attention networks
localize when QK-eigenspectrum concentrates"): `attention_entropy(P)` (low: entropy collapse) and
`qk_spectrum(W_Q, W_K, num_heads)`, the eigenvalue moments of `W = W_Q,k W_K,k^T` per head.

Every function takes NumPy arrays or backend tensors, one matrix (or a stack of heads where
stated), and returns float32 backend tensors (`keras.ops.convert_to_numpy` gives NumPy). Eigenvalues
of the non-symmetric `P` use `keras.ops.eig`, which JAX computes on the CPU only.
"""

from keras import ops

from keras_tse.analysis.similarity import escalation_rate, token_similarity


def _f32(x):
    return ops.cast(ops.convert_to_tensor(x), "float32")


def _center(x):
    """`Pi_2 X`: each column minus its mean over the rows (tokens)."""
    return x - ops.mean(x, axis=-2, keepdims=True)


def _squared_norms(x):
    """`(||Pi_1 X||_F^2, ||Pi_2 X||_F^2)` over the last two axes; `||Pi_1 X||_F^2 = n ||mean||^2`."""
    n = x.shape[-2]
    common = n * ops.sum(ops.square(ops.mean(x, axis=-2)), axis=-1)
    return common, ops.sum(ops.square(_center(x)), axis=(-2, -1))


def xi(x, y):
    """`(xi_1, xi_2)` of eq. (7): how much `X -> Y` scales the common and the diverse parts."""
    x, y = _f32(x), _f32(y)
    x1, x2 = _squared_norms(x)
    y1, y2 = _squared_norms(y)
    return y1 / x1, y2 / x2


def mu(x, p):
    """`(mu_1, mu_2)` of eq. (10); with `p` `[h, n, n]`, Proposition 9's head averages `mu_bar_i`."""
    x, p = _f32(x), _f32(p)
    x1, x2 = _squared_norms(x)
    p1, p2 = _squared_norms(ops.matmul(p, x))  # [h] or scalar
    return ops.sqrt(ops.mean(p1 / x1)), ops.sqrt(ops.mean(p2 / x2))


def omega(x, p):
    """`omega = ||e^T P Pi_2 X|| / ||e^T X||` (eq. 12): 0 when `P` is column-stochastic too."""
    x, p = _f32(x), _f32(p)
    column_sums_p = ops.sum(p, axis=-2)  # e^T P, [.., n]
    numerator = ops.sqrt(ops.sum(ops.square(ops.matmul(column_sums_p[..., None, :], _center(x))), axis=(-2, -1)))
    return numerator / ops.sqrt(ops.sum(ops.square(ops.sum(x, axis=-2)), axis=-1))


def delta(p):
    """`delta = ||Pi_2 P||_2` (eq. 12): the largest singular value of `P` with its column means removed."""
    return ops.max(ops.svd(_center(_f32(p)), compute_uv=False), axis=-1)


def lambda2(p):
    """`|lambda_2(P)|`: the second largest eigenvalue modulus (the largest is 1 for a stochastic `P`)."""
    eigenvalues = ops.eig(_f32(p))[0]
    moduli = ops.sort(ops.abs(eigenvalues), axis=-1)
    return ops.cast(moduli[..., -2], "float32")


def estimates_of_xi_ratio(x, p):
    """Fig. 3's "Estimate 1" `((1-omega)^2 - delta^2)/(1 + delta^2)` and "Estimate 2"
    `(1 - |lambda_2|^2)/(1 + |lambda_2|^2)` of `E[xi_1/xi_2] - 1` (alpha = 1)."""
    w, d, l2 = omega(x, p), delta(p), lambda2(p)
    return ((1 - w) ** 2 - d**2) / (1 + d**2), (1 - l2**2) / (1 + l2**2)


def estimate_16(x, p, alpha=1.0):
    """The lower bound (16): `1 + alpha^2/(1 + alpha^2 delta^2) ((1-omega)^2 - delta^2) t_sim(X)`."""
    w, d = omega(x, p), delta(p)
    return 1 + alpha**2 / (1 + alpha**2 * d**2) * ((1 - w) ** 2 - d**2) * token_similarity(x)


def estimate_17(x, p):
    """The estimate (17): `1 + (1 - |lambda_2|^2)/(1 + |lambda_2|^2) t_sim(X)` (exact bound for symmetric `P`)."""
    l2 = lambda2(p)
    return 1 + (1 - l2**2) / (1 + l2**2) * token_similarity(x)


def sa_residual(x, p, w, alpha=1.0):
    """`Y = X + alpha P X W` (Sec. 2.2); with `p` `[h, n, n]` and `w` `[h, d, d/h]`, Proposition 9's
    `Y = X + alpha [P_1 X W_1 ... P_h X W_h]`."""
    x, p, w = _f32(x), _f32(p), _f32(w)
    heads = ops.matmul(ops.matmul(p, x), w)  # [n, d] or [h, n, d/h]
    if len(heads.shape) == 3:
        heads = ops.reshape(ops.transpose(heads, (1, 0, 2)), (x.shape[0], -1))
    return x + alpha * heads


def empirical_escalation_rate(x, p, w, alpha=1.0):
    """`r(X, Y)` (Definition 2) of the SA-plus-residual step for one draw of `W`."""
    return escalation_rate(x, sa_residual(x, p, w, alpha))


def attention_entropy(p):
    """Mean over query rows of the entropy `-sum_j P_ij log P_ij` (nats): `log n` for uniform rows,
    0 for one-hot rows. `p` `[..., n, n]` (e.g. `[batch, heads, n, n]`) gives `[...]`."""
    p = _f32(p)
    return ops.mean(-ops.sum(p * ops.log(ops.maximum(p, 1e-30)), axis=-1), axis=-1)


def _per_head(kernel, num_heads):
    """`[d, h * head_dim]` -> `[h, d, head_dim]`."""
    return ops.transpose(ops.reshape(kernel, (kernel.shape[0], num_heads, -1)), (1, 0, 2))


def qk_spectrum(query_kernel, key_kernel, num_heads):
    """Eigenvalue moments of each head's `W = W_Q,k W_K,k^T` `[d, d]` (the bilinear form of its logits).

    `query_kernel`, `key_kernel`: `[d, num_heads * head_dim]`, heads side by side (the layout of
    `SelfAttention`'s query/key kernels). Returns a dict of `[num_heads]` tensors: `mean = tr(W)/d`
    (eigenvalue mean), `second_moment = tr(W^2)/d`, `variance = tr(W^2)/d - (tr(W)/d)^2` and
    `xi = tr(W)/sqrt(tr(W^2))`. `W` is not symmetric, so `tr(W^2) = sum_i lambda_i^2` over complex
    eigenvalues can be negative: then `variance < 0` and `xi` is NaN (the moments are those of
    the slides' definition, not of `|lambda|`).
    """
    wq, wk = _f32(query_kernel), _f32(key_kernel)
    d = wq.shape[0]
    w = ops.matmul(_per_head(wq, num_heads), ops.transpose(_per_head(wk, num_heads), (0, 2, 1)))  # [h, d, d]
    trace = ops.trace(w, axis1=-2, axis2=-1)
    trace_sq = ops.sum(w * ops.transpose(w, (0, 2, 1)), axis=(-2, -1))  # tr(W W) = sum_ij W_ij W_ji
    mean, second = trace / d, trace_sq / d
    return {"mean": mean, "second_moment": second, "variance": second - mean**2, "xi": trace / ops.sqrt(trace_sq)}


__all__ = [
    "attention_entropy",
    "qk_spectrum",
    "delta",
    "empirical_escalation_rate",
    "estimate_16",
    "estimate_17",
    "estimates_of_xi_ratio",
    "lambda2",
    "mu",
    "omega",
    "sa_residual",
    "xi",
]
