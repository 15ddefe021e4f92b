"""The K3 forward pass in PyTorch, for training the triage model and the story model
(examples/stories/training; development only).

The same math as ../../../tests/reference/k3ref/model.py and k3-model.md sections 2-6,
batched ([B, T, ...]) and differentiable, with the state a continuation needs (KDA: S and
the conv history; MLA: the latent cache), so the template's fixed prefix is computed once
per batch and continued by every ticket of the batch, as the engine's prefix reuse does.

Parameters are named as the checkpoint's tensors without `language_model.model.` (the head
is `lm_head.weight`); routed experts are stacked per layer ([E][out][in] as `experts.w1`,
`w2`, `w3`). Storage precision is simulated where the checkpoint rounds: the big matrices
go through BF16 and the routed experts through MXFP4 (the release's quantizer, the same rule
as k3ref.mxfp4.quantize) with straight-through gradients, so what is trained is what the
engine runs. `fake_quant=False` uses exact values (for a forward on already-rounded weights).
`kda_chunk=N` computes KDA's recurrence N positions at a time (kda_chunked: the same function
up to float rounding, for long training sequences); 0, the default, steps one position at a
time as the triage model was trained.
"""
import math
from dataclasses import dataclass, field
from typing import List

import torch

GROUP = 32
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
MIDPOINTS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
TIE_UP = torch.tensor([False, True, False, True, False, True, False])


@dataclass
class Dims:
    """The model's shape; names follow make_model.Spec (tests/reference/make_model.py)."""
    hidden: int = 64
    layers: int = 4
    vocab: int = 3512
    kda_heads: int = 2
    kda_head_dim: int = 32
    conv_kernel: int = 4
    heads: int = 2
    q_lora: int = 32
    kv_lora: int = 32
    nope: int = 16
    rope: int = 8
    v_dim: int = 16
    experts_n: int = 8
    top_k: int = 2
    shared: int = 2
    latent: int = 32
    moe_inter: int = 32
    dense_inter: int = 128
    dense_layers: int = 1
    block_size: int = 2
    full_attn_layers: List[int] = field(default_factory=lambda: [4])   # one-based
    eps: float = 1e-5
    gate_lower_bound: float = -5.0
    situ_beta: float = 4.0
    situ_linear_beta: float = 25.0

    def is_mla(self, layer):
        return (layer + 1) in self.full_attn_layers


# ----------------------------------------------------------------------------- rounding

def mxfp4_round(w):
    """w [..., out, in] rounded to MXFP4 by the release's rule (k3ref.mxfp4.quantize): the
    dequantized values, exactly."""
    shape = w.shape
    blocks = w.detach().reshape(*shape[:-1], shape[-1] // GROUP, GROUP)
    amax = blocks.abs().amax(dim=-1)
    mant, exp = torch.frexp(amax)
    log2_p = exp - 1 + (mant >= 0.875).to(exp.dtype)
    code = torch.clamp(127 + log2_p - 2, 0, 254)
    code = torch.where(amax == 0, torch.zeros_like(code), code)
    scale = torch.ldexp(torch.ones_like(amax), (code - 127).to(torch.int32))
    q = blocks.abs() / scale[..., None]
    mag = ((q[..., None] > MIDPOINTS).sum(-1)
           + ((q[..., None] == MIDPOINTS) & TIE_UP).sum(-1))
    val = E2M1[mag] * scale[..., None]
    return torch.where(blocks < 0, -val, val).reshape(shape)


def bf16_round(w):
    return w.detach().to(torch.bfloat16).to(w.dtype)


def straight_through(w, rounded):
    """rounded in the forward pass, identity in the backward pass."""
    return w + (rounded - w).detach()


# ----------------------------------------------------------------------------- math

def rms_norm(x, w, eps):
    return w * x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps)


def situ_glu(gate, up, beta, linear_beta):
    return beta * torch.tanh(gate / beta) * torch.sigmoid(gate) * (linear_beta * torch.tanh(up / linear_beta))


