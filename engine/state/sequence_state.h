// Everything a sequence carries between forward steps (k3-model.md §4, §5): what a state
// checkpoint saves and restores. Attention-residual blocks are per token and never carried.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/config.h"

namespace nj {

struct LayerState {
  // KDA layers.
  std::vector<float> S;        // [H][D][D] fp32, row = key channel
  std::vector<float> conv;     // [K-1][3][P]: the last K-1 pre-conv q, k, v inputs, oldest first
  // MLA layers (append-only, one row per position).
  std::vector<float> latent;   // [positions][kv_lora_rank], the normed latent L
  std::vector<float> rope;     // [positions][qk_rope_head_dim], the shared key part kr

  // Layer l's state before any token.
  static LayerState empty(const ModelConfig& config, int l);
};

struct SequenceState {
  int64_t position = 0;              // tokens consumed so far
  std::vector<int32_t> tokens;       // every token consumed, in order
  std::vector<LayerState> layers;    // [num_hidden_layers]
  std::vector<float> last_logits;    // [vocab] after the last consumed token (empty before any)

  // A fresh state (position 0) sized for `config`.
  static SequenceState empty(const ModelConfig& config);
};

}  // namespace nj
