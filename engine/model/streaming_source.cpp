// StreamingSource: the ring of trunk buffers and the pool of expert buffers (see the header).
#include "engine/model/streaming_source.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "engine/model/dtype.h"
#include "engine/model/resident_source.h"
#include "engine/model/stored_unit.h"

namespace nj {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> open_for_streaming(const std::string& path) {
  NJ_ASSIGN_OR_RETURN(auto file, open_random_access(path, IoMode::kPreferDirect));
  static std::atomic<bool> warned{false};
  if (!file->direct() && !warned.exchange(true))
    spdlog::warn(
        "O_DIRECT is refused for {}; reading model files through the page cache (slower, and "
        "the cache then competes with the memory budget)",
        path);
  return file;
}

StreamingSource::StreamingSource(const CheckpointIndex& index, const ModelLayout& layout,
                                 const ResidencyPlan& plan, StreamingOptions options)
    : index_(index), layout_(layout), plan_(plan), options_(std::move(options)) {}

StreamingSource::~StreamingSource() {
  pool_.reset();  // finish (or fail) reads still in flight before their buffers go away
}

const UnitLayout& StreamingSource::unit_layout(int u) const {
  return u == layout_.config().layers ? layout_.head().unit : layout_.layer(u).unit;
}

std::shared_ptr<ReadTicket> StreamingSource::read_unit_async(const UnitLayout& u, uint8_t* buffer,
                                                             ReadPriority p) {
  std::vector<ReadRequest> reqs;
  if (u.blocks.empty()) {
    for (const Extent& e : u.extents)
      reqs.push_back(ReadRequest{files_[e.file].get(), e.file_offset, static_cast<size_t>(e.length),
                                 buffer + e.buffer_offset});
    return pool_->submit(std::move(reqs), p);
  }
  // A lossless unit: one request per block, decoded into the buffer on the I/O thread.
  const Extent& e = u.extents[0];
  const AlignedBuffer& held = held_buf_[static_cast<size_t>(u.pack_unit)];
  for (size_t k = 0; k < u.blocks.size(); ++k) {
    const StoredBlock& b = u.blocks[k];
    ReadRequest r;
    r.offset = e.file_offset + b.stored_offset;
    if (held.size()) {
      r.src = held.data() + b.stored_offset;
      r.length = b.stored_bytes;
    } else {
      r.file = files_[e.file].get();
      r.length = align_up(b.stored_bytes, kDirectAlign);
    }
    r.consume = [this, &u, k, buffer](std::span<const uint8_t> bytes) {
      return consume_block(u, k, bytes, buffer);
    };
    reqs.push_back(std::move(r));
  }
  return pool_->submit(std::move(reqs), p);
}

Status StreamingSource::consume_block(const UnitLayout& u, size_t k,
                                      std::span<const uint8_t> stored, uint8_t* buffer) {
  auto& checked = block_verified_[static_cast<size_t>(u.pack_unit)];
  bool verify;
  {
    std::lock_guard<std::mutex> lock(block_mu_);
    verify = !checked[k];
  }
  NJ_RETURN_IF_ERROR(
      decode_unit_block(u, k, stored, verify, files_[u.extents[0].file]->path(), buffer));
  if (verify) {
    std::lock_guard<std::mutex> lock(block_mu_);
    checked[k] = true;
  }
  return Status();
}

void StreamingSource::count_unit_read_locked(int u) {
  if (held_buf_[static_cast<size_t>(u)].size()) return;  // decoded from RAM: nothing read
  const UnitLayout& ul = unit_layout(u);
  (u == layout_.config().layers ? stats_.head_bytes_read : stats_.trunk_bytes_read) +=
      unit_bytes_read(ul);
  stats_.trunk_raw_bytes += ul.tensor_bytes;
}

Result<std::unique_ptr<StreamingSource>> StreamingSource::open(const CheckpointIndex& index,
                                                               const ModelLayout& layout,
                                                               const ResidencyPlan& plan,
                                                               StreamingOptions options) {
  std::unique_ptr<StreamingSource> s(new StreamingSource(index, layout, plan, std::move(options)));
  for (const auto& path : layout.file_paths(index)) {
    NJ_ASSIGN_OR_RETURN(auto file, s->options_.open_file(path));
    s->files_.push_back(std::move(file));
  }
  const ModelConfig& c = layout.config();
  const int n = s->units();
  // Lossless units: a staging buffer per I/O thread for the largest stored block, and the
  // stored runs of the units the plan holds compressed (their blocks checked now).
  size_t staging = 0;
  s->block_verified_.resize(static_cast<size_t>(n));
  s->held_buf_.resize(static_cast<size_t>(n));
  for (int u = 0; u < n; ++u) {
    const UnitLayout& ul = s->unit_layout(u);
    for (const StoredBlock& b : ul.blocks)
      staging = std::max<size_t>(staging, align_up(b.stored_bytes, kDirectAlign));
    s->block_verified_[static_cast<size_t>(u)].assign(ul.blocks.size(), false);
    if (!plan.held.empty() && plan.held[static_cast<size_t>(u)] && !ul.blocks.empty()) {
      const Extent& e = ul.extents[0];
      AlignedBuffer& held = s->held_buf_[static_cast<size_t>(u)];
      held = AlignedBuffer(e.length);
      NJ_RETURN_IF_ERROR(s->files_[e.file]->read_at(e.file_offset, held.data(), e.length));
      for (size_t k = 0; k < ul.blocks.size(); ++k) {
        const StoredBlock& b = ul.blocks[k];
        NJ_RETURN_IF_ERROR(verify_unit_block(
            ul, k, std::span<const uint8_t>(held.data() + b.stored_offset, b.stored_bytes),
            s->files_[e.file]->path()));
        s->block_verified_[static_cast<size_t>(u)][k] = true;
      }
      // Read once, at open (as pinned units are).
      (u == c.layers ? s->stats_.head_bytes_read : s->stats_.trunk_bytes_read) +=
          stored_block_bytes(ul);
      s->stats_.trunk_raw_bytes += ul.tensor_bytes;
    }
  }
  s->pool_ = std::make_unique<ReadPool>(s->options_.io_threads, s->options_.chunk_bytes, staging);

  s->verified_.assign(static_cast<size_t>(n), false);
  // Pinned units: read them all now, in parallel.
  s->pinned_buf_.resize(static_cast<size_t>(n));
  s->pinned_layer_.resize(static_cast<size_t>(c.layers));
  std::vector<std::shared_ptr<ReadTicket>> tickets;
  for (int u = 0; u < n; ++u) {
    if (!plan.pinned[static_cast<size_t>(u)]) continue;
    const UnitLayout& ul = s->unit_layout(u);
    s->pinned_buf_[static_cast<size_t>(u)] = AlignedBuffer(ul.buffer_bytes);
    tickets.push_back(s->read_unit_async(ul, s->pinned_buf_[static_cast<size_t>(u)].data(),
                                         ReadPriority::kUrgent));
  }
  for (auto& t : tickets) NJ_RETURN_IF_ERROR(t->wait());
  for (int u = 0; u < n; ++u) {
    if (!plan.pinned[static_cast<size_t>(u)]) continue;
    const uint8_t* bytes = s->pinned_buf_[static_cast<size_t>(u)].data();
    NJ_RETURN_IF_ERROR(s->verify_locked(u, bytes));
    if (u == c.layers) {
      s->pinned_head_ = std::make_shared<HeadWeights>(materialize_head(c, layout.head(), bytes));
    } else {
      s->pinned_layer_[static_cast<size_t>(u)] =
          std::make_shared<LayerWeights>(materialize_layer(c, layout.layer(u), bytes));
    }
    s->count_unit_read_locked(u);
  }
  s->ring_.resize(static_cast<size_t>(plan.ring_slots));
  for (auto& slot : s->ring_) slot.buf = AlignedBuffer(plan.ring_slot_bytes);
  s->experts_.resize(static_cast<size_t>(plan.expert_buffers));
  for (auto& b : s->experts_) b.buf = AlignedBuffer(plan.expert_buffer_bytes);
  s->where_.resize(static_cast<size_t>(c.layers));
  s->pending_.resize(static_cast<size_t>(c.layers));
  s->stats_.layer_hits.assign(static_cast<size_t>(c.layers), 0);
  s->stats_.layer_misses.assign(static_cast<size_t>(c.layers), 0);
  s->embed_buf_ =
      AlignedBuffer(align_up(layout.embedding_row_bytes(), kDirectAlign) + kDirectAlign);
  return s;
}

Status StreamingSource::await(const std::shared_ptr<ReadTicket>& ticket) {
  pool_->promote(ticket);  // the caller needs it now
  const double t0 = now_s();
  Status st = ticket->wait();
  std::lock_guard<std::mutex> lock(mu_);
  stats_.io_wait_s += now_s() - t0;
  return st;
}

// Packed units are checked once per process (pack.h).
Status StreamingSource::verify_locked(int u, const uint8_t* bytes) {
  const UnitLayout& ul = unit_layout(u);
  if (!ul.verify || verified_[static_cast<size_t>(u)]) return Status();
  NJ_RETURN_IF_ERROR(verify_unit(ul, bytes, files_[ul.extents[0].file]->path()));
  verified_[static_cast<size_t>(u)] = true;
  return Status();
}

// --- trunk ring ---

int StreamingSource::next_streamed(int u) const {
  const int n = units();
  for (int i = 1; i <= n; ++i) {
    const int v = (u + i) % n;
    if (!plan_.pinned[static_cast<size_t>(v)]) return v;
  }
  return -1;
}

// Starts reading the streamed units that follow u into ring slots not in use, so that the
// next one is on its way while u computes. REQUIRES: mu_ held.
void StreamingSource::prefetch_after_locked(int u) {
  int next = u;
  for (size_t ahead = 0; ahead + 1 < ring_.size(); ++ahead) {
    next = next_streamed(next);
    if (next < 0 || next == u) return;
    bool present = false;
    for (const auto& slot : ring_) present = present || slot.unit == next;
    if (present) continue;
    for (size_t i = 0; i < ring_.size(); ++i) {
      TrunkSlot& slot = ring_[i];
      if (slot.refs > 0 || slot.unit == u) continue;
      // Never overwrite a unit that is itself among the ones wanted next.
      bool wanted = false;
      for (int w = u, k = 0; k <= static_cast<int>(ahead); ++k) {
        w = next_streamed(w);
        wanted = wanted || w == slot.unit;
      }
      if (wanted && slot.unit != -1) continue;
      slot.unit = next;
      slot.layer_view.reset();
      slot.head_view.reset();
      slot.ticket = read_unit_async(unit_layout(next), slot.buf.data(), ReadPriority::kPrefetch);
      break;
    }
  }
}

Result<int> StreamingSource::acquire_unit(int u) {
  std::shared_ptr<ReadTicket> ticket;
  int slot_index = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < ring_.size(); ++i)
      if (ring_[i].unit == u) slot_index = static_cast<int>(i);
    if (slot_index < 0) {  // not prefetched (first use, or an out-of-order request): read now
      for (size_t i = 0; i < ring_.size() && slot_index < 0; ++i)
        if (ring_[i].refs == 0) slot_index = static_cast<int>(i);
      if (slot_index < 0)
        return internal_error(
            "trunk ring exhausted: every slot is in use (a caller holds too many layers)");
      TrunkSlot& slot = ring_[static_cast<size_t>(slot_index)];
      slot.unit = u;
      slot.layer_view.reset();
      slot.head_view.reset();
      slot.ticket = read_unit_async(unit_layout(u), slot.buf.data(), ReadPriority::kUrgent);
    }
    TrunkSlot& slot = ring_[static_cast<size_t>(slot_index)];
    slot.refs++;
    ticket = slot.ticket;
    prefetch_after_locked(u);
  }
  Status st = await(ticket);
  std::lock_guard<std::mutex> lock(mu_);
  TrunkSlot& slot = ring_[static_cast<size_t>(slot_index)];
  if (!st.ok()) {
    slot.refs--;
    slot.unit = -1;  // its bytes are not trustworthy
    return st;
  }
  const ModelConfig& c = layout_.config();
  if (!slot.head_view && !slot.layer_view) {
    if (Status v = verify_locked(u, slot.buf.data()); !v.ok()) {
      slot.refs--;
      slot.unit = -1;
      return v;
    }
  }
  if (u == c.layers && !slot.head_view) {
    slot.head_view =
        std::make_shared<HeadWeights>(materialize_head(c, layout_.head(), slot.buf.data()));
    count_unit_read_locked(u);
  } else if (u < c.layers && !slot.layer_view) {
    slot.layer_view =
        std::make_shared<LayerWeights>(materialize_layer(c, layout_.layer(u), slot.buf.data()));
    count_unit_read_locked(u);
  }
  return slot_index;
}

