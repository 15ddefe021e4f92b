// config.json → ModelConfig, strictly (see config.h).
#include "engine/model/config.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/io/file.h"

namespace nj {
namespace {

using nlohmann::json;

// Looks keys up in the nested or flat form and converts them with errors that name them.
class ConfigReader {
 public:
  ConfigReader(const json& root, std::string name) : root_(root), name_(std::move(name)) {
    nested_ = root.contains("text_config") && root["text_config"].is_object();
    text_ = nested_ ? &root["text_config"] : &root;
    if (nested_ && text_->contains("linear_attn_config") && (*text_)["linear_attn_config"].is_object())
      linear_ = &(*text_)["linear_attn_config"];
  }

  // Where a key lives, for messages: "text_config.hidden_size".
  std::string path(const std::string& key, bool linear) const {
    if (!nested_) return key;
    return linear ? "text_config.linear_attn_config." + key : "text_config." + key;
  }

  // The value of a text-model key (or, when `linear`, of a linear_attn_config key, which the
  // flat form spells `flat_alias`). nullptr when absent.
  const json* find(const std::string& key, bool linear = false, const std::string& flat_alias = "") const {
    if (linear) {
      if (nested_) {
        if (linear_ && linear_->contains(key)) return &(*linear_)[key];
        return nullptr;
      }
      const std::string& k = flat_alias.empty() ? key : flat_alias;
      if (text_->contains(k)) return &(*text_)[k];
      if (text_->contains(key)) return &(*text_)[key];
      return nullptr;
    }
    if (text_->contains(key)) return &(*text_)[key];
    if (!flat_alias.empty() && text_->contains(flat_alias)) return &(*text_)[flat_alias];
    return nullptr;
  }

  Status missing(const std::string& key, bool linear) const {
    return invalid_argument(name_ + ": missing required key '" + path(key, linear) + "'");
  }
  Status bad(const std::string& key, bool linear, const json& v, const std::string& why) const {
    return invalid_argument(name_ + ": key '" + path(key, linear) + "' = " + v.dump() + ": " + why);
  }

  Status positive_int(const std::string& key, int* out, bool linear = false,
                      const std::string& alias = "", bool allow_zero = false) const {
    const json* v = find(key, linear, alias);
    // In the flat form a message names the key as the file spells it (the alias).
    const std::string& name = (!nested_ && !alias.empty()) ? alias : key;
    if (!v) return missing(name, linear);
    if (!v->is_number_integer()) return bad(name, linear, *v, "expected an integer");
    int64_t x = v->get<int64_t>();
    if (x < (allow_zero ? 0 : 1) || x > (1 << 30))
      return bad(name, linear, *v, allow_zero ? "expected a non-negative integer" : "expected a positive integer");
    *out = static_cast<int>(x);
    return Status();
  }

  Status number(const std::string& key, float* out, bool required, bool linear = false,
                const std::string& alias = "", bool* present = nullptr) const {
    const json* v = find(key, linear, alias);
    if (present) *present = v != nullptr;
    if (!v) return required ? missing(key, linear) : Status();
    if (!v->is_number()) return bad(key, linear, *v, "expected a number");
    double d = v->get<double>();
    if (!std::isfinite(d)) return bad(key, linear, *v, "expected a finite number");
    *out = static_cast<float>(d);
    return Status();
  }

  Status boolean(const std::string& key, bool* out) const {
    const json* v = find(key);
    if (!v) return Status();
    if (!v->is_boolean()) return bad(key, false, *v, "expected true or false");
    *out = v->get<bool>();
    return Status();
  }

  const json& root() const { return root_; }
  const std::string& name() const { return name_; }

