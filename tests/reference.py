"""NumPy references of the paper's formulas, written from the equations, for golden tests."""

import numpy as np


def deescalate(x, tau, mask=None, causal=False):
    """eq. (21) as an explicit matrix: Y = (I - tau * A) X, A the (masked / causal) averaging matrix.

    A row of A averages the real tokens of its context; a context of one real token gets a zero row
    (that token is left unchanged)."""
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
        counts = a.sum(axis=1, keepdims=True)
        a = np.where(counts >= 2, a / np.maximum(counts, 1.0), 0.0)  # one real token: left as is
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


def sinusoid(distance, dim):
    """Transformer-XL's encoding of one relative distance: [sin(d w_k), cos(d w_k)], w_k = 10000^(-2k/dim)."""
    w = 1.0 / 10000.0 ** (np.arange(0, dim, 2) / dim)
    return np.concatenate([np.sin(distance * w), np.cos(distance * w)])


def relative_attention(x, memory, filled, w_qkv, w_r, w_o, u, v, num_heads, head_dim):
    """Dai et al. Sec. 3.3 written out term by term, one (query, key) pair at a time.

    x [B, T, D] segment, memory [B, M, D] (only its last `filled` slots are real), w_qkv [D, 3NH],
    w_r [D, NH], w_o [NH, D], u, v [N, H]. Query i sees key j (context index, memory first) when
    j <= i + M and j is a filled slot or in the segment; the score is
    (q_i + u) . k_j + (q_i + v) . (W_R R_{i+M-j}), over sqrt(H). Returns (out [B, T, D], P [B, N, T, M+T]).
    """
    x, memory = np.asarray(x, np.float64), np.asarray(memory, np.float64)
    b_size, t_len, dim = x.shape
    m_len = memory.shape[1]
    context = np.concatenate([memory, x], axis=1)
    qkv = context @ w_qkv
    inner = num_heads * head_dim
    q, k, val = (qkv[..., i * inner : (i + 1) * inner].reshape(b_size, -1, num_heads, head_dim) for i in range(3))
    q = q[:, m_len:]
    keys = m_len + t_len
    probs = np.zeros((b_size, num_heads, t_len, keys))
    for i in range(t_len):
        for j in range(keys):
            visible = j <= i + m_len and (j >= m_len - filled)
            if not visible:
                continue
            r = (sinusoid(i + m_len - j, dim) @ w_r).reshape(num_heads, head_dim)
            score = np.einsum("bnh,bnh->bn", q[:, i] + u, k[:, j]) + np.einsum("bnh,nh->bn", q[:, i] + v, r)
            probs[:, :, i, j] = np.exp(score / np.sqrt(head_dim))
    probs /= probs.sum(-1, keepdims=True)
    out = np.einsum("bnij,bjnh->binh", probs, val).reshape(b_size, t_len, inner) @ w_o
    return out, probs


def adaptive_log_softmax(hidden, tables, biases, cluster_kernel, cluster_bias, cutoffs):
    """Grave et al.'s two-level softmax with div_val=1 (no projections), written as probabilities.

    p(w) = softmax(head)[w] for w < cutoffs[0]; else softmax(head)[cluster c] * softmax(tail_c)[w].
    """
    hidden = np.asarray(hidden, np.float64)
    head = softmax(np.concatenate([hidden @ tables[0].T + biases[0], hidden @ cluster_kernel.T + cluster_bias], -1))
    probs = [head[..., : cutoffs[0]]]
    for c in range(1, len(tables)):
        probs.append(head[..., cutoffs[0] + c - 1 : cutoffs[0] + c] * softmax(hidden @ tables[c].T + biases[c]))
    return np.log(np.concatenate(probs, -1))
