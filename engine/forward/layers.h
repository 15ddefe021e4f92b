// The pieces of one decoder layer over the rows of a pass (k3-model.md §2–§5). Each reads
// like its section of the model document; engine/forward/forward.cpp strings them together.
// Attention takes the pass's sequences (SeqRows): its projections run over all rows, its
// recurrences (KDA's conv and state, MLA's cache) per sequence on that sequence's rows.
// The MoE lives in engine/moe/moe_layer.h.
#pragma once

#include <span>

#include "engine/forward/activations.h"
#include "engine/forward/batch.h"
#include "engine/model/config.h"
#include "engine/model/weights.h"

namespace nj {

// out[t] = Σ_j p_j · sources_j[t],  p = softmax_j( rms_normed(sources_j[t]) · w ), per row.
// sources: pointers to [rows][hidden]; `out` must not alias a source. mix: scratch of
// sources.size() floats (the calling thread's: many rows split over the OpenMP threads).
void attn_res(std::span<const float* const> sources, const float* w, int rows, int hidden,
              float eps, float* mix, float* out);

// KDA attention: x [rows][hidden] (normed) → out [rows][hidden]; updates each sequence's S
// and conv history with its own rows, in order. A tentative sequence (SeqRows::tentative)
// keeps its conv history, and its S too with KdaRollback::kReplay, and logs its rows in `rb`
// (sized by `shape`) at `kda_layer`, the layer's index among the KDA layers.
void kda_forward(const ModelConfig& c, const KdaWeights& w, std::span<const SeqRows> seqs,
                 const float* x, int rows, float* out, KdaActivations& a, RollbackActivations& rb,
                 const ActivationShape& shape, int kda_layer);

// Settles tentative sequence `tentative` of the last pass at one KDA layer on the first
// `keep` of its `rows` rows: afterwards its S and conv history are bit for bit what feeding
// only those rows would have left. Uses a's o and ud as scratch (free between passes).
// REQUIRES: 1 <= keep <= rows, the pass's rollback log untouched since.
void kda_keep(const ModelConfig& c, LayerState& st, const RollbackActivations& rb,
              const ActivationShape& shape, int tentative, int kda_layer, int rows, int keep,
              KdaActivations& a);

// Gated MLA attention (absorbed form): appends each sequence's new latents to its cache,
// then each of its tokens attends to every cached position up to its own.
void mla_forward(const ModelConfig& c, const MlaWeights& w, std::span<const SeqRows> seqs,
                 const float* x, int rows, float* out, MlaActivations& a);

// Truncates an MLA layer's cache to its first `positions` positions (a tentative step
// settling on fewer rows than it fed). REQUIRES: positions <= the cached positions.
void mla_keep(const ModelConfig& c, LayerState& st, int64_t positions);

}  // namespace nj
