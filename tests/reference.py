"""NumPy references of the paper's formulas, written from the equations, for golden tests."""

import numpy as np


def deescalate(x, tau, mask=None, causal=False):
    """eq. (21) as an explicit matrix: Y = (I - tau * A) X, A the (masked / causal) averaging matrix."""
    x = np.asarray(x, np.float64)
    out = np.empty_like(x)
    n = x.shape[1]
    for b in range(x.shape[0]):
        real = np.ones(n) if mask is None else np.asarray(mask[b], np.float64)
        if causal:
            # row t averages the real tokens among 0..t
            a = np.tril(np.ones((n, n))) * real[None, :]
        else:
            a = np.ones((n, n)) * real[None, :]
        a = a / np.maximum(a.sum(axis=1, keepdims=True), 1.0)
        out[b] = (np.eye(n) - tau * a) @ x[b]
    return out


def layer_norm(x, gamma, beta, eps):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def softmax(m):
    m = m - m.max(-1, keepdims=True)
    e = np.exp(m)
    return e / e.sum(-1, keepdims=True)


def self_attention(x, wq, wk, wv, wo, bo, num_heads, causal=False, mask=None):
    """Multi-head eq. (2): per head P_k = softmax(X Wq_k (X Wk_k)^T / sqrt(h_d)); out = [P_k X Wv_k] Wo + bo.

    Returns (outputs [B, T, D], P [B, N, T, T]).
    """
    b, n, _ = x.shape
    hd = wq.shape[1] // num_heads
    heads, ps = [], []
    for k in range(num_heads):
        cols = slice(k * hd, (k + 1) * hd)
        q, key, v = x @ wq[:, cols], x @ wk[:, cols], x @ wv[:, cols]
        m = q @ key.transpose(0, 2, 1) / np.sqrt(hd)
        allowed = np.ones((b, n, n), bool)
        if causal:
            allowed &= np.tril(np.ones((n, n), bool))[None]
        if mask is not None:
            allowed &= np.asarray(mask, bool)[:, None, :]
        p = softmax(np.where(allowed, m, -1e30))
        heads.append(p @ v)
        ps.append(p)
    return np.concatenate(heads, -1) @ wo + bo, np.stack(ps, 1)


def token_similarity(x):
    """Definition 1 with the explicit projector Pi_1 = 11^T/n."""
    n = x.shape[0]
    pi1 = np.ones((n, n)) / n
    return np.linalg.norm(pi1 @ x) ** 2 / np.linalg.norm(x) ** 2
