#!/usr/bin/env python3
"""Deterministic random checkpoints in the released Kimi K3 layout (k3-model.md sections 1, 7, 8).

Run with Debian's Python: /usr/bin/python3 tests/reference/make_model.py --out DIR --preset tiny

The same seed and arguments give byte-identical files on any machine: values come from a
counter-based splitmix64 stream keyed by fnv1a64("<seed>:<tensor name>") (k3ref/prng.py),
so a tensor's bytes depend only on the seed, its name and its own shape.

Layout, like the released checkpoint:
  * names `language_model.model.*`, head `language_model.lm_head.weight`;
  * BF16 big matrices (or F32 with --trunk f32); F32 norms, conv weights, A_log, dt_bias,
    the router and its bias, and the attention-residual vectors;
  * routed experts as MXFP4 `weight_packed` + `weight_scale` (or unquantized `.weight`);
  * per layer the non-expert ("trunk") tensors as one contiguous run (sorted by name),
    then each expert's six tensors back to back (w1.packed, w1.scale, w2.packed,
    w2.scale, w3.packed, w3.scale); layers in order, then embed_tokens, lm_head, norm,
    output_attn_res_norm, output_attn_res_proj; data order = header order;
  * one `model.safetensors`, or shards `model-0000N-of-0000M.safetensors` plus
    `model.safetensors.index.json` once the data exceeds --shard-bytes (a layer never
    straddles two shards if it fits in one).

Unquantized experts (--experts bf16|f32) hold exactly the dequantized MXFP4 values of
the same seed, so e.g. presets tiny and tiny-bf16 compute the same function.
"""
import argparse
import json
import math
import os
import re
import sys
import textwrap
import time
from dataclasses import dataclass, fields, replace
from typing import Callable, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from k3ref import mxfp4, prng  # noqa: E402
from k3ref.safetensors import build_header, tensor_nbytes, to_storage_bytes  # noqa: E402

PREFIX = "language_model.model."
HEAD = "language_model.lm_head.weight"
GIB = 1 << 30
RES_PROJ_GAIN = 0.75


# ----------------------------------------------------------------------------- spec

@dataclass
class Spec:
    """Every dimension of a model plus the generator's choices."""
    hidden: int
    layers: int
    vocab: int
    kda_heads: int
    kda_head_dim: int
    conv_kernel: int
    heads: int
    q_lora: int
    kv_lora: int
    nope: int
    rope: int
    v_dim: int
    experts_n: int
    top_k: int
    shared: int
    latent: int
    moe_inter: int
    dense_inter: int
    dense_layers: int
    block_size: int
    full_attn_layers: List[int]
    experts: str = "mxfp4"            # mxfp4 | bf16 | f32
    trunk: str = "bf16"               # bf16 | f32
    a_log_len: int = 0                # 0: H values; else that many (>= H), padded like the fixture
    p255: float = 1.0 / 256           # fraction of MXFP4 blocks with scale 255 (contribute 0)
    router_tie: bool = False          # expert E-1's router row and bias copy expert E-2's
    router_gain: float = 2.0          # router rows' std = gain/sqrt(hidden)
    router_bias: float = 0.2          # e_score_correction_bias uniform in [-b, b]
    tokenizer: bool = False
    gate_lower_bound: float = -5.0
    routed_scaling_factor: float = 1.0


# Dimensions settable on the command line: (option, Spec field, help).
DIM_OPTIONS = [
    ("--hidden", "hidden", "hidden_size"),
    ("--layers", "layers", "num_hidden_layers"),
    ("--vocab", "vocab", "vocab_size (replaced by the tokenizer's size with --tokenizer)"),
    ("--kda-heads", "kda_heads", "linear_attn_config.num_heads (H)"),
    ("--kda-head-dim", "kda_head_dim", "linear_attn_config.head_dim (D)"),
    ("--conv-kernel", "conv_kernel", "linear_attn_config.short_conv_kernel_size (K)"),
    ("--heads", "heads", "num_attention_heads (MLA)"),
    ("--q-lora", "q_lora", "q_lora_rank"),
    ("--kv-lora", "kv_lora", "kv_lora_rank"),
    ("--nope", "nope", "qk_nope_head_dim"),
    ("--rope", "rope", "qk_rope_head_dim"),
    ("--v-dim", "v_dim", "v_head_dim"),
    ("--experts-n", "experts_n", "num_experts (routed, per MoE layer)"),
    ("--top-k", "top_k", "num_experts_per_token"),
    ("--shared", "shared", "num_shared_experts (fused: intermediate = shared * moe_inter)"),
    ("--latent", "latent", "routed_expert_hidden_size (latent width of the experts)"),
    ("--moe-inter", "moe_inter", "moe_intermediate_size"),
    ("--dense-inter", "dense_inter", "intermediate_size (dense layers)"),
    ("--dense-layers", "dense_layers", "first_k_dense_replace"),
    ("--block-size", "block_size", "attn_res_block_size"),
    ("--a-log-len", "a_log_len", "length of each A_log (>= H; 0 = H); extra values are padding"),
]

