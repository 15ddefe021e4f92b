"""The K3 forward pass in float64, k3-model.md sections 2-6.

Everything is computed for a whole sequence at once, shape [T, ...] with T positions;
only the KDA recurrence (section 4) is a scan over t. Weights are widened exactly to
float64 when first used and cached. Matrices are [out][in] and applied as y = x @ W.T.
"""
import collections

import numpy as np

from .checkpoint import Checkpoint, HEAD


# --------------------------------------------------------------------------- helpers

def rms_norm(x, w, eps):
    """RMSNorm(x, w) = w * x / sqrt(mean(x^2) + eps) over the last axis (notation, top of doc)."""
    return w * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def situ_glu(gate, up, beta, linear_beta):
    """Section 3: a = beta*tanh(gate/beta)*sigmoid(gate) (sigmoid sees the uncapped gate),
    u = lb*tanh(up/lb), y = a*u. beta = activation_situ_beta (4), lb = ..._linear_beta (25)."""
    a = beta * np.tanh(gate / beta) * sigmoid(gate)
    u = linear_beta * np.tanh(up / linear_beta)
    return a * u


def attn_res(sources, w_norm, w_proj, eps):
    """Section 2, attention residual over a list of sources, each [T, hidden].

    w = w_norm * w_proj (folded once); s_j = sum_i (v_j[i] / sqrt(mean(v_j^2)+eps)) * w[i];
    p = softmax_j(s); result = sum_j p_j v_j, mixing the RAW sources.
    """
    w = w_norm * w_proj.reshape(-1)                                  # [hidden]
    v = np.stack(sources)                                            # [n, T, hidden]
    normed = v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps)
    p = softmax(normed @ w, axis=0)                                  # [n, T]
    return np.einsum("nt,nth->th", p, v)                             # [T, hidden]


def causal_depthwise_conv(x, w):
    """Section 4 short conv: out_t[c] = sum_{j=0..K-1} w[c][j] * x_{t-K+1+j}[c], zero history.

    x [T, P], w [P, K] (the checkpoint's [P][1][K] with the middle axis dropped);
    w[:, K-1] multiplies the current input.
    """
    T, K = x.shape[0], w.shape[1]
    out = np.zeros_like(x)
    for j in range(K):
        lag = K - 1 - j                      # x_{t-lag}
        if lag < T:
            out[lag:] += w[:, j] * x[:T - lag]
    return out


def top2_margins(logits):
    """Per row: largest minus second largest logit."""
    s = np.sort(logits, axis=-1)
    return s[..., -1] - s[..., -2]


# --------------------------------------------------------------------------- model