void StreamingSource::release_unit(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_[static_cast<size_t>(slot)].refs--;
}

Result<std::shared_ptr<const LayerWeights>> StreamingSource::layer(int l) {
  if (plan_.pinned[static_cast<size_t>(l)]) return pinned_layer_[static_cast<size_t>(l)];
  NJ_ASSIGN_OR_RETURN(int slot, acquire_unit(l));
  std::shared_ptr<const LayerWeights> view = ring_[static_cast<size_t>(slot)].layer_view;
  return std::shared_ptr<const LayerWeights>(
      view.get(), [this, slot, view](const LayerWeights*) { release_unit(slot); });
}

Result<std::shared_ptr<const HeadWeights>> StreamingSource::head() {
  const int u = layout_.config().layers;
  if (plan_.pinned[static_cast<size_t>(u)]) return pinned_head_;
  NJ_ASSIGN_OR_RETURN(int slot, acquire_unit(u));
  std::shared_ptr<const HeadWeights> view = ring_[static_cast<size_t>(slot)].head_view;
  return std::shared_ptr<const HeadWeights>(
      view.get(), [this, slot, view](const HeadWeights*) { release_unit(slot); });
}

void StreamingSource::will_need_layer(int l) {
  if (plan_.pinned[static_cast<size_t>(l)] || ring_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& slot : ring_)
    if (slot.unit == l) return;
  for (auto& slot : ring_) {
    if (slot.refs == 0) {
      slot.unit = l;
      slot.layer_view.reset();
      slot.head_view.reset();
      slot.ticket = read_unit_async(unit_layout(l), slot.buf.data(), ReadPriority::kPrefetch);
      return;
    }
  }
}