TINY = dict(hidden=128, layers=13, vocab=256, kda_heads=4, kda_head_dim=16, conv_kernel=4,
            heads=4, q_lora=64, kv_lora=32, nope=24, rope=8, v_dim=16, experts_n=8, top_k=2,
            shared=2, latent=64, moe_inter=64, dense_inter=96, dense_layers=1, block_size=3,
            full_attn_layers=[4, 8, 12, 13], a_log_len=16, p255=1.0 / 32, router_tie=True)

PRESETS = {
    "tiny": dict(TINY, experts="mxfp4", trunk="bf16"),
    "tiny-bf16": dict(TINY, experts="bf16", trunk="bf16"),
    "tiny-f32": dict(TINY, experts="f32", trunk="f32"),
    "small": dict(hidden=512, layers=12, vocab=4096, kda_heads=8, kda_head_dim=64, conv_kernel=4,
                  heads=8, q_lora=192, kv_lora=128, nope=48, rope=16, v_dim=64, experts_n=64,
                  top_k=4, shared=2, latent=256, moe_inter=512, dense_inter=1536, dense_layers=1,
                  block_size=4, full_attn_layers=[4, 8, 11, 12], a_log_len=64, p255=1.0 / 256),
    "demo": dict(hidden=256, layers=13, vocab=4096, kda_heads=4, kda_head_dim=64, conv_kernel=4,
                 heads=4, q_lora=128, kv_lora=64, nope=48, rope=16, v_dim=64, experts_n=16,
                 top_k=2, shared=2, latent=128, moe_inter=256, dense_inter=768, dense_layers=1,
                 block_size=3, full_attn_layers=[4, 8, 12, 13], a_log_len=0, p255=1.0 / 256,
                 tokenizer=True),
    "k3-mini": dict(hidden=1024, layers=24, vocab=32768, kda_heads=8, kda_head_dim=128,
                    conv_kernel=4, heads=8, q_lora=384, kv_lora=128, nope=64, rope=32, v_dim=64,
                    experts_n=512, top_k=8, shared=2, latent=512, moe_inter=512,
                    dense_inter=4096, dense_layers=1, block_size=6,
                    full_attn_layers=[4, 8, 12, 16, 20, 23, 24], a_log_len=0, p255=1.0 / 256),
    # The released K3's shapes (k3-model.md section 1). 1.56 TB: only ever written with --sparse.
    "k3": dict(hidden=7168, layers=93, vocab=163840, kda_heads=96, kda_head_dim=128, conv_kernel=4,
               heads=96, q_lora=1536, kv_lora=512, nope=128, rope=64, v_dim=128, experts_n=896,
               top_k=16, shared=2, latent=3584, moe_inter=3072, dense_inter=33792,
               dense_layers=1, block_size=12, full_attn_layers=list(range(4, 93, 4)) + [93],
               a_log_len=128, p255=0.0, experts="mxfp4", trunk="bf16"),
}
PRESET_NOTES = {
    "tiny": "the conformance tiny shape: hidden 128, 13 layers KKKMKKKMKKKMM, vocab 256, 8 experts "
            "top-2, latent 64, moe_inter 64, dense 96, block 3; MXFP4 experts, A_log padded to D, "
            "1/32 of MXFP4 blocks with scale 255, a designed router tie (expert 7 copies 6); 3.8 MB",
    "tiny-bf16": "tiny with unquantized BF16 experts (same values as tiny's dequantized MXFP4)",
    "tiny-f32": "tiny with everything F32 (like the f32 oracle)",
    "small": "hidden 512, 12 layers, vocab 4096, 64 experts top-4, latent 256, moe_inter 512, "
             "MXFP4; every mechanism; 232 MB",
    "demo": "hidden 256, 13 layers, 16 experts top-2, MXFP4; decodes fast on 2 cores; writes the "
            "tokenizer by default (vocab = the tokenizer's size; --no-tokenizer for vocab 4096)",
    "k3": "the released K3's exact shapes (93 layers, 896 experts, 497k tensors, 1.56 TB); use "
          "--sparse --shard-bytes 17000000000 to write headers over sparse files (~130 MB of disk) "
          "for indexing and planning at real scale",
    "k3-mini": "K3-shaped for disk-streaming benchmarks: hidden 1024, 24 layers, 512 experts top-8 "
               "(4.3% of parameters active per token), MXFP4, vocab 32768, 5.6 GB in 3 shards of <= 2 GiB",
}


