"""config.json, k3-model.md section 1.

Two forms are accepted:
  nested (released): the language model under `text_config`, the layer map and the KDA
      settings under `text_config.linear_attn_config`;
  flat (test fixtures): the same keys at the top level, with the aliases of the
      section-1 table (`full_attn_layers`, `kda_num_heads`, `kda_head_dim`,
      `short_conv_kernel_size`, `gate_lower_bound`, `situ_beta`, `situ_linear_beta`).
`quantization_config` sits at the top level in both forms.

A missing required key is an error naming the key; no dimension gets a default.
"""
import json
import os
from dataclasses import dataclass, field
from typing import List, Optional


class ConfigError(ValueError):
    pass


# (field name, nested location, flat alias or None). Location "lin" = linear_attn_config.
_REQUIRED = [
    ("hidden_size", "text", None),
    ("num_hidden_layers", "text", None),
    ("vocab_size", "text", None),
    ("rms_norm_eps", "text", None),
    ("full_attn_layers", "lin", "full_attn_layers"),
    ("kda_num_heads", "lin:num_heads", "kda_num_heads"),
    ("kda_head_dim", "lin:head_dim", "kda_head_dim"),
    ("short_conv_kernel_size", "lin", "short_conv_kernel_size"),
    ("num_attention_heads", "text", None),
    ("q_lora_rank", "text", None),
    ("kv_lora_rank", "text", None),
    ("qk_nope_head_dim", "text", None),
    ("qk_rope_head_dim", "text", None),
    ("v_head_dim", "text", None),
    ("num_experts", "text", None),
    ("num_experts_per_token", "text", None),
    ("num_shared_experts", "text", None),
    ("routed_expert_hidden_size", "text", None),
    ("moe_intermediate_size", "text", None),
    ("intermediate_size", "text", None),
    ("first_k_dense_replace", "text", None),
    ("attn_res_block_size", "text", None),
    ("situ_beta", "text:activation_situ_beta", "situ_beta"),
    ("situ_linear_beta", "text:activation_situ_linear_beta", "situ_linear_beta"),
]
# Optional keys with the value the section-1 table gives for every K3 checkpoint.
# gate_lower_bound has no default: when absent, section 4's Kimi-Linear gate is used.
_OPTIONAL = [
    ("gate_lower_bound", "lin", "gate_lower_bound", None),
    ("tie_word_embeddings", "text", None, False),
    ("mla_use_output_gate", "text", None, True),
    ("routed_scaling_factor", "text", None, 1.0),
    ("moe_renormalize", "text", None, True),
    ("latent_moe_use_norm", "text", None, True),
]


@dataclass
class K3Config:
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    rms_norm_eps: float
    full_attn_layers: List[int]          # ONE-based layer numbers that are MLA
    kda_num_heads: int                   # H
    kda_head_dim: int                    # D (d_k = d_v = D)
    short_conv_kernel_size: int          # K
    num_attention_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    num_experts: int
    num_experts_per_token: int
    num_shared_experts: int
    routed_expert_hidden_size: int       # latent width of the routed experts
    moe_intermediate_size: int
    intermediate_size: int               # dense layer(s)
    first_k_dense_replace: int
    attn_res_block_size: int
    situ_beta: float
    situ_linear_beta: float
    gate_lower_bound: Optional[float] = None
    tie_word_embeddings: bool = False
    mla_use_output_gate: bool = True
    routed_scaling_factor: float = 1.0
    moe_renormalize: bool = True
    latent_moe_use_norm: bool = True
    quantization_config: Optional[dict] = None
    form: str = "nested"
    extra: dict = field(default_factory=dict)

    def is_mla(self, layer):
        """Zero-based layer `layer` is MLA iff layer+1 is in full_attn_layers (one-based)."""
        return (layer + 1) in self.full_attn_layers

    def is_dense(self, layer):
        return layer < self.first_k_dense_replace

    def layer_kinds(self):
        """E.g. 'KKKMKKKMKKKMM' for the tiny fixture."""
        return "".join("M" if self.is_mla(i) else "K" for i in range(self.num_hidden_layers))

    @property
    def experts_quantized(self):
        q = self.quantization_config
        return bool(q) and q.get("format") == "mxfp4-pack-quantized"


def _lookup(cfg, text, lin, where, flat_alias, form, key):
    if form == "nested":
        if where.startswith("lin"):
            src, name = lin, (where.split(":", 1)[1] if ":" in where else key)
        else:
            src, name = text, (where.split(":", 1)[1] if ":" in where else key)
        shown = ("text_config.linear_attn_config." if where.startswith("lin") else "text_config.") + name
        return (name in src), src.get(name), shown
    # flat: the alias if there is one, else the nested leaf name, at the top level
    names = [flat_alias] if flat_alias else []
    leaf = where.split(":", 1)[1] if ":" in where else key
    if leaf not in names:
        names.append(leaf)
    for n in names:
        if n in cfg:
            return True, cfg[n], n
    return False, None, names[0]


def parse_config(cfg):
    """Parse a config dict (nested or flat form) into a K3Config."""
    if "text_config" in cfg:
        form, text = "nested", cfg["text_config"]
        if "linear_attn_config" not in text:
            raise ConfigError("config.json: missing key text_config.linear_attn_config")
        lin = text["linear_attn_config"]
    else:
        form, text, lin = "flat", cfg, cfg
    vals = {}
    for key, where, alias in _REQUIRED:
        ok, v, shown = _lookup(cfg, text, lin, where, alias, form, key)
        if not ok or v is None:
            raise ConfigError("config.json: missing required key %s" % shown)
        vals[key] = v
    for key, where, alias, default in _OPTIONAL:
        ok, v, _ = _lookup(cfg, text, lin, where, alias, form, key)
        vals[key] = v if ok else default
    act = text.get("hidden_act", "situ")
    if act != "situ":
        raise ConfigError("config.json: hidden_act is %r, only 'situ' is K3" % act)
    c = K3Config(**vals, quantization_config=cfg.get("quantization_config"), form=form)
    c.full_attn_layers = [int(i) for i in c.full_attn_layers]
    for i in c.full_attn_layers:
        if not 1 <= i <= c.num_hidden_layers:
            raise ConfigError("config.json: full_attn_layers entry %d is outside 1..%d (one-based)"
                              % (i, c.num_hidden_layers))
    kda = (lin if form == "nested" else cfg).get("kda_layers")
    if kda is not None:
        want = [i for i in range(1, c.num_hidden_layers + 1) if i not in c.full_attn_layers]
        if sorted(int(i) for i in kda) != want:
            raise ConfigError("config.json: kda_layers is not the complement of full_attn_layers")
    if c.num_experts_per_token > c.num_experts:
        raise ConfigError("config.json: num_experts_per_token > num_experts")
    return c


def load_config(model_dir):
    path = os.path.join(model_dir, "config.json")
    with open(path) as f:
        return parse_config(json.load(f))
