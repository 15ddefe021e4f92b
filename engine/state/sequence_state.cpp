// SequenceState construction.
#include "engine/state/sequence_state.h"

namespace nj {

SequenceState SequenceState::empty(const ModelConfig& c) {
  SequenceState s;
  s.layers.resize(static_cast<size_t>(c.layers));
  const size_t P = static_cast<size_t>(c.kda_width()), D = static_cast<size_t>(c.kda_head_dim);
  for (int l = 0; l < c.layers; ++l) {
    LayerState& ls = s.layers[static_cast<size_t>(l)];
    if (c.attention[static_cast<size_t>(l)] == AttentionKind::kKda) {
      ls.S.assign(static_cast<size_t>(c.kda_heads) * D * D, 0.0f);
      ls.conv.assign(static_cast<size_t>(c.conv_kernel - 1) * 3 * P, 0.0f);
    }
  }
  return s;
}

}  // namespace nj