// --- experts ---

void StreamingSource::issue_expert_locked(int b, int layer, int e) {
  ExpertBuf& buf = experts_[static_cast<size_t>(b)];
  if (buf.layer >= 0) where_[static_cast<size_t>(buf.layer)].erase(buf.expert);
  buf.layer = layer;
  buf.expert = e;
  buf.view.reset();
  buf.uses = 0;
  buf.needed = true;
  buf.hit = false;
  where_[static_cast<size_t>(layer)][e] = b;
  buf.ticket =
      read_unit_async(layout_.expert(layer, e).unit, buf.buf.data(), ReadPriority::kUrgent);
}

// A buffer for a miss of `layer`: a free one, else the policy's pick among idle experts that
// nobody is about to use. -1 when every buffer is in use, loading, or announced.
int StreamingSource::obtain_expert_buffer_locked(int /*layer*/) {
  for (size_t i = 0; i < experts_.size(); ++i)
    if (experts_[i].layer < 0 && experts_[i].refs == 0) return static_cast<int>(i);
  std::vector<ExpertCandidate> idle;
  for (size_t i = 0; i < experts_.size(); ++i) {
    const ExpertBuf& b = experts_[i];
    if (b.refs == 0 && !b.needed && (!b.ticket || b.ticket->done()))
      idle.push_back({static_cast<int>(i), b.layer, b.expert, b.last_use, b.uses});
  }
  if (idle.empty()) return -1;
  return idle[options_.policy->choose_victim(idle)].buffer;
}

