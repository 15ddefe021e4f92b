// Allocation and size estimate of a pass's activations, both from visit_buffers.
#include "engine/forward/activations.h"

#include <omp.h>

#include "engine/ops/kernels.h"

namespace nj {
namespace {

size_t widest_matrix_input(const ModelConfig& c) {
  return static_cast<size_t>(std::max({c.hidden, c.kda_width(), c.kda_head_dim, c.dense_inter, c.shared_inter(),
                                       c.latent, c.moe_inter, c.kv_lora_rank, c.q_lora_rank,
                                       c.heads * c.v_head_dim}));
}

}  // namespace

uint64_t kernel_scratch_bytes(const ModelConfig& c, int rows) {
  // The calling thread arranges a whole [rows][cols] input; inside per-head parallel
  // regions each thread arranges one row of kv_lora_rank (MLA's value projection). Every
  // thread may also hold a packed panel (products of many token rows).
  const size_t pad = 16;  // alignment slack of each arrangement
  const size_t main = static_cast<size_t>(rows) * widest_matrix_input(c) + pad;
  const size_t per_thread = static_cast<size_t>(c.kv_lora_rank) + pad;
  const uint64_t threads = static_cast<uint64_t>(omp_get_max_threads());
  // MXFP4 matrices are routed experts': moe_inter rows (gate, up) or hidden rows (down).
  const uint64_t packed = ops::kernels().packed_scratch_bytes(
      static_cast<int>(widest_matrix_input(c)), std::max(c.moe_inter, c.hidden));
  return (main + threads * per_thread) * sizeof(float) + threads * packed;
}

uint64_t activation_bytes(const ModelConfig& c, const ActivationShape& s) {
  Activations none;
  uint64_t bytes = 0;
  visit_buffers(none, c, s, [&](auto& buf, size_t n) { bytes += n * sizeof(buf[0]); });
  return bytes + kernel_scratch_bytes(c, s.rows);
}

void Activations::allocate(const ModelConfig& c, const ActivationShape& s) {
  visit_buffers(*this, c, s, [](auto& buf, size_t n) {
    if (buf.size() < n) {
      buf.resize(n);
      buf.shrink_to_fit();
    }
  });
  shape = s;
  config_ = &c;
}

void Activations::ensure(const ModelConfig& c, const ActivationShape& s) {
  const bool same_rollback = s.tentative_sequences == 0 || s.kda_rollback == shape.kda_rollback;
  if (s.rows <= shape.rows && s.sequences <= shape.sequences && s.max_context <= shape.max_context &&
      s.logits_rows <= shape.logits_rows && s.tentative_sequences <= shape.tentative_sequences &&
      s.tentative_rows <= shape.tentative_rows && same_rollback)
    return;
  // A context grows by one position per decoded token: grow it geometrically.
  const int context = s.max_context <= shape.max_context ? shape.max_context
                                                         : std::max(s.max_context, 2 * shape.max_context);
  allocate(c, ActivationShape{std::max(s.rows, shape.rows), std::max(s.sequences, shape.sequences), context,
                              std::max(s.logits_rows, shape.logits_rows),
                              std::max(s.tentative_sequences, shape.tentative_sequences),
                              std::max(s.tentative_rows, shape.tentative_rows),
                              s.tentative_sequences > 0 ? s.kda_rollback : shape.kda_rollback});
}

uint64_t Activations::allocated_bytes() const {
  uint64_t bytes = 0;
  if (!config_) return 0;
  visit_buffers(*this, *config_, shape, [&](const auto& buf, size_t) { bytes += buf.capacity() * sizeof(buf[0]); });
  return bytes;
}

}  // namespace nj