def attn_res(sources, w_norm, w_proj, eps):
    """Section 2: softmax over the sources of their normed dot with w_norm * w_proj; mixes
    the raw sources. sources: list of [B, T, hidden]."""
    w = w_norm * w_proj.reshape(-1)
    v = torch.stack(sources)                                          # [n, B, T, hidden]
    normed = v / torch.sqrt(torch.mean(v * v, dim=-1, keepdim=True) + eps)
    p = torch.softmax(normed @ w, dim=0)                              # [n, B, T]
    return (p[..., None] * v).sum(0)


def kda_chunked(q, k, v, beta, alpha, S, chunk):
    """KDA's recurrence (section 4) over T positions, `chunk` positions at a time: the same
    function as the step-by-step loop in K3.kda (equal up to float rounding). q (scaled), k, v
    [B, T, H, D], beta [B, T, H], alpha [B, T, H, D] (per key channel), S [B, H, D, D] (row =
    key channel). Returns (o [B, T, H, D], S after the last position).

    Per step: S' = diag(a_t) S; u_t = S'^T k_t; w_t = beta_t (v_t - u_t); S = S' + k_t w_t^T;
    o_t = S^T q_t. Within a chunk from S0, with g_t = sum_{r<=t} log a_r per key channel:
      w_t = beta_t (v_t - S0^T (e^{g_t} k_t) - sum_{s<t} <k_t, e^{g_t - g_s} k_s> w_s)
    (a unit lower-triangular system in the w of the chunk),
      o_t = S0^T (e^{g_t} q_t) + sum_{s<=t} <q_t, e^{g_t - g_s} k_s> w_s,
      S_end = e^{g_C} S0 + sum_s (e^{g_C - g_s} k_s) w_s^T.
    REQUIRES: chunk <= 16 (decays are at least e^-5 per step: the factors of a decay ratio
    split at the chunk's middle stay below e^40)."""
    B, T, H, D = q.shape
    pad = (-T) % chunk
    q, k, v, la = (torch.nn.functional.pad(t.transpose(1, 2), (0, 0, 0, pad))
                   for t in (q, k, v, torch.log(alpha)))                               # [B, H, T', D]
    beta = torch.nn.functional.pad(beta.transpose(1, 2), (0, pad))                    # [B, H, T']
    if chunk > 16:
        raise ValueError("kda_chunked: chunks of at most 16 positions, not %d" % chunk)
    C = chunk
    later = torch.tril(torch.ones(C, C, dtype=torch.bool))                            # s <= t
    strict = torch.tril(torch.ones(C, C, dtype=torch.bool), -1)                       # s < t
    eye = torch.eye(C)
    outs = []
    for c0 in range(0, T + pad, C):
        qc, kc, vc, bc = q[:, :, c0:c0 + C], k[:, :, c0:c0 + C], v[:, :, c0:c0 + C], beta[:, :, c0:c0 + C]
        g = torch.cumsum(la[:, :, c0:c0 + C], dim=2)                                   # [B, H, C, D]
        # <x_t, e^{g_t - g_s} k_s> = <x_t e^{g_t - m}, k_s e^{m - g_s}> with m the chunk's middle:
        # both factors stay within e^{+-|g_C|/2} (<= e^40 for chunks of 16), so no overflow.
        m = g[:, :, C // 2:C // 2 + 1]
        k_in = kc * torch.exp(m - g)
        kk = ((kc * torch.exp(g - m)) @ k_in.transpose(-1, -2)) * strict            # [B, H, t, s]
        qk = ((qc * torch.exp(g - m)) @ k_in.transpose(-1, -2)) * later
        eg = torch.exp(g)
        rhs = bc[..., None] * (vc - torch.einsum("bhcd,bhtc->bhtd", S, eg * kc))
        w = torch.linalg.solve_triangular(eye + bc[..., None] * kk, rhs, upper=False, unitriangular=True)
        outs.append(torch.einsum("bhcd,bhtc->bhtd", S, eg * qc) + qk @ w)
        tail = torch.exp(g[:, :, -1:, :] - g) * kc                                     # e^{g_C - g_s} k_s
        S = eg[:, :, -1, :, None] * S + torch.einsum("bhsc,bhsd->bhcd", tail, w)
    o = torch.cat(outs, dim=2)[:, :, :T]
    return o.transpose(1, 2), S


# ----------------------------------------------------------------------------- model

class K3(torch.nn.Module):
    """K3 decoder. forward(ids, state) -> (hidden after the final norm [B, T, hidden], state);
    logits(h) applies the head."""

    def __init__(self, dims, seed):
        super().__init__()
        self.d = dims
        self.fake_quant = True
        # KDA's recurrence step by step (0, the triage model's training) or in chunks of this
        # many positions (kda_chunked: the same function, far fewer Python steps on long
        # sequences; the story model's training).
        self.kda_chunk = 0
        g = torch.Generator().manual_seed(seed)
        self._big = set()                       # names stored as BF16 in the checkpoint
        d = dims
        H = d.hidden

        def lin(name, out_dim, in_dim, gain=1.0, big=True):
            t = torch.randn(out_dim, in_dim, generator=g) * (gain / math.sqrt(in_dim))
            self._add(name, t, big)

        def ones(name, n):
            self._add(name, torch.ones(n), False)

        self._add("embed_tokens.weight", torch.randn(d.vocab, H, generator=g), True)
        lin("lm_head.weight", d.vocab, H)
        ones("norm.weight", H)
        ones("output_attn_res_norm.weight", H)
        self._add("output_attn_res_proj.weight", torch.zeros(1, H), False)
        for L in range(d.layers):
            p = "layers.%d." % L
            for n in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
                ones(p + n + ".weight", H)
            for n in ("self_attention_res_proj", "mlp_res_proj"):
                self._add(p + n + ".weight", torch.zeros(1, H), False)
            a = p + "self_attn."
            if d.is_mla(L):
                lin(a + "q_a_proj.weight", d.q_lora, H)
                ones(a + "q_a_layernorm.weight", d.q_lora)
                lin(a + "q_b_proj.weight", d.heads * (d.nope + d.rope), d.q_lora)
                lin(a + "kv_a_proj_with_mqa.weight", d.kv_lora + d.rope, H)
                ones(a + "kv_a_layernorm.weight", d.kv_lora)
                lin(a + "kv_b_proj.weight", d.heads * (d.nope + d.v_dim), d.kv_lora)
                lin(a + "g_proj.weight", d.heads * d.v_dim, H)
                lin(a + "o_proj.weight", H, d.heads * d.v_dim, gain=0.5)
            else:
                P, D, K = d.kda_heads * d.kda_head_dim, d.kda_head_dim, d.conv_kernel
                for n in "qkvg":
                    lin(a + n + "_proj.weight", P, H)
                lin(a + "o_proj.weight", H, P, gain=0.5)
                for n in "qkv":
                    conv = torch.randn(P, 1, K, generator=g) * 0.1
                    conv[:, 0, K - 1] += 1.0                          # near identity at the start
                    self._add(a + n + "_conv1d.weight", conv, False)
                lin(a + "f_a_proj.weight", D, H)
                lin(a + "f_b_proj.weight", P, D)
                lin(a + "b_proj.weight", d.kda_heads, H)
                self._add(a + "A_log", torch.zeros(d.kda_heads), False)
                self._add(a + "dt_bias", torch.rand(P, generator=g) * -3.0, False)
                ones(a + "o_norm.weight", D)
            if L < d.dense_layers:
                lin(p + "mlp.gate_proj.weight", d.dense_inter, H)
                lin(p + "mlp.up_proj.weight", d.dense_inter, H)
                lin(p + "mlp.down_proj.weight", H, d.dense_inter, gain=0.5)
            else:
                m = p + "block_sparse_moe."
                lin(m + "gate.weight", d.experts_n, H, big=False)
                self._add(m + "gate.e_score_correction_bias", torch.zeros(d.experts_n), False, trained=False)
                lin(m + "routed_expert_down_proj.weight", d.latent, H)
                lin(m + "routed_expert_up_proj.weight", H, d.latent, gain=0.5)
                ones(m + "routed_expert_norm.weight", d.latent)
                si = d.shared * d.moe_inter
                lin(m + "shared_experts.gate_proj.weight", si, H)
                lin(m + "shared_experts.up_proj.weight", si, H)
                lin(m + "shared_experts.down_proj.weight", H, si, gain=0.5)
                E = d.experts_n
                for n, (o, i) in (("w1", (d.moe_inter, d.latent)), ("w2", (d.latent, d.moe_inter)),
                                  ("w3", (d.moe_inter, d.latent))):
                    self._add(m + "experts." + n, torch.randn(E, o, i, generator=g) / math.sqrt(i), False)

    # parameters ----------------------------------------------------------------
    def _add(self, name, value, big, trained=True):
        t = torch.nn.Parameter(value.float(), requires_grad=trained)
        self.register_parameter(name.replace(".", "__"), t)
        if big:
            self._big.add(name)

    def named_weights(self):
        """(checkpoint-style name, parameter) for every parameter."""
        for n, t in self.named_parameters():
            yield n.replace("__", "."), t

    def p(self, name):
        t = getattr(self, name.replace(".", "__"))
        if self.fake_quant and name in self._big:
            return straight_through(t, bf16_round(t))
        return t

    def expert(self, layer, which):
        """[E][out][in] routed expert matrices of a layer (MXFP4-rounded when fake_quant)."""
        t = getattr(self, ("layers.%d.block_sparse_moe.experts.%s" % (layer, which)).replace(".", "__"))
        return straight_through(t, mxfp4_round(t)) if self.fake_quant else t

    # layers ----------------------------------------------------------------------
    def kda(self, L, x, st):
        """Section 4 on the normed x [B, T, hidden]; st: {'conv': [B, K-1, 3P], 'S': [B, H, D, D]}."""
        d = self.d
        B, T, _ = x.shape
        H, D, K = d.kda_heads, d.kda_head_dim, d.conv_kernel
        P = H * D
        a = "layers.%d.self_attn." % L
        pre = torch.cat([x @ self.p(a + n + "_proj.weight").T for n in "qkv"], dim=-1)   # [B, T, 3P]
        hist = torch.cat([st["conv"], pre], dim=1)                                     # [B, K-1+T, 3P]
        w = torch.cat([self.p(a + n + "_conv1d.weight").reshape(P, K) for n in "qkv"], dim=0)  # [3P, K]
        conv = sum(w[:, j] * hist[:, j:j + T] for j in range(K))      # w[:, K-1] * current input
        st_conv = hist[:, -(K - 1):]
        act = torch.nn.functional.silu(conv)
        q, k, v = (t.reshape(B, T, H, D) for t in act.split(P, dim=-1))
        q = q / torch.sqrt(torch.sum(q * q, dim=-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt(torch.sum(k * k, dim=-1, keepdim=True) + 1e-6)
        beta = torch.sigmoid(x @ self.p(a + "b_proj.weight").T)                        # [B, T, H]
        z = (x @ self.p(a + "f_a_proj.weight").T) @ self.p(a + "f_b_proj.weight").T
        z = (z + self.p(a + "dt_bias")).reshape(B, T, H, D)
        A = torch.exp(self.p(a + "A_log")[:H])
        alpha = torch.exp(d.gate_lower_bound * torch.sigmoid(A[None, None, :, None] * z))
        q = q * D ** -0.5
        if self.kda_chunk:
            o, S = kda_chunked(q, k, v, beta, alpha, st["S"], self.kda_chunk)
            o = rms_norm(o, self.p(a + "o_norm.weight"), d.eps).reshape(B, T, P)
            o = o * torch.sigmoid(x @ self.p(a + "g_proj.weight").T)
            return o @ self.p(a + "o_proj.weight").T, {"conv": st_conv, "S": S}
        S = st["S"]
        outs = []
        # Per-step views by unbind (one gradient stack, not a full-size zero tensor per step)
        # and products as multiply-and-sum (tiny batched matmuls are slow on a CPU).
        steps = zip(alpha.unbind(1), k.unbind(1), v.unbind(1), beta.unbind(1), q.unbind(1))
        for a_t, k_t, v_t, b_t, q_t in steps:
            S = a_t[..., None] * S                                                     # decay rows
            u = (k_t[..., None] * S).sum(-2)                                           # S^T k
            S = S + k_t[..., None] * (b_t[..., None] * (v_t - u))[:, :, None, :]       # delta rule
            outs.append((q_t[..., None] * S).sum(-2))                                  # S^T q, updated S
        o = torch.stack(outs, dim=1)                                                   # [B, T, H, D]
        o = rms_norm(o, self.p(a + "o_norm.weight"), d.eps).reshape(B, T, P)
        o = o * torch.sigmoid(x @ self.p(a + "g_proj.weight").T)
        return o @ self.p(a + "o_proj.weight").T, {"conv": st_conv, "S": S}

    def mla(self, L, x, st):
        """Section 5 (plain form) on x [B, T, hidden]; st: {'lat': [B, S0, r], 'kr': [B, S0, rope]}."""
        d = self.d
        B, T, _ = x.shape
        nh, dn, dr, dv, r = d.heads, d.nope, d.rope, d.v_dim, d.kv_lora
        a = "layers.%d.self_attn." % L
        qa = rms_norm(x @ self.p(a + "q_a_proj.weight").T, self.p(a + "q_a_layernorm.weight"), d.eps)
        q = (qa @ self.p(a + "q_b_proj.weight").T).reshape(B, T, nh, dn + dr)
        c = x @ self.p(a + "kv_a_proj_with_mqa.weight").T
        lat = torch.cat([st["lat"], rms_norm(c[..., :r], self.p(a + "kv_a_layernorm.weight"), d.eps)], dim=1)
        kr = torch.cat([st["kr"], c[..., r:]], dim=1)                                  # [B, S, dr]
        S = lat.shape[1]
        kv = (lat @ self.p(a + "kv_b_proj.weight").T).reshape(B, S, nh, dn + dv)
        score = (torch.einsum("bthd,bshd->bhts", q[..., :dn], kv[..., :dn])
                 + torch.einsum("bthd,bsd->bhts", q[..., dn:], kr)) / math.sqrt(dn + dr)
        first = S - T                                                 # absolute position of row 0
        causal = torch.arange(S)[None, :] <= (first + torch.arange(T))[:, None]
        p = torch.softmax(score.masked_fill(~causal, float("-inf")), dim=-1)
        o = torch.einsum("bhts,bshv->bthv", p, kv[..., dn:]).reshape(B, T, nh * dv)
        o = o * torch.sigmoid(x @ self.p(a + "g_proj.weight").T)
        return o @ self.p(a + "o_proj.weight").T, {"lat": lat, "kr": kr}

    def dense_mlp(self, L, x):
        m = "layers.%d.mlp." % L
        d = self.d
        h = situ_glu(x @ self.p(m + "gate_proj.weight").T, x @ self.p(m + "up_proj.weight").T,
                     d.situ_beta, d.situ_linear_beta)
        return h @ self.p(m + "down_proj.weight").T

    def latent_moe(self, L, x, loads):
        """Section 6 on x [B, T, hidden]; adds each expert's token count to loads[L]."""
        d = self.d
        m = "layers.%d.block_sparse_moe." % L
        B, T, Hd = x.shape
        xf = x.reshape(B * T, Hd)
        s = torch.sigmoid(xf @ self.p(m + "gate.weight").T)                            # [N, E]
        biased = s + self.p(m + "gate.e_score_correction_bias")
        sel = torch.sort(biased.detach(), dim=-1, descending=True, stable=True).indices[:, :d.top_k]
        ws = torch.gather(s, 1, sel)
        ws = ws / (ws.sum(-1, keepdim=True) + 1e-20)                 # renormalize; scaling factor 1
        z = xf @ self.p(m + "routed_expert_down_proj.weight").T                       # [N, latent]
        w1, w2, w3 = (self.expert(L, n) for n in ("w1", "w2", "w3"))
        acc = torch.zeros_like(z)
        for e in range(d.experts_n):
            rows, slot = torch.nonzero(sel == e, as_tuple=True)
            if loads is not None:
                loads[L][e] += rows.numel()
            if rows.numel() == 0:
                continue
            zr = z[rows]
            y = situ_glu(zr @ w1[e].T, zr @ w3[e].T, d.situ_beta, d.situ_linear_beta) @ w2[e].T
            acc = acc.index_add(0, rows, ws[rows, slot][:, None] * y)
        acc = rms_norm(acc, self.p(m + "routed_expert_norm.weight"), d.eps)
        out = acc @ self.p(m + "routed_expert_up_proj.weight").T
        sh = m + "shared_experts."
        h = situ_glu(xf @ self.p(sh + "gate_proj.weight").T, xf @ self.p(sh + "up_proj.weight").T,
                     d.situ_beta, d.situ_linear_beta)
        out = out + h @ self.p(sh + "down_proj.weight").T
        return out.reshape(B, T, Hd)

    # the decoder -----------------------------------------------------------------
    def empty_state(self, batch):
        d = self.d
        st = []
        for L in range(d.layers):
            if d.is_mla(L):
                st.append({"lat": torch.zeros(batch, 0, d.kv_lora), "kr": torch.zeros(batch, 0, d.rope)})
            else:
                P = d.kda_heads * d.kda_head_dim
                st.append({"conv": torch.zeros(batch, d.conv_kernel - 1, 3 * P),
                           "S": torch.zeros(batch, d.kda_heads, d.kda_head_dim, d.kda_head_dim)})
        return st

    @staticmethod
    def expand_state(state, batch):
        """A batch-1 state repeated for `batch` sequences (gradients flow back to the one)."""
        return [{k: v.expand(batch, *v.shape[1:]) for k, v in s.items()} for s in state]

    def forward(self, ids, state=None, loads=None):
        """ids [B, T] continuing `state` (None: from the start). Returns (h [B, T, hidden]
        after the final RMSNorm, the state after the last position)."""
        d = self.d
        B, T = ids.shape
        state = state if state is not None else self.empty_state(B)
        new_state = []
        h = self.p("embed_tokens.weight")[ids]
        blocks = []
        for L in range(d.layers):
            p = "layers.%d." % L
            prefix = h
            if blocks:
                h = attn_res(blocks + [prefix], self.p(p + "self_attention_res_norm.weight"),
                             self.p(p + "self_attention_res_proj.weight"), d.eps)
            if L % d.block_size == 0:
                blocks.append(prefix)
                prefix = None
            xn = rms_norm(h, self.p(p + "input_layernorm.weight"), d.eps)
            attn = self.mla if d.is_mla(L) else self.kda
            a, st = attn(L, xn, state[L])
            new_state.append(st)
            prefix = a if prefix is None else prefix + a
            h = attn_res(blocks + [prefix], self.p(p + "mlp_res_norm.weight"),
                         self.p(p + "mlp_res_proj.weight"), d.eps)
            xn = rms_norm(h, self.p(p + "post_attention_layernorm.weight"), d.eps)
            m = self.dense_mlp(L, xn) if L < d.dense_layers else self.latent_moe(L, xn, loads)
            prefix = prefix + m
            h = prefix
        h = attn_res(blocks + [h], self.p("output_attn_res_norm.weight"),
                     self.p("output_attn_res_proj.weight"), d.eps)
        return rms_norm(h, self.p("norm.weight"), d.eps), new_state

    def logits(self, h):
        return h @ self.p("lm_head.weight").T
