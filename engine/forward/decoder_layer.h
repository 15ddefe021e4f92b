// One decoder layer with attention residuals (k3-model.md §2) over a range of rows, in the
// two halves a layer-major schedule needs apart: the attention half runs on any slice of
// the rows (each sequence's recurrent state advances with its own rows, in order), the FFN
// half on all of a layer's rows at once (a MoE layer reads each expert once for all rows
// routed to it). Forward::run calls both on a pass's rows; the layer sweep (engine/sweep/)
// calls the attention half per chunk of a window and the FFN half once per layer. Every
// step is per row, so a row's result never depends on how rows were sliced or grouped.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "engine/forward/activations.h"
#include "engine/forward/batch.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace nj {

// The residual stream of `rows` rows, as one layer sees it. Row t of a buffer is at
// t * hidden; bank entry j of these rows is at blocks + j * block_stride.
struct StreamRows {
  int rows = 0;
  float* h = nullptr;       // [rows][hidden] the stream entering the layer; leaves it updated
  float* prefix = nullptr;  // [rows][hidden] the running sum since the last block boundary
  float* blocks = nullptr;  // the attention-residual bank (block inputs)
  size_t block_stride = 0;  // floats from one bank entry to the next
  float* xn = nullptr;      // [rows][hidden] normed input of attention, then of the FFN
  float* a = nullptr;       // [rows][hidden] attention output, then the FFN's
  float* mix = nullptr;     // [banked + 1] attn_res scratch

  // Rows [row0, row0 + n) of the same buffers.
  StreamRows slice(int row0, int n, int hidden) const;
};

// Bank entries the residual stream holds when layer `l` starts (one per earlier layer that
// began a block of attn_res_block_size layers).
int banked_before(const ModelConfig& c, int l);

// The attention half of layer `l`: prefix = h; h = attn_res(bank + [prefix]); at a block
// boundary the layer input is banked; a = attention(RMSNorm(h)), each sequence of `seqs`
// (rows relative to `s`) on its own state; prefix += a; h = attn_res(bank + [prefix]);
// xn = RMSNorm(h, post_attention_layernorm). `kda_layer`: l's index among the KDA layers.
void attention_half(const ModelConfig& c, int l, const LayerWeights& w, const StreamRows& s,
                    std::span<const SeqRows> seqs, Activations& acts, int kda_layer);

// The residual after the FFN half (a = FFN(xn), dense or MoE): prefix += a; h = prefix.
// h may be the prefix's buffer (the layer sweep keeps one between the halves, where h is dead).
void finish_layer(const ModelConfig& c, const StreamRows& s);

// The head's input: out = RMSNorm(attn_res(bank + [h]), norm) for each of `rows` (indices
// into s), written one after another. `tmp` holds [rows.size()][hidden] scratch.
void head_input(const ModelConfig& c, const HeadWeights& hw, const StreamRows& s,
                std::span<const int> rows, float* tmp, float* out);

}  // namespace nj
