// Shared helpers of the state checkpoint format: shapes from the config, XXH3 hashing,
// segment names.
#include "engine/state/state_format.h"

#include <xxhash.h>

#include <cctype>
#include <cstdio>

namespace nj::state_format {

std::string tag_name(uint32_t tag) {
  std::string s = "'";
  for (int i = 0; i < 4; ++i) {
    const char c = static_cast<char>((tag >> (8 * i)) & 0xff);
    if (!std::isprint(static_cast<unsigned char>(c))) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%08x", tag);
      return buf;
    }
    s += c;
  }
  return s + "'";
}

StateShape shape_of(const ModelConfig& c) {
  StateShape s;
  s.layers = c.layers;
  s.vocab = static_cast<size_t>(c.vocab);
  for (int l = 0; l < c.layers; ++l)
    (c.attention[static_cast<size_t>(l)] == AttentionKind::kMla ? s.mla_layers : s.kda_layers)
        .push_back(l);
  const size_t P = static_cast<size_t>(c.kda_width()), D = static_cast<size_t>(c.kda_head_dim);
  s.s_floats = static_cast<size_t>(c.kda_heads) * D * D;
  s.conv_floats = static_cast<size_t>(c.conv_kernel - 1) * 3 * P;
  s.kv_lora = static_cast<size_t>(c.kv_lora_rank);
  s.rope = static_cast<size_t>(c.qk_rope);
  return s;
}

Status check_state_shape(const StateShape& shape, const SequenceState& s) {
  auto bad = [](const std::string& what, size_t got, size_t want) {
    return invalid_argument("sequence state does not fit the model: " + what + " has " +
                            std::to_string(got) + " elements, the model needs " +
                            std::to_string(want));
  };
  if (s.position < 0) return invalid_argument("sequence state has a negative position");
  const size_t P = static_cast<size_t>(s.position);
  if (s.layers.size() != static_cast<size_t>(shape.layers))
    return bad("layers", s.layers.size(), shape.layers);
  if (s.tokens.size() != P) return bad("tokens", s.tokens.size(), P);
  const size_t logits = P == 0 ? 0 : shape.vocab;
  if (s.last_logits.size() != logits) return bad("last_logits", s.last_logits.size(), logits);
  for (int l : shape.kda_layers) {
    const LayerState& ls = s.layers[static_cast<size_t>(l)];
    const std::string name = "KDA layer " + std::to_string(l);
    if (ls.S.size() != shape.s_floats) return bad(name + " S", ls.S.size(), shape.s_floats);
    if (ls.conv.size() != shape.conv_floats)
      return bad(name + " conv", ls.conv.size(), shape.conv_floats);
  }
  for (int l : shape.mla_layers) {
    const LayerState& ls = s.layers[static_cast<size_t>(l)];
    const std::string name = "MLA layer " + std::to_string(l);
    if (ls.latent.size() != P * shape.kv_lora)
      return bad(name + " latent", ls.latent.size(), P * shape.kv_lora);
    if (ls.rope.size() != P * shape.rope)
      return bad(name + " rope", ls.rope.size(), P * shape.rope);
  }
  return Status();
}

struct Hasher::Impl {
  XXH3_state_t* st = XXH3_createState();
  ~Impl() { XXH3_freeState(st); }
};

Hasher::Hasher(uint64_t seed) : impl_(std::make_unique<Impl>()) {
  NJ_CHECK(impl_->st != nullptr);
  XXH3_64bits_reset_withSeed(impl_->st, seed);
}
Hasher::~Hasher() = default;
void Hasher::update(const void* p, size_t n) {
  if (n > 0) XXH3_64bits_update(impl_->st, p, n);
}
uint64_t Hasher::digest() const {
  return XXH3_64bits_digest(impl_->st);
}

uint64_t hash64(const void* p, size_t n, uint64_t seed) {
  return XXH3_64bits_withSeed(p, n, seed);
}

std::string segment_name(const std::string& head_base, uint64_t generation) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(generation));
  return head_base + ".seg-" + hex;
}

bool is_segment_name_of(const std::string& name, const std::string& head_base) {
  const std::string prefix = head_base + ".seg-";
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  std::string rest = name.substr(prefix.size());
  if (rest.size() == 16 + 4 && rest.compare(16, 4, ".tmp") == 0) rest.resize(16);
  if (rest.size() != 16) return false;
  for (char c : rest)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace nj::state_format