class K3Model:
    """Reference K3 model over a Checkpoint (or a model directory path)."""

    def __init__(self, ckpt, expert_cache_bytes=4 << 30, dtype=np.float64):
        """dtype=np.float32 runs the same code in single precision: not the reference, only a
        stand-in for an fp32 engine when measuring how robust a model's argmax/routing is."""
        self.ckpt = ckpt if isinstance(ckpt, Checkpoint) else Checkpoint(ckpt)
        self.cfg = self.ckpt.config
        self.eps = float(self.cfg.rms_norm_eps)
        self._cache = {}
        self._expert_cache = collections.OrderedDict()   # (layer, e) -> (W1, W2, W3), FIFO
        self._expert_cache_bytes = 0
        self.expert_cache_limit = expert_cache_bytes
        self.stats = None
        self.dtype = dtype

    # weights ---------------------------------------------------------------
    def w(self, suffix):
        """`language_model.model.<suffix>` as float64, cached."""
        t = self._cache.get(suffix)
        if t is None:
            t = self._cache[suffix] = self.ckpt.model(suffix).astype(self.dtype)
        return t

    def lm_head(self):
        t = self._cache.get(HEAD)
        if t is None:
            if self.ckpt.has(HEAD):
                t = self.ckpt.tensor(HEAD).astype(self.dtype)
            elif self.cfg.tie_word_embeddings:
                t = self.w("embed_tokens.weight")
            else:
                raise KeyError("%s: missing tensor %s" % (self.ckpt.dir, HEAD))
            self._cache[HEAD] = t
        return t

    def expert(self, layer, e):
        """(W1, W2, W3) of routed expert e, float64 [out][in]; W1 gate, W2 down, W3 up."""
        key = (layer, e)
        t = self._expert_cache.get(key)
        if t is None:
            t = tuple(self.ckpt.expert_matrix(layer, e, w).astype(self.dtype) for w in ("w1", "w2", "w3"))
            self._expert_cache[key] = t
            self._expert_cache_bytes += sum(m.nbytes for m in t)
            while self._expert_cache_bytes > self.expert_cache_limit and len(self._expert_cache) > 1:
                _, old = self._expert_cache.popitem(last=False)
                self._expert_cache_bytes -= sum(m.nbytes for m in old)
        return t

    # section 4 ---------------------------------------------------------------
    def kda(self, layer, x):
        """KDA layer on the normed input x [T, hidden] -> [T, hidden]."""
        c = self.cfg
        H, D = c.kda_num_heads, c.kda_head_dim
        T, P = x.shape[0], c.kda_num_heads * c.kda_head_dim
        pre = "layers.%d.self_attn." % layer

        def branch(name):                                             # [T, P]
            y = x @ self.w(pre + name + "_proj.weight").T
            conv_w = self.w(pre + name + "_conv1d.weight")            # [P, 1, K]
            return silu(causal_depthwise_conv(y, conv_w.reshape(P, -1)))

        q, k, v = (branch(n).reshape(T, H, D) for n in ("q", "k", "v"))
        # L2 norm per head, as a SUM (not a mean) plus 1e-6; v is not normed
        q = q / np.sqrt(np.sum(q * q, axis=-1, keepdims=True) + 1e-6)
        k = k / np.sqrt(np.sum(k * k, axis=-1, keepdims=True) + 1e-6)
        beta = sigmoid(x @ self.w(pre + "b_proj.weight").T)           # [T, H]
        z = (x @ self.w(pre + "f_a_proj.weight").T) @ self.w(pre + "f_b_proj.weight").T
        z = (z + self.w(pre + "dt_bias")).reshape(T, H, D)            # [T, H, D]
        a = np.exp(self.w(pre + "A_log").reshape(-1)[:H])              # per HEAD; first H values
        if c.gate_lower_bound is not None:
            g = c.gate_lower_bound * sigmoid(a[None, :, None] * z)
        else:  # Kimi-Linear predecessor (section 4, last paragraph)
            g = -a[None, :, None] * np.logaddexp(0.0, z)
        alpha = np.exp(g)                                             # [T, H, D]
        q = q * D ** -0.5
        S = np.zeros((H, D, D), dtype=x.dtype)          # per head, row = key channel, column = value channel
        o = np.empty((T, H, D), dtype=x.dtype)
        for t in range(T):
            S = alpha[t][:, :, None] * S                              # decay the rows
            u = np.einsum("hkv,hk->hv", S, k[t])                      # u = S^T k
            S = S + k[t][:, :, None] * (beta[t][:, None] * (v[t] - u))[:, None, :]
            o[t] = np.einsum("hkv,hk->hv", S, q[t])                   # read the UPDATED state
        o = rms_norm(o, self.w(pre + "o_norm.weight"), self.eps)      # per head, gain width D
        o = o.reshape(T, P) * sigmoid(x @ self.w(pre + "g_proj.weight").T)
        return o @ self.w(pre + "o_proj.weight").T

    # section 5 ---------------------------------------------------------------
    def mla(self, layer, x):
        """Gated MLA in the plain (non-absorbed) form on the normed input x [T, hidden]."""
        c = self.cfg
        nh, dn, dr, dv, r = (c.num_attention_heads, c.qk_nope_head_dim, c.qk_rope_head_dim,
                             c.v_head_dim, c.kv_lora_rank)
        T = x.shape[0]
        pre = "layers.%d.self_attn." % layer
        qa = rms_norm(x @ self.w(pre + "q_a_proj.weight").T, self.w(pre + "q_a_layernorm.weight"), self.eps)
        q = (qa @ self.w(pre + "q_b_proj.weight").T).reshape(T, nh, dn + dr)
        q_nope, q_rope = q[..., :dn], q[..., dn:]
        cc = x @ self.w(pre + "kv_a_proj_with_mqa.weight").T           # [T, r + dr]
        lat = rms_norm(cc[:, :r], self.w(pre + "kv_a_layernorm.weight"), self.eps)  # [T, r]
        kr = cc[:, r:]                                                # [T, dr], shared, unrotated
        kv = (lat @ self.w(pre + "kv_b_proj.weight").T).reshape(T, nh, dn + dv)
        k_nope, v = kv[..., :dn], kv[..., dn:]
        score = (np.einsum("thd,shd->hts", q_nope, k_nope)
                 + np.einsum("thd,sd->hts", q_rope, kr)) / np.sqrt(dn + dr)  # [nh, T, T]
        causal = np.tril(np.ones((T, T), dtype=bool))                 # s <= t
        p = softmax(np.where(causal, score, -np.inf), axis=-1)
        o = np.einsum("hts,shv->thv", p, v).reshape(T, nh * dv)
        if c.mla_use_output_gate:
            o = o * sigmoid(x @ self.w(pre + "g_proj.weight").T)     # gate BEFORE o_proj, no norm
        return o @ self.w(pre + "o_proj.weight").T

    # section 6 ---------------------------------------------------------------
    def dense_mlp(self, layer, x):
        pre = "layers.%d.mlp." % layer
        c = self.cfg
        h = situ_glu(x @ self.w(pre + "gate_proj.weight").T, x @ self.w(pre + "up_proj.weight").T,
                     c.situ_beta, c.situ_linear_beta)
        return h @ self.w(pre + "down_proj.weight").T

    def route(self, layer, x):
        """Router: s = sigmoid(gate.weight x) on the full-width x; selection by s + bias,
        ties -> lower index; weights = unbiased s renormalized (+1e-20) * routed_scaling_factor.
        Returns (sel [T, k] int, weights [T, k], biased scores [T, E])."""
        c = self.cfg
        pre = "layers.%d.block_sparse_moe.gate." % layer
        s = sigmoid(x @ self.w(pre + "weight").T)                     # [T, E]
        biased = s + self.w(pre + "e_score_correction_bias")
        # a stable sort of -biased keeps the lower index first among equal scores
        sel = np.argsort(-biased, axis=-1, kind="stable")[:, :c.num_experts_per_token]
        ws = np.take_along_axis(s, sel, axis=-1)
        if c.moe_renormalize:
            ws = ws / (ws.sum(axis=-1, keepdims=True) + 1e-20)
        return sel, ws * c.routed_scaling_factor, biased

    def latent_moe(self, layer, x):
        """LatentMoE on the normed input x [T, hidden] -> [T, hidden]."""
        c = self.cfg
        pre = "layers.%d.block_sparse_moe." % layer
        sel, ws, biased = self.route(layer, x)
        if self.stats is not None:
            self._route_stats(layer, biased)
        z = x @ self.w(pre + "routed_expert_down_proj.weight").T      # [T, latent]
        acc = np.zeros_like(z)
        for e in np.unique(sel):
            rows, slot = np.nonzero(sel == e)
            w1, w2, w3 = self.expert(layer, int(e))
            y = situ_glu(z[rows] @ w1.T, z[rows] @ w3.T, c.situ_beta, c.situ_linear_beta) @ w2.T
            acc[rows] += ws[rows, slot][:, None] * y
        if c.latent_moe_use_norm:
            acc = rms_norm(acc, self.w(pre + "routed_expert_norm.weight"), self.eps)  # on the SUM
        out = acc @ self.w(pre + "routed_expert_up_proj.weight").T
        if c.num_shared_experts > 0:   # one fused SiTU MLP, intermediate = n_shared * moe_inter
            sh = pre + "shared_experts."
            h = situ_glu(x @ self.w(sh + "gate_proj.weight").T, x @ self.w(sh + "up_proj.weight").T,
                         c.situ_beta, c.situ_linear_beta)
            out = out + h @ self.w(sh + "down_proj.weight").T
        return out

    def _route_stats(self, layer, biased):
        k = self.cfg.num_experts_per_token
        srt = -np.sort(-biased, axis=-1)
        if k < biased.shape[1]:
            gap = srt[:, k - 1] - srt[:, k]      # selection boundary
            st = self.stats
            st["route_ties"] += int(np.sum(gap == 0))
            pos = gap[gap > 0]
            if pos.size:
                st["min_route_gap"] = min(st["min_route_gap"], float(pos.min()))
        cnt = self.stats.setdefault("expert_hits", {})
        for e in np.argsort(-biased, axis=-1, kind="stable")[:, :k].reshape(-1):
            cnt[(layer, int(e))] = cnt.get((layer, int(e)), 0) + 1

    # section 2 ---------------------------------------------------------------
    def forward(self, ids, collect_stats=False):
        """Logits [T, vocab] for every position of the token ids `ids` (causal)."""
        c = self.cfg
        ids = np.asarray(ids, dtype=np.int64)
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError("token id outside 0..%d" % (c.vocab_size - 1))
        if collect_stats:
            self.stats = {"route_ties": 0, "min_route_gap": np.inf, "rms": []}
        h = self.w("embed_tokens.weight")[ids]                        # [T, hidden], no scaling
        blocks = []
        for L in range(c.num_hidden_layers):
            pre = "layers.%d." % L
            prefix = h
            if blocks:
                h = attn_res(blocks + [prefix], self.w(pre + "self_attention_res_norm.weight"),
                             self.w(pre + "self_attention_res_proj.weight"), self.eps)
            if L % c.attn_res_block_size == 0:
                blocks.append(prefix)
                prefix = None
            xn = rms_norm(h, self.w(pre + "input_layernorm.weight"), self.eps)
            a = self.mla(L, xn) if c.is_mla(L) else self.kda(L, xn)
            prefix = a if prefix is None else prefix + a
            h = attn_res(blocks + [prefix], self.w(pre + "mlp_res_norm.weight"),
                         self.w(pre + "mlp_res_proj.weight"), self.eps)
            xn = rms_norm(h, self.w(pre + "post_attention_layernorm.weight"), self.eps)
            m = self.dense_mlp(L, xn) if c.is_dense(L) else self.latent_moe(L, xn)
            prefix = prefix + m
            h = prefix
            if collect_stats:
                r = lambda t: float(np.sqrt(np.mean(t * t)))
                self.stats["rms"].append({"layer": L, "attn": r(a), "ffn": r(m), "h": r(h)})
        h = attn_res(blocks + [h], self.w("output_attn_res_norm.weight"),
                     self.w("output_attn_res_proj.weight"), self.eps)
        return rms_norm(h, self.w("norm.weight"), self.eps) @ self.lm_head().T

    def generate_greedy(self, prompt_ids, max_tokens):
        """Greedy decoding by full recompute: each step runs forward() over all ids so far.
        Ties in argmax go to the lower id."""
        ids = list(int(i) for i in prompt_ids)
        out = []
        for _ in range(max_tokens):
            nxt = int(np.argmax(self.forward(ids)[-1]))
            out.append(nxt)
            ids.append(nxt)
        return out

    def run(self, prompt_ids, max_tokens, collect_stats=False):
        """Greedy ids, then one teacher-forced pass over prompt + generated.
        Returns dict(output_ids, argmax, logits [T, V] ndarray, min_top2_margin)."""
        gen = self.generate_greedy(prompt_ids, max_tokens)
        full = list(prompt_ids) + gen
        logits = self.forward(full, collect_stats=collect_stats)
        return {"output_ids": gen, "argmax": [int(i) for i in np.argmax(logits, axis=-1)],
                "logits": logits, "min_top2_margin": float(top2_margins(logits).min())}