void StreamingSource::pump_locked(int layer) {
  auto& pending = pending_[static_cast<size_t>(layer)];
  while (!pending.empty()) {
    const int b = obtain_expert_buffer_locked(layer);
    if (b < 0) return;
    const int e = pending.front();
    pending.pop_front();
    issue_expert_locked(b, layer, e);
    stats_.layer_misses[static_cast<size_t>(layer)]++;
    stats_.expert_misses++;
  }
}

void StreamingSource::will_need_experts(int l, std::span<const int> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& where = where_[static_cast<size_t>(l)];
  auto& pending = pending_[static_cast<size_t>(l)];
  for (int e : ids) {
    auto it = where.find(e);
    if (it != where.end()) {
      ExpertBuf& b = experts_[static_cast<size_t>(it->second)];
      if (!b.needed) {
        b.needed = true;
        b.hit = true;
        stats_.layer_hits[static_cast<size_t>(l)]++;
        stats_.expert_hits++;
      }
    } else if (std::find(pending.begin(), pending.end(), e) == pending.end()) {
      pending.push_back(e);
    }
  }
  pump_locked(l);
}

Result<std::shared_ptr<const ExpertWeights>> StreamingSource::expert(int l, int e) {
  int b = -1;
  std::shared_ptr<ReadTicket> ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& where = where_[static_cast<size_t>(l)];
    auto it = where.find(e);
    if (it == where.end()) {
      // Not announced, or waiting for a buffer: issue it first, taking a buffer from an
      // announced-but-unused expert if nothing else is free (it will be read again).
      auto& pending = pending_[static_cast<size_t>(l)];
      pending.erase(std::remove(pending.begin(), pending.end(), e), pending.end());
      int nb = obtain_expert_buffer_locked(l);
      if (nb < 0) {
        for (size_t i = 0; i < experts_.size() && nb < 0; ++i) {
          ExpertBuf& c = experts_[i];
          if (c.refs == 0 && (!c.ticket || c.ticket->done())) {
            if (c.needed && c.layer == l) pending.push_front(c.expert);
            nb = static_cast<int>(i);
          }
        }
      }
      if (nb < 0) return internal_error("expert pool exhausted: every buffer is in use or loading");
      issue_expert_locked(nb, l, e);
      stats_.layer_misses[static_cast<size_t>(l)]++;
      stats_.expert_misses++;
      it = where.find(e);
    }
    b = it->second;
    ExpertBuf& buf = experts_[static_cast<size_t>(b)];
    buf.refs++;
    buf.needed = false;
    buf.last_use = ++tick_;
    buf.uses++;
    ticket = buf.ticket;
  }
  Status st = await(ticket);
  std::lock_guard<std::mutex> lock(mu_);
  ExpertBuf& buf = experts_[static_cast<size_t>(b)];
  if (!st.ok()) {
    buf.refs--;
    where_[static_cast<size_t>(l)].erase(e);
    buf.layer = buf.expert = -1;
    return st;
  }
  if (!buf.view) {
    const ExpertLayout& el = layout_.expert(l, e);
    buf.view = std::make_shared<ExpertWeights>(materialize_expert(el, buf.buf.data()));
    stats_.expert_bytes_read += el.unit.tensor_bytes;
  }
  std::shared_ptr<const ExpertWeights> view = buf.view;
  return std::shared_ptr<const ExpertWeights>(
      view.get(), [this, b, view](const ExpertWeights*) { release_expert(b); });
}

