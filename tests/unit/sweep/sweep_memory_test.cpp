// What a layer sweep's window costs per row at the released K3's shapes: the window's size at
// a budget (engine/plan/sweep_plan.h) follows from it, and with it the bytes a document costs.
#include <catch2/catch.hpp>

#include <string>

#include "engine/forward/decoder_layer.h"
#include "engine/model/config.h"
#include "engine/sweep/sweep.h"

namespace nj {
namespace {

// K3's text config (k3-model.md §1; the layer lists say which layers are MLA).
const char* kK3Config = R"({"model_type": "kimi_k3", "text_config": {
  "model_type": "kimi_linear", "hidden_size": 7168, "num_hidden_layers": 93, "vocab_size": 163840,
  "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "num_attention_heads": 96,
  "num_key_value_heads": 96, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64, "v_head_dim": 128, "mla_use_nope": true, "mla_use_output_gate": true,
  "num_experts": 896, "num_experts_per_token": 16, "num_shared_experts": 2,
  "routed_expert_hidden_size": 3584, "moe_intermediate_size": 3072, "intermediate_size": 33792,
  "first_k_dense_replace": 1, "moe_layer_freq": 1, "routed_scaling_factor": 1.0,
  "moe_renormalize": true, "latent_moe_use_norm": true, "moe_router_activation_func": "sigmoid",
  "attn_res_block_size": 12, "hidden_act": "situ", "activation_situ_beta": 4.0,
  "activation_situ_linear_beta": 25.0, "bos_token_id": 163584, "eos_token_id": 163586,
  "pad_token_id": 163839, "max_position_embeddings": 1048576,
  "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56,
    60, 64, 68, 72, 76, 80, 84, 88, 92, 93], "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15,
    17, 18, 19, 21, 22, 23, 25, 26, 27, 29, 30, 31, 33, 34, 35, 37, 38, 39, 41, 42, 43, 45, 46, 47,
    49, 50, 51, 53, 54, 55, 57, 58, 59, 61, 62, 63, 65, 66, 67, 69, 70, 71, 73, 74, 75, 77, 78, 79,
    81, 82, 83, 85, 86, 87, 89, 90, 91], "num_heads": 96, "head_dim": 128,
    "short_conv_kernel_size": 4}}})";

uint64_t window_bytes(const ModelConfig& c, int rows) {
  return sweep_activation_bytes(c, SweepShape{rows, 256, 8, 600, 8});
}

}  // namespace

TEST_CASE("a sweep's window row costs its residual stream, routing and latent sum, no more",
          "[engine][sweep]") {
  auto parsed = parse_model_config(kK3Config, "k3");
  REQUIRE(parsed.ok());
  const ModelConfig& c = *parsed;
  // Per row, whatever the window: h (which is the residual prefix inside a layer), the normed
  // FFN input and the attention-residual bank (entries of every block begun before the last
  // layer) at the model's width; the router's scores over all experts and the rows' top-k
  // (experts, weights, their grouping); the latent input and the latent sum. Not the rows'
  // expert outputs apart ([top_k][latent]), not the MLPs' width (dense and shared run a chunk
  // of rows at a time), not the expert groups' buffers (a window's expert is computed in
  // several groups when it serves more rows than they hold), not either half's output (added
  // to the prefix a chunk of rows at a time).
  const uint64_t hidden = static_cast<uint64_t>(c.hidden), banks = static_cast<uint64_t>(banked_before(c, c.layers));
  const uint64_t expected =
      4 * ((2 + banks) * hidden + static_cast<uint64_t>(c.num_experts) +
           3 * static_cast<uint64_t>(c.top_k) + 2 * static_cast<uint64_t>(c.latent));
  for (int rows : {1024, 8192}) {
    const uint64_t per_row = (window_bytes(c, 2 * rows) - window_bytes(c, rows)) / static_cast<uint64_t>(rows);
    CHECK(per_row == expected);
  }
  CHECK(expected < 320u * 1000u);  // 319 KB at K3: 8 GiB holds ~25k rows of a window
}

}  // namespace nj
