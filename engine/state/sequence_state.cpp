// SequenceState construction.
#include "engine/state/sequence_state.h"

namespace nj {

LayerState LayerState::empty(const ModelConfig& c, int l) {
  LayerState ls;
  if (c.attention[static_cast<size_t>(l)] == AttentionKind::kKda) {
    const size_t P = static_cast<size_t>(c.kda_width()), D = static_cast<size_t>(c.kda_head_dim);
    ls.S.assign(static_cast<size_t>(c.kda_heads) * D * D, 0.0f);
    ls.conv.assign(static_cast<size_t>(c.conv_kernel - 1) * 3 * P, 0.0f);
  }
  return ls;
}

SequenceState SequenceState::empty(const ModelConfig& c) {
  SequenceState s;
  s.layers.reserve(static_cast<size_t>(c.layers));
  for (int l = 0; l < c.layers; ++l) s.layers.push_back(LayerState::empty(c, l));
  return s;
}

}  // namespace nj