 private:
  const json& root_;
  std::string name_;
  bool nested_ = false;
  const json* text_ = nullptr;
  const json* linear_ = nullptr;
};

Status read_layer_map(const ConfigReader& r, ModelConfig* c) {
  const json* full = r.find("full_attn_layers", true, "full_attn_layers");
  if (!full) return r.missing("full_attn_layers", true);
  if (!full->is_array()) return r.bad("full_attn_layers", true, *full, "expected a list of layer numbers");
  c->attention.assign(static_cast<size_t>(c->layers), AttentionKind::kKda);
  for (const json& v : *full) {
    if (!v.is_number_integer()) return r.bad("full_attn_layers", true, v, "expected an integer layer number");
    int64_t one_based = v.get<int64_t>();
    if (one_based < 1 || one_based > c->layers)
      return r.bad("full_attn_layers", true, v,
                   "layer index out of range (one-based, 1.." + std::to_string(c->layers) + ")");
    c->attention[static_cast<size_t>(one_based - 1)] = AttentionKind::kMla;
  }
  // kda_layers, when given, must be exactly the complement.
  if (const json* kda = r.find("kda_layers", true, "kda_layers")) {
    if (!kda->is_array()) return r.bad("kda_layers", true, *kda, "expected a list of layer numbers");
    std::vector<bool> listed(static_cast<size_t>(c->layers), false);
    for (const json& v : *kda) {
      if (!v.is_number_integer()) return r.bad("kda_layers", true, v, "expected an integer layer number");
      int64_t one_based = v.get<int64_t>();
      if (one_based < 1 || one_based > c->layers)
        return r.bad("kda_layers", true, v, "layer index out of range (one-based, 1.." + std::to_string(c->layers) + ")");
      if (c->attention[static_cast<size_t>(one_based - 1)] == AttentionKind::kMla)
        return r.bad("kda_layers", true, v, "layer is also listed in full_attn_layers");
      listed[static_cast<size_t>(one_based - 1)] = true;
    }
    for (int i = 0; i < c->layers; ++i) {
      if (c->attention[static_cast<size_t>(i)] == AttentionKind::kKda && !listed[static_cast<size_t>(i)])
        return r.bad("kda_layers", true, *kda,
                     "layer " + std::to_string(i + 1) + " is in neither full_attn_layers nor kda_layers");
    }
  }
  return Status();
}

Status read_quantization(const ConfigReader& r, ModelConfig* c) {
  const json& root = r.root();
  const json* q = nullptr;
  if (root.contains("quantization_config")) q = &root["quantization_config"];
  else if (root.contains("text_config") && root["text_config"].contains("quantization_config"))
    q = &root["text_config"]["quantization_config"];
  if (!q || q->is_null()) return Status();
  if (!q->is_object()) return invalid_argument(r.name() + ": key 'quantization_config' must be an object");
  std::string format = q->value("format", "");
  if (format != "mxfp4-pack-quantized")
    return invalid_argument(r.name() + ": key 'quantization_config.format' = \"" + format +
                            "\": only mxfp4-pack-quantized is supported");
  int group = q->value("group_size", 32);
  if (group != 32)
    return invalid_argument(r.name() + ": key 'quantization_config.group_size' = " +
                            std::to_string(group) + ": MXFP4 uses groups of 32");
  c->mxfp4_experts = true;
  return Status();
}

Status validate(const ConfigReader& r, const ModelConfig& c) {
  auto fail = [&](const std::string& key, const std::string& value, const std::string& why) {
    return invalid_argument(r.name() + ": key '" + key + "' = " + value + ": " + why);
  };
  if (c.top_k > c.num_experts)
    return fail(r.path("num_experts_per_token", false), std::to_string(c.top_k),
                "top_k exceeds num_experts (" + std::to_string(c.num_experts) + ")");
  if (c.first_k_dense > c.layers)
    return fail(r.path("first_k_dense_replace", false), std::to_string(c.first_k_dense),
                "exceeds num_hidden_layers (" + std::to_string(c.layers) + ")");
  if (c.mxfp4_experts) {
    if (c.latent % 32)
      return fail(r.path("routed_expert_hidden_size", false), std::to_string(c.latent),
                  "MXFP4 experts need a multiple of the group size 32");
    if (c.moe_inter % 32)
      return fail(r.path("moe_intermediate_size", false), std::to_string(c.moe_inter),
                  "MXFP4 experts need a multiple of the group size 32");
  }
  if (!(c.rms_eps > 0))
    return fail(r.path("rms_norm_eps", false), std::to_string(c.rms_eps), "must be positive");
  // The widths the engine derives (ModelConfig::kda_width() and the others) are ints: each
  // size is at most 2^30, but their products are not (found by fuzz_config).
  const int64_t kda_width = int64_t{c.kda_heads} * c.kda_head_dim;
  const int64_t mla_q_width = int64_t{c.heads} * (int64_t{c.qk_nope} + c.qk_rope);
  const int64_t shared_inter = int64_t{c.num_shared} * c.moe_inter;
  constexpr int64_t kMaxWidth = std::numeric_limits<int>::max();
  if (kda_width > kMaxWidth)
    return fail(r.path("head_dim", true), std::to_string(c.kda_head_dim),
                "num_heads x head_dim = " + std::to_string(kda_width) + " is too large");
  if (mla_q_width > kMaxWidth)
    return fail(r.path("num_attention_heads", false), std::to_string(c.heads),
                "num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim) = " +
                    std::to_string(mla_q_width) + " is too large");
  if (shared_inter > kMaxWidth)
    return fail(r.path("num_shared_experts", false), std::to_string(c.num_shared),
                "num_shared_experts x moe_intermediate_size = " + std::to_string(shared_inter) +
                    " is too large");
  return Status();
}

}  // namespace

int ModelConfig::num_kda_layers() const {
  int n = 0;
  for (auto k : attention) n += k == AttentionKind::kKda;
  return n;
}
int ModelConfig::num_mla_layers() const { return layers - num_kda_layers(); }

Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& name) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    return invalid_argument(name + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return invalid_argument(name + ": expected a JSON object");
  ConfigReader r(root, name);
  ModelConfig c;
  NJ_RETURN_IF_ERROR(r.positive_int("hidden_size", &c.hidden));
  NJ_RETURN_IF_ERROR(r.positive_int("num_hidden_layers", &c.layers));
  NJ_RETURN_IF_ERROR(r.positive_int("vocab_size", &c.vocab));
  NJ_RETURN_IF_ERROR(r.number("rms_norm_eps", &c.rms_eps, true));
  NJ_RETURN_IF_ERROR(r.boolean("tie_word_embeddings", &c.tie_word_embeddings));
  NJ_RETURN_IF_ERROR(read_layer_map(r, &c));

  NJ_RETURN_IF_ERROR(r.positive_int("num_heads", &c.kda_heads, true, "kda_num_heads"));
  NJ_RETURN_IF_ERROR(r.positive_int("head_dim", &c.kda_head_dim, true, "kda_head_dim"));
  NJ_RETURN_IF_ERROR(r.positive_int("short_conv_kernel_size", &c.conv_kernel, true, "short_conv_kernel_size"));
  NJ_RETURN_IF_ERROR(r.number("gate_lower_bound", &c.gate_lower_bound, false, true,
                              "gate_lower_bound", &c.has_gate_lower_bound));

  NJ_RETURN_IF_ERROR(r.positive_int("num_attention_heads", &c.heads));
  NJ_RETURN_IF_ERROR(r.positive_int("q_lora_rank", &c.q_lora_rank));
  NJ_RETURN_IF_ERROR(r.positive_int("kv_lora_rank", &c.kv_lora_rank));
  NJ_RETURN_IF_ERROR(r.positive_int("qk_nope_head_dim", &c.qk_nope));
  NJ_RETURN_IF_ERROR(r.positive_int("qk_rope_head_dim", &c.qk_rope, false, "", true));
  NJ_RETURN_IF_ERROR(r.positive_int("v_head_dim", &c.v_head_dim));
  NJ_RETURN_IF_ERROR(r.boolean("mla_use_output_gate", &c.mla_output_gate));

  NJ_RETURN_IF_ERROR(r.positive_int("num_experts", &c.num_experts));
  NJ_RETURN_IF_ERROR(r.positive_int("num_experts_per_token", &c.top_k));
  NJ_RETURN_IF_ERROR(r.positive_int("num_shared_experts", &c.num_shared, false, "", true));
  NJ_RETURN_IF_ERROR(r.positive_int("routed_expert_hidden_size", &c.latent));
  NJ_RETURN_IF_ERROR(r.positive_int("moe_intermediate_size", &c.moe_inter));
  NJ_RETURN_IF_ERROR(r.positive_int("intermediate_size", &c.dense_inter));
  NJ_RETURN_IF_ERROR(r.positive_int("first_k_dense_replace", &c.first_k_dense, false, "", true));
  NJ_RETURN_IF_ERROR(r.number("routed_scaling_factor", &c.routed_scaling, false));
  NJ_RETURN_IF_ERROR(r.boolean("moe_renormalize", &c.renormalize));
  NJ_RETURN_IF_ERROR(r.boolean("latent_moe_use_norm", &c.latent_norm));

  NJ_RETURN_IF_ERROR(r.positive_int("attn_res_block_size", &c.attn_res_block_size));
  const json* act = r.find("hidden_act");
  if (!act) return r.missing("hidden_act", false);
  if (!act->is_string() || act->get<std::string>() != "situ")
    return r.bad("hidden_act", false, *act, "unsupported activation (K3 uses \"situ\")");
  NJ_RETURN_IF_ERROR(r.number("activation_situ_beta", &c.situ_beta, false, false, "situ_beta"));
  NJ_RETURN_IF_ERROR(r.number("activation_situ_linear_beta", &c.situ_linear_beta, false, false, "situ_linear_beta"));
  if (!(c.situ_beta > 0)) return r.bad("activation_situ_beta", false, c.situ_beta, "must be positive");
  if (!(c.situ_linear_beta > 0)) return r.bad("activation_situ_linear_beta", false, c.situ_linear_beta, "must be positive");

  NJ_RETURN_IF_ERROR(read_quantization(r, &c));
  NJ_RETURN_IF_ERROR(validate(r, c));
  return c;
}

Result<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  auto text = read_small_file(path, 16u << 20);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound)
      return not_found(model_dir + ": no config.json (is this a model directory?)");
    return text.status();
  }
  return parse_model_config(*text, path);
}

}  // namespace nj