def default_full_attn(layers):
    """K3's pattern for other depths: one-based multiples of 4, plus the last layer."""
    return sorted(set(list(range(4, layers + 1, 4)) + [layers]))


# ----------------------------------------------------------------------------- tensors

@dataclass
class T:
    """One tensor to write: name, safetensors dtype, shape and how to make its values."""
    name: str
    dtype: str
    shape: Tuple[int, ...]
    make: Callable[[], np.ndarray]

    @property
    def nbytes(self):
        return tensor_nbytes(self.dtype, self.shape)


class Gen:
    """Value generators; every one keyed by (seed, tensor name)."""

    def __init__(self, seed, spec):
        self.seed = seed
        self.spec = spec

    def key(self, name):
        return prng.tensor_key(self.seed, name)

    def normal(self, name, shape, std):
        return prng.normal(self.key(name), int(np.prod(shape)), std).reshape(shape)

    def uniform(self, name, shape, lo, hi):
        return prng.uniform(self.key(name), int(np.prod(shape)), lo, hi).reshape(shape)

    def linear(self, name, shape, gain=1.0):
        """[out][in] weight with std gain/sqrt(in): O(1) outputs for O(1)-RMS inputs."""
        return self.normal(name, shape, gain / math.sqrt(shape[1]))

    def gain(self, name, n):
        """Norm gains around 1, different per channel so that applying them matters."""
        return self.uniform(name, (n,), 0.75, 1.25)

    # MXFP4, section 8 --------------------------------------------------------
    @staticmethod
    def e8m0_base(in_dim):
        """Centre exponent so W x is O(1) for O(1)-RMS x: RMS of a uniform random E2M1 code is
        sqrt(68.5/8) ~ 2.93 and E[4^d] = 1.75 for d in {-1,0,1}, so we want 4^m ~ 15 * in_dim
        (nearest within a factor 2 of that in the squared domain). Integer arithmetic only."""
        m = 0
        while 4 ** (m + 1) <= 30 * in_dim:
            m += 1
        return 127 - m

    def mxfp4_packed(self, name, out_dim, in_dim):
        """Uniformly random E2M1 codes (all 16, including -0), packed two per byte."""
        return prng.random_bytes(self.key(name), out_dim * in_dim // 2).reshape(out_dim, in_dim // 2)

    def mxfp4_scale(self, name, out_dim, in_dim):
        """E8M0 exponents base + {-1, 0, +1}; a fraction p255 of the blocks get 255 (zero block)."""
        nb = in_dim // mxfp4.GROUP
        z = prng.u64(self.key(name), out_dim * nb)
        d = (z >> np.uint64(8)) % np.uint64(3)
        s = (self.e8m0_base(in_dim) - 1 + d.astype(np.int64)).astype(np.uint8)
        thresh = int(round(self.spec.p255 * 256))
        s[(z & np.uint64(0xFF)) < np.uint64(thresh)] = mxfp4.SCALE_NAN
        return s.reshape(out_dim, nb)

    def expert_dense(self, base, out_dim, in_dim):
        """Unquantized expert = exactly the dequantized MXFP4 weight of the same names."""
        return mxfp4.dequantize(self.mxfp4_packed(base + "_packed", out_dim, in_dim),
                                self.mxfp4_scale(base + "_scale", out_dim, in_dim))


def layer_tensors(spec, g, L):
    """(trunk tensors, [expert groups]) of layer L."""
    s = spec
    big = "BF16" if s.trunk == "bf16" else "F32"
    small = "F32"
    pre = PREFIX + "layers.%d." % L
    trunk = []

    def add(suffix, dtype, shape, make):
        trunk.append(T(pre + suffix, dtype, tuple(shape), make))

    def lin(suffix, out_dim, in_dim, gain=1.0, dtype=None):
        n = pre + suffix
        add(suffix, dtype or big, (out_dim, in_dim), lambda: g.linear(n, (out_dim, in_dim), gain))

    def gain(suffix, n):
        nm = pre + suffix
        add(suffix, small, (n,), lambda: g.gain(nm, n))

    H = s.hidden
    for nm in ("input_layernorm", "post_attention_layernorm", "self_attention_res_norm", "mlp_res_norm"):
        gain(nm + ".weight", H)
    for nm in ("self_attention_res_proj", "mlp_res_proj"):
        # [1][hidden]; std 0.75/sqrt(hidden): source scores spread ~0.75, so the mix is
        # clearly non-uniform without making the model chaotic (a gain of 1.5 amplified
        # fp32 rounding about 5x more through 13 layers)
        lin(nm + ".weight", 1, H, gain=RES_PROJ_GAIN, dtype=small)

    if (L + 1) in s.full_attn_layers:                    # MLA, section 5
        qk = s.nope + s.rope
        a = "self_attn."
        lin(a + "q_a_proj.weight", s.q_lora, H)
        gain(a + "q_a_layernorm.weight", s.q_lora)
        lin(a + "q_b_proj.weight", s.heads * qk, s.q_lora, gain=1.5)
        lin(a + "kv_a_proj_with_mqa.weight", s.kv_lora + s.rope, H)
        gain(a + "kv_a_layernorm.weight", s.kv_lora)
        lin(a + "kv_b_proj.weight", s.heads * (s.nope + s.v_dim), s.kv_lora)
        lin(a + "g_proj.weight", s.heads * s.v_dim, H)
        lin(a + "o_proj.weight", H, s.heads * s.v_dim)
    else:                                                # KDA, section 4
        P, D, K = s.kda_heads * s.kda_head_dim, s.kda_head_dim, s.conv_kernel
        a = "self_attn."
        for p in "qkvg":
            lin(a + p + "_proj.weight", P, H)
        lin(a + "o_proj.weight", H, P)
        for p in "qkv":
            nm = pre + a + p + "_conv1d.weight"
            add(a + p + "_conv1d.weight", small, (P, 1, K),
                (lambda nm=nm: g.normal(nm, (P, 1, K), 0.6)))
        lin(a + "f_a_proj.weight", D, H)
        lin(a + "f_b_proj.weight", P, D)
        lin(a + "b_proj.weight", s.kda_heads, H)
        n_alog = s.a_log_len or s.kda_heads
        nm_alog = pre + a + "A_log"
        # all entries random (also the padding), so reading A_log per channel is caught
        add(a + "A_log", small, (n_alog,), lambda: g.uniform(nm_alog, (n_alog,), -1.0, 1.5))
        nm_dt = pre + a + "dt_bias"
        add(a + "dt_bias", small, (P,), lambda: g.uniform(nm_dt, (P,), -2.0, 1.0))
        gain(a + "o_norm.weight", D)

    experts = []
    if L < s.dense_layers:                               # dense FFN, section 6
        lin("mlp.gate_proj.weight", s.dense_inter, H)
        lin("mlp.up_proj.weight", s.dense_inter, H)
        lin("mlp.down_proj.weight", H, s.dense_inter)
    else:                                                # LatentMoE, section 6
        m = "block_sparse_moe."
        E = s.experts_n
        nm_r, nm_b = pre + m + "gate.weight", pre + m + "gate.e_score_correction_bias"

        def router():
            w = g.linear(nm_r, (E, H), gain=s.router_gain)
            if s.router_tie and E >= 2:
                w[E - 1] = w[E - 2]
            return w

        def router_bias():
            b = g.uniform(nm_b, (E,), -s.router_bias, s.router_bias)
            if s.router_tie and E >= 2:
                b[E - 1] = b[E - 2]
            return b

        add(m + "gate.weight", small, (E, H), router)
        add(m + "gate.e_score_correction_bias", small, (E,), router_bias)
        lin(m + "routed_expert_down_proj.weight", s.latent, H)
        lin(m + "routed_expert_up_proj.weight", H, s.latent)
        gain(m + "routed_expert_norm.weight", s.latent)
        if s.shared > 0:
            si = s.shared * s.moe_inter
            lin(m + "shared_experts.gate_proj.weight", si, H)
            lin(m + "shared_experts.up_proj.weight", si, H)
            lin(m + "shared_experts.down_proj.weight", H, si)
        shapes = {"w1": (s.moe_inter, s.latent), "w2": (s.latent, s.moe_inter), "w3": (s.moe_inter, s.latent)}
        for e in range(E):
            grp = []
            for w in ("w1", "w2", "w3"):
                base = pre + m + "experts.%d.%s.weight" % (e, w)
                o, i = shapes[w]
                if s.experts == "mxfp4":
                    grp.append(T(base + "_packed", "U8", (o, i // 2),
                                 (lambda b=base, o=o, i=i: g.mxfp4_packed(b + "_packed", o, i))))
                    grp.append(T(base + "_scale", "U8", (o, i // mxfp4.GROUP),
                                 (lambda b=base, o=o, i=i: g.mxfp4_scale(b + "_scale", o, i))))
                else:
                    dt = "BF16" if s.experts == "bf16" else "F32"
                    grp.append(T(base, dt, (o, i), (lambda b=base, o=o, i=i: g.expert_dense(b, o, i))))
            experts.append(grp)
    trunk.sort(key=lambda t: t.name)
    return trunk, experts


def final_tensors(spec, g):
    big = "BF16" if spec.trunk == "bf16" else "F32"
    V, H = spec.vocab, spec.hidden
    n_emb, n_head = PREFIX + "embed_tokens.weight", HEAD
    n_norm, n_rn, n_rp = (PREFIX + "norm.weight", PREFIX + "output_attn_res_norm.weight",
                          PREFIX + "output_attn_res_proj.weight")
    return [
        T(n_emb, big, (V, H), lambda: g.normal(n_emb, (V, H), 1.0)),
        # gain 2: logits with a spread of ~2 (|logit| < ~10): top-2 margins well above fp32
        # rounding, absolute errors of an fp32 engine still ~1e-4 or less
        T(n_head, big, (V, H), lambda: g.linear(n_head, (V, H), gain=2.0)),
        T(n_norm, "F32", (H,), lambda: g.gain(n_norm, H)),
        T(n_rn, "F32", (H,), lambda: g.gain(n_rn, H)),
        T(n_rp, "F32", (1, H), lambda: g.linear(n_rp, (1, H), gain=RES_PROJ_GAIN)),
    ]


def plan_units(spec, g):
    """Units in file order: one per layer (trunk run + expert groups), then the final one.
    Each unit is a list of atoms (lists of tensors kept together when a unit must split)."""
    units = []
    for L in range(spec.layers):
        trunk, experts = layer_tensors(spec, g, L)
        units.append([[t] for t in trunk] + experts)
    units.append([[t] for t in final_tensors(spec, g)])
    return units


def assign_shards(units, shard_bytes):
    """Greedy packing: a unit that fits in one shard never straddles two; a unit larger than
    a shard is split between atoms (a trunk tensor, or one expert's six tensors)."""
    size = lambda atoms: sum(t.nbytes for a in atoms for t in a)
    shards, cur, cur_size = [], [], 0
    for unit in units:
        us = size(unit)
        if cur and cur_size + us > shard_bytes:
            shards.append(cur)
            cur, cur_size = [], 0
        pieces = [unit] if us <= shard_bytes else [[a] for a in unit]
        for piece in pieces:
            ps = size(piece)
            if cur and cur_size + ps > shard_bytes:
                shards.append(cur)
                cur, cur_size = [], 0
            cur.extend(t for a in piece for t in a)
            cur_size += ps
    if cur:
        shards.append(cur)
    return shards


# ----------------------------------------------------------------------------- config

def make_config(spec, form):
    """config.json as a dict, nested (released) or flat (section 1 aliases)."""
    s = spec
    kda_layers = [i for i in range(1, s.layers + 1) if i not in s.full_attn_layers]
    text = {
        "hidden_size": s.hidden, "num_hidden_layers": s.layers, "vocab_size": s.vocab,
        "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
        "num_attention_heads": s.heads, "num_key_value_heads": s.heads,
        "q_lora_rank": s.q_lora, "kv_lora_rank": s.kv_lora,
        "qk_nope_head_dim": s.nope, "qk_rope_head_dim": s.rope, "v_head_dim": s.v_dim,
        "mla_use_output_gate": True, "mla_use_nope": True,
        "num_experts": s.experts_n, "num_experts_per_token": s.top_k,
        "num_shared_experts": s.shared, "routed_expert_hidden_size": s.latent,
        "moe_intermediate_size": s.moe_inter, "routed_scaling_factor": s.routed_scaling_factor,
        "moe_renormalize": True, "latent_moe_use_norm": True,
        "moe_router_activation_func": "sigmoid", "moe_layer_freq": 1,
        "use_grouped_topk": True, "num_expert_group": 1, "topk_group": 1,
        "first_k_dense_replace": s.dense_layers, "intermediate_size": s.dense_inter,
        "attn_res_block_size": s.block_size, "hidden_act": "situ",
        "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
        "model_type": "kimi_linear", "architectures": ["KimiLinearForCausalLM"],
    }
    lin = {"full_attn_layers": list(s.full_attn_layers), "kda_layers": kda_layers,
           "num_heads": s.kda_heads, "head_dim": s.kda_head_dim,
           "short_conv_kernel_size": s.conv_kernel, "gate_lower_bound": s.gate_lower_bound,
           "use_full_rank_gate": True}
    quant = None
    if s.experts == "mxfp4":
        quant = {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized",
                 "group_size": 32, "ignore": ["re:.*shared_experts.*"]}
    if form == "nested":
        cfg = {"model_type": "kimi_k3", "architectures": ["KimiK3ForConditionalGeneration"],
               "text_config": dict(text, linear_attn_config=lin)}
    else:
        cfg = {"model_type": "kimi_k3", "architectures": ["KimiK3ForConditionalGeneration"]}
        cfg.update({k: v for k, v in text.items()
                    if k not in ("activation_situ_beta", "activation_situ_linear_beta")})
        cfg.update({"full_attn_layers": lin["full_attn_layers"], "kda_num_heads": s.kda_heads,
                    "kda_head_dim": s.kda_head_dim, "short_conv_kernel_size": s.conv_kernel,
                    "gate_lower_bound": s.gate_lower_bound, "situ_beta": 4.0,
                    "situ_linear_beta": 25.0})
    if quant:
        cfg["quantization_config"] = quant
    return cfg


# ----------------------------------------------------------------------------- writing

OWNED = re.compile(r"^(config\.json|model\.safetensors|model\.safetensors\.index\.json|"
                   r"model-\d{5}-of-\d{5}\.safetensors|tiktoken\.model|tokenizer_config\.json)$")


def prepare_dir(out, force):
    if os.path.isdir(out) and os.listdir(out):
        if not force:
            sys.exit("make_model: %s is not empty (use --force to replace a generated model)" % out)
        others = [f for f in os.listdir(out) if not OWNED.match(f)]
        if others:
            sys.exit("make_model: %s holds files this tool does not write (%s); refusing --force"
                     % (out, ", ".join(sorted(others)[:5])))
        for f in os.listdir(out):
            os.remove(os.path.join(out, f))
    os.makedirs(out, exist_ok=True)


def tokenizer_module():
    """tests/reference/k3_tokenizer_gen.py (another engineer's), imported lazily: its
    write_tokenizer(out_dir) writes tiktoken.model + tokenizer_config.json and returns the
    total vocabulary size (BPE ranks + 256 specials)."""
    try:
        import k3_tokenizer_gen  # noqa
    except ImportError as e:
        sys.exit("make_model: --tokenizer needs tests/reference/k3_tokenizer_gen.py "
                 "(write_tokenizer(out_dir) -> vocab size), which is not available: %s" % e)
    return k3_tokenizer_gen


def use_values(units, values):
    """Makes every tensor of `units` take its value from `values` (full tensor name -> array:
    uint8 for MXFP4 `weight_packed`/`weight_scale`, floats otherwise, stored with the tensor's
    dtype) instead of the generator. ValueError naming the tensor when one is missing, has
    another shape, or is not part of the layout."""
    names = set()
    for unit in units:
        for atom in unit:
            for t in atom:
                names.add(t.name)
                if t.name not in values:
                    raise ValueError("no value for tensor %s %s" % (t.name, t.shape))
                v = values[t.name]
                if tuple(v.shape) != t.shape:
                    raise ValueError("tensor %s: value of shape %s, the layout needs %s"
                                     % (t.name, tuple(v.shape), t.shape))
                if (t.dtype == "U8") != (v.dtype == np.uint8):
                    raise ValueError("tensor %s: %s value for a %s tensor" % (t.name, v.dtype, t.dtype))
                t.make = (lambda v=v: v)
    extra = sorted(set(values) - names)
    if extra:
        raise ValueError("values for tensors outside the layout: %s" % ", ".join(extra[:5]))


def write_model(spec, out, seed=1, shard_bytes=2 * GIB, config_form="nested", header_align=8,
                force=False, log=None, sparse=False, values=None):
    """Generate the checkpoint into `out`. Returns a summary dict. With `sparse`, only the
    headers are written and each file is extended to its full size without data (reads
    return zeros): the real layout at any scale for a few MB of disk. With `values` (see
    use_values) the tensors hold those values instead of random ones: a trained model in
    the released layout."""
    t0 = time.time()
    validate(spec)
    tok = tokenizer_module() if spec.tokenizer else None
    prepare_dir(out, force)
    if tok:
        spec = replace(spec, vocab=int(tok.write_tokenizer(out)))
    g = Gen(seed, spec)
    units = plan_units(spec, g)
    if values is not None:
        use_values(units, values)
    shards = assign_shards(units, shard_bytes)
    meta = {"format": "pt"}
    names = (["model.safetensors"] if len(shards) == 1 else
             ["model-%05d-of-%05d.safetensors" % (i + 1, len(shards)) for i in range(len(shards))])
    total = 0
    weight_map = {}
    for fname, tensors in zip(names, shards):
        with open(os.path.join(out, fname), "wb") as f:
            header = build_header([(t.name, t.dtype, t.shape) for t in tensors], meta, header_align)
            f.write(header)
            for t in tensors:
                if not sparse:
                    data = to_storage_bytes(t.make(), t.dtype)
                    assert len(data) == t.nbytes, t.name
                    f.write(data)
                total += t.nbytes
                weight_map[t.name] = fname
            if sparse:
                f.truncate(len(header) + sum(t.nbytes for t in tensors))
        if log:
            log("  wrote %s (%d tensors)" % (fname, len(tensors)))
    if len(shards) > 1:
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
            f.write("\n")
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(make_config(spec, config_form), f, indent=1)
        f.write("\n")
    on_disk = sum(os.path.getsize(os.path.join(out, fn)) for fn in os.listdir(out))
    return {"dir": out, "files": len(names), "tensors": len(weight_map), "data_bytes": total,
            "disk_bytes": on_disk, "seconds": time.time() - t0, "vocab": spec.vocab,
            "params": param_counts(spec)}


def param_counts(spec):
    """Total and per-token-active parameter counts (MXFP4 codes count as parameters)."""
    g = Gen(0, spec)
    total = active = 0
    for L in range(spec.layers):
        trunk, experts = layer_tensors(spec, g, L)
        n_tr = sum(int(np.prod(t.shape)) for t in trunk)
        per_e = 2 * spec.moe_inter * spec.latent + spec.latent * spec.moe_inter
        total += n_tr + len(experts) * per_e
        active += n_tr + (spec.top_k * per_e if experts else 0)
    emb = 2 * spec.vocab * spec.hidden
    return {"total": total + emb, "active": active + spec.vocab * spec.hidden,
            "active_fraction": (active + spec.vocab * spec.hidden) / (total + emb)}


def validate(s):
    if s.experts not in ("mxfp4", "bf16", "f32") or s.trunk not in ("bf16", "f32"):
        sys.exit("make_model: --experts must be mxfp4|bf16|f32 and --trunk bf16|f32")
    if s.experts == "mxfp4" and (s.latent % 32 or s.moe_inter % 32):
        sys.exit("make_model: MXFP4 needs latent and moe_inter to be multiples of 32")
    if s.top_k > s.experts_n:
        sys.exit("make_model: --top-k exceeds --experts-n")
    if s.a_log_len and s.a_log_len < s.kda_heads:
        sys.exit("make_model: --a-log-len must be >= --kda-heads")
    bad = [i for i in s.full_attn_layers if not 1 <= i <= s.layers]
    if bad:
        sys.exit("make_model: --full-attn-layers are one-based in 1..%d; got %s" % (s.layers, bad))


# ----------------------------------------------------------------------------- CLI

def build_parser():
    presets = "\n".join(textwrap.fill(PRESET_NOTES[k], 100, initial_indent="  %-11s" % k,
                                       subsequent_indent=" " * 13, break_on_hyphens=False)
                        for k in PRESETS)
    tail = textwrap.fill("Explicit dimensions override the preset's; without --preset every dimension is "
                         "required. --full-attn-layers defaults to the K3 pattern (one-based multiples "
                         "of 4, plus the last layer) when --layers is given without it.", 100,
                         break_on_hyphens=False)
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="presets:\n" + presets + "\n\n" + tail + "\n\nexample:\n  /usr/bin/python3 "
               "tests/reference/make_model.py --out /tmp/tiny --preset tiny --seed 1")
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=1, help="PRNG seed (default 1)")
    ap.add_argument("--experts", choices=["mxfp4", "bf16", "f32"], help="routed expert storage")
    ap.add_argument("--trunk", choices=["bf16", "f32"], help="dtype of the big non-expert matrices")
    ap.add_argument("--shard-bytes", type=int, default=2 * GIB,
                    help="split into shards + index.json when the data exceeds this (default 2 GiB)")
    ap.add_argument("--config-form", choices=["nested", "flat"], default="nested")
    ap.add_argument("--header-align", type=int, default=8,
                    help="pad each safetensors header so data starts at a multiple of this (1 = no padding)")
    tk = ap.add_mutually_exclusive_group()
    tk.add_argument("--tokenizer", dest="tokenizer", action="store_true", default=None,
                    help="write tiktoken.model + tokenizer_config.json (k3_tokenizer_gen.py); "
                         "vocab_size becomes its size")
    tk.add_argument("--no-tokenizer", dest="tokenizer", action="store_false")
    ap.add_argument("--force", action="store_true", help="replace a model previously written to --out")
    ap.add_argument("--if-missing", action="store_true",
                    help="do nothing when --out already holds a config.json (test fixtures share one model)")
    ap.add_argument("--sparse", action="store_true",
                    help="write headers only, over sparse files of the full size (data reads as zeros)")
    dims = ap.add_argument_group("dimensions")
    for opt, fld, hlp in DIM_OPTIONS:
        dims.add_argument(opt, dest=fld, type=int, help=hlp)
    dims.add_argument("--full-attn-layers", help="one-based MLA layers, e.g. 4,8,12,13")
    dims.add_argument("--p255", type=float, help="fraction of MXFP4 blocks with scale 255")
    dims.add_argument("--router-tie", dest="router_tie", action="store_true", default=None,
                      help="give the last expert the same router row and bias as the one before")
    dims.add_argument("--no-router-tie", dest="router_tie", action="store_false")
    dims.add_argument("--router-gain", type=float,
                      help="router rows' std times sqrt(hidden) (default 2: sigmoid scores near "
                           "saturation, so the bias picks most experts and few distinct ones serve "
                           "a pass; ~0.25 routes close to uniformly)")
    dims.add_argument("--router-bias", type=float,
                      help="the router bias's range [-b, b] (default 0.2)")
    return ap


def spec_from_args(a, ap):
    base = dict(PRESETS[a.preset]) if a.preset else {}
    for _, fld, _ in DIM_OPTIONS:
        if getattr(a, fld) is not None:
            base[fld] = getattr(a, fld)
    if a.full_attn_layers:
        base["full_attn_layers"] = [int(x) for x in a.full_attn_layers.split(",") if x.strip()]
    elif a.layers is not None and (not a.preset or a.layers != PRESETS[a.preset]["layers"]):
        base["full_attn_layers"] = default_full_attn(a.layers)
    for fld in ("experts", "trunk", "tokenizer", "p255", "router_tie", "router_gain", "router_bias"):
        if getattr(a, fld) is not None:
            base[fld] = getattr(a, fld)
    names = {f.name for f in fields(Spec)}
    missing = [opt for opt, fld, _ in DIM_OPTIONS if fld not in base and fld != "a_log_len"]
    if "full_attn_layers" not in base:
        missing.append("--full-attn-layers")
    if missing:
        ap.error("without --preset these are required: " + " ".join(missing))
    if a.tokenizer and a.vocab is not None:
        ap.error("--vocab and --tokenizer conflict: the tokenizer decides the vocabulary size")
    return Spec(**{k: v for k, v in base.items() if k in names})


def main(argv=None):
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.if_missing and os.path.isfile(os.path.join(a.out, "config.json")):
        print("make_model: %s exists; kept" % a.out, file=sys.stderr)
        return
    spec = spec_from_args(a, ap)
    log = lambda m: print(m, file=sys.stderr)
    r = write_model(spec, a.out, seed=a.seed, shard_bytes=a.shard_bytes, config_form=a.config_form,
                    header_align=a.header_align, force=a.force, log=log, sparse=a.sparse)
    p = r["params"]
    log("make_model: %s: %d file(s), %d tensors, %.1f MB on disk, vocab %d, %.2f B params "
        "(%.1f%% active), %.1f s" % (r["dir"], r["files"], r["tensors"], r["disk_bytes"] / 1e6,
                                     r["vocab"], p["total"] / 1e9, 100 * p["active_fraction"],
                                     r["seconds"]))


if __name__ == "__main__":
    main()
