// One decoder layer in two halves, and the head's input (see decoder_layer.h).
#include "engine/forward/decoder_layer.h"

#include <algorithm>

#include "engine/forward/layers.h"
#include "engine/ops/kernels.h"

namespace nj {

StreamRows StreamRows::slice(int row0, int n, int hidden) const {
  const size_t off = static_cast<size_t>(row0) * static_cast<size_t>(hidden);
  StreamRows r = *this;
  r.rows = n;
  for (float** p : {&r.h, &r.prefix, &r.blocks, &r.xn, &r.a})
    if (*p) *p += off;  // a buffer the caller gives per slice stays null
  return r;
}

int banked_before(const ModelConfig& c, int l) {
  return l == 0 ? 0 : (l - 1) / c.attn_res_block_size + 1;
}

namespace {

// The bank's entries for these rows followed by `last`.
std::span<const float* const> with_bank(const StreamRows& s, int banked, const float* last,
                                        std::vector<const float*>& sources) {
  sources.clear();
  for (int j = 0; j < banked; ++j) sources.push_back(s.blocks + static_cast<size_t>(j) * s.block_stride);
  sources.push_back(last);
  return std::span<const float* const>(sources);
}

}  // namespace

void attention_half(const ModelConfig& c, int l, const LayerWeights& w, const StreamRows& s,
                    std::span<const SeqRows> seqs, Activations& acts, int kda_layer) {
  const size_t hs = static_cast<size_t>(c.hidden);
  const int R = s.rows;
  int banked = banked_before(c, l);
  std::vector<const float*> sources;
  // prefix = h; with a bank, h = attn_res(blocks + [prefix])
  ops::copy_rows(s.h, R, hs, s.prefix);
  bool prefix_none = false;
  if (banked > 0) attn_res(with_bank(s, banked, s.prefix, sources), w.attn_res, R, c.hidden, c.rms_eps, s.mix, s.h);
  // every attn_res_block_size layers the raw layer input is banked and the sum restarts
  if (l % c.attn_res_block_size == 0) {
    ops::copy_rows(s.prefix, R, hs, s.blocks + static_cast<size_t>(banked++) * s.block_stride);
    prefix_none = true;
  }
  // a = Attention(RMSNorm(h, input_layernorm)), each sequence on its own state
  ops::rmsnorm_rows(s.h, w.input_norm, R, c.hidden, c.rms_eps, s.xn);
  if (w.is_mla) mla_forward(c, w.mla, seqs, s.xn, R, s.a, acts.mla);
  else kda_forward(c, w.kda, seqs, s.xn, R, s.a, acts.kda, acts.rollback, acts.shape, kda_layer);
  if (prefix_none) ops::copy_rows(s.a, R, hs, s.prefix);
  else ops::add_rows(s.a, R, hs, s.prefix);
  // h = attn_res(blocks + [prefix]) (also with a single bank entry)
  attn_res(with_bank(s, banked, s.prefix, sources), w.mlp_res, R, c.hidden, c.rms_eps, s.mix, s.h);
  // the FFN's input: RMSNorm(h, post_attention_layernorm)
  ops::rmsnorm_rows(s.h, w.post_norm, R, c.hidden, c.rms_eps, s.xn);
}

void finish_layer(const ModelConfig& c, const StreamRows& s) {
  const size_t hs = static_cast<size_t>(c.hidden);
  ops::add_rows(s.a, s.rows, hs, s.prefix);
  if (s.h != s.prefix) ops::copy_rows(s.prefix, s.rows, hs, s.h);
}

void head_input(const ModelConfig& c, const HeadWeights& hw, const StreamRows& s,
                std::span<const int> rows, float* tmp, float* out) {
  const size_t hs = static_cast<size_t>(c.hidden);
  std::vector<const float*> sources;
  const int banked = banked_before(c, c.layers);
  for (size_t i = 0; i < rows.size(); ++i) {
    const StreamRows r = s.slice(rows[i], 1, c.hidden);
    attn_res(with_bank(r, banked, r.h, sources), hw.out_res, 1, c.hidden, c.rms_eps, s.mix, tmp + i * hs);
    ops::rmsnorm(tmp + i * hs, hw.norm, c.hidden, c.rms_eps, out + i * hs);
  }
}

}  // namespace nj