void StreamingSource::release_expert(int b) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpertBuf& buf = experts_[static_cast<size_t>(b)];
  const int layer = buf.layer;
  if (--buf.refs > 0) return;
  // Keep at most the planned number of idle experts for this layer; the rest is staging.
  const int quota = plan_.expert_cache_slots[static_cast<size_t>(layer)];
  std::vector<ExpertCandidate> idle;
  for (size_t i = 0; i < experts_.size(); ++i) {
    const ExpertBuf& x = experts_[i];
    if (x.layer == layer && x.refs == 0 && !x.needed && (!x.ticket || x.ticket->done()))
      idle.push_back({static_cast<int>(i), x.layer, x.expert, x.last_use, x.uses});
  }
  while (static_cast<int>(idle.size()) > quota) {
    const size_t v = options_.policy->choose_victim(idle);
    ExpertBuf& victim = experts_[static_cast<size_t>(idle[v].buffer)];
    where_[static_cast<size_t>(layer)].erase(victim.expert);
    victim.layer = victim.expert = -1;
    victim.view.reset();
    idle.erase(idle.begin() + static_cast<long>(v));
  }
  pump_locked(layer);
}

// --- embedding ---

Status StreamingSource::embed(std::span<const int32_t> ids, float* out) {
  const ModelConfig& c = layout_.config();
  const TensorSlot& emb = layout_.embedding();
  const uint64_t row = layout_.embedding_row_bytes();
  RandomAccessFile& f = *files_[emb.info->file];
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= c.vocab)
      return invalid_argument("token id " + std::to_string(ids[i]) +
                              " is outside the vocabulary (0.." + std::to_string(c.vocab - 1) +
                              ")");
    // One row per token, read as the aligned blocks that contain it.
    const uint64_t off = emb.info->offset + static_cast<uint64_t>(ids[i]) * row;
    const uint64_t begin = align_down(off, kDirectAlign);
    const uint64_t end = std::min<uint64_t>(align_up(off + row, kDirectAlign), f.size());
    NJ_RETURN_IF_ERROR(f.read_at(begin, embed_buf_.data(), static_cast<size_t>(end - begin)));
    widen_to_f32(emb.info->dtype, embed_buf_.data() + (off - begin), static_cast<size_t>(c.hidden),
                 out + i * static_cast<size_t>(c.hidden));
    stats_.embedding_bytes_read += end - begin;
  }
  return Status();
}

WeightStats StreamingSource::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  WeightStats s = stats_;
  const ReadPoolCounters pool = pool_->counters();
  s.read_s = pool.busy_s;
  s.decoded_bytes = pool.consumed_bytes;
  s.decode_s = pool.consume_s;
  return s;
}

}  // namespace nj
