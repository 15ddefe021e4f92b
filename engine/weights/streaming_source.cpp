// StreamingSource: the ring of trunk buffers and the pool of expert buffers (see the header).
#include "engine/weights/streaming_source.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include "engine/weights/stored_unit.h"
#include "engine/util/dtype.h"
#include "engine/weights/resident_source.h"

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

StreamingSource::StreamingSource(const TensorIndex& index, const ModelLayout& layout,
                                 const ResidencyPlan& plan, StreamingOptions options)
    : index_(index), layout_(layout), plan_(plan), options_(std::move(options)) {}

StreamingSource::~StreamingSource() {
  pool_.reset();  // finish (or fail) reads still in flight before their buffers go away
}

const UnitLayout& StreamingSource::unit_layout(int u) const {
  const int layers = layout_.config().layers;
  if (u < layers) return layout_.layer(u).unit;
  return head_parts_ > 1 ? head_part_layouts_[static_cast<size_t>(u - layers)].layout.unit
                         : layout_.head().unit;
}

std::shared_ptr<ReadTicket> StreamingSource::read_trunk_async(int unit, uint8_t* buffer,
                                                              ReadPriority p) {
  if (!options_.timeline) return read_unit_async(unit_layout(unit), buffer, p);
  options_.timeline->record(unit, -1, TimelineKind::kSubmit, static_cast<int>(p));
  return read_unit_async(unit_layout(unit), buffer, p, unit);
}

void StreamingSource::trace(int unit, TimelineKind kind) const {
  if (options_.timeline) options_.timeline->record(unit, -1, kind);
}

std::shared_ptr<ReadTicket> StreamingSource::read_unit_async(const UnitLayout& u, uint8_t* buffer,
                                                             ReadPriority p, int traced_unit,
                                                             std::shared_ptr<DecodeGate> gate) {
  std::vector<ReadRequest> reqs;
  const auto traced = [&](size_t k) {
    ReadTrace t;
    if (traced_unit != -1 && options_.timeline)
      t = ReadTrace{options_.timeline.get(), traced_unit, static_cast<int>(k)};
    return t;
  };
  if (u.blocks.empty()) {
    for (size_t k = 0; k < u.extents.size(); ++k) {
      const Extent& e = u.extents[k];
      ReadRequest r{files_[e.file].get(), e.file_offset, static_cast<size_t>(e.length),
                    buffer + e.buffer_offset};
      r.trace = traced(k);
      reqs.push_back(std::move(r));
    }
    return pool_->submit(std::move(reqs), p);
  }
  // A lossless unit: one request per run of blocks, decoded into the buffer on the I/O thread.
  const Extent& e = u.extents[0];
  const AlignedBuffer& held = held_buf_[static_cast<size_t>(u.pack_unit)];
  const std::vector<BlockRun> runs = block_runs(u);
  for (size_t i = 0; i < runs.size(); ++i) {
    const BlockRun run = runs[i];
    ReadRequest r;
    r.offset = e.file_offset + run.stored_offset;
    r.length = run.read_bytes;
    if (held.size()) {
      r.src = held.data() + run.stored_offset;
      const StoredBlock& last = u.blocks[run.first + run.count - 1];
      r.length =
          last.stored_offset + last.stored_bytes - run.stored_offset;  // no padding past the end
    } else {
      r.file = files_[e.file].get();
    }
    r.consume = [this, &u, run, buffer, gate](std::span<const uint8_t> bytes) {
      uint8_t* dst = gate ? gate->destination() : buffer;
      for (size_t k = run.first; k < run.first + run.count; ++k)
        NJ_RETURN_IF_ERROR(
            consume_block(u, k, bytes.subspan(u.blocks[k].stored_offset - run.stored_offset), dst));
      return Status();
    };
    r.trace = traced(i);
    reqs.push_back(std::move(r));
  }
  return pool_->submit(std::move(reqs), p, std::move(gate));
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
  if (held_buf_[static_cast<size_t>(plan_unit(u))].size()) return;  // decoded from RAM
  const UnitLayout& ul = unit_layout(u);
  (u >= layout_.config().layers ? stats_.head_bytes_read : stats_.trunk_bytes_read) +=
      unit_bytes_read(ul);
  stats_.trunk_raw_bytes += ul.tensor_bytes;
}

Result<std::unique_ptr<StreamingSource>> StreamingSource::open(const TensorIndex& index,
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
  if (plan.head_parts > 1) {  // the planner splits only a streamed head read from its tensors
    s->head_parts_ = plan.head_parts;
    s->head_part_layouts_ = split_head(layout.head(), index, plan.head_parts);
    for (const HeadPart& part : s->head_part_layouts_)
      if (plan.pinned.back() || part.layout.unit.buffer_bytes > plan.ring_slot_bytes)
        return internal_error("the head's part of " + std::to_string(part.layout.unit.buffer_bytes) +
                              " bytes does not fit a ring slot of " + std::to_string(plan.ring_slot_bytes));
  }
  // Lossless units: a staging buffer per I/O thread for the longest run of stored blocks
  // (the planner counts the same, planner.cpp), and the
  // stored runs of the units the plan holds compressed (their blocks checked now).
  size_t staging = 0;
  s->block_verified_.resize(static_cast<size_t>(n));
  s->held_buf_.resize(static_cast<size_t>(n));
  for (int u = 0; u < n; ++u) {
    const UnitLayout& ul = s->unit_layout(u);
    staging = std::max<size_t>(staging, largest_block_run(ul));
    s->block_verified_[static_cast<size_t>(u)].assign(ul.blocks.size(), false);
    if (plan.held.empty() || !plan.held[static_cast<size_t>(u)] || ul.blocks.empty()) continue;
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
  NJ_ASSIGN_OR_RETURN(s->pool_,
                      ReadPool::create(s->options_.io_threads, s->options_.chunk_bytes, staging));

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
  StreamingSource* self = s.get();
  s->experts_ = std::make_unique<ExpertCache>(
      layout, plan.expert_buffers, plan.expert_buffer_bytes, plan.expert_cache_slots,
      s->options_.policy,
      [self](const UnitLayout& u, uint8_t* buffer, ReadPriority p) {
        return self->read_unit_async(u, buffer, p, kTracedExpert);
      },
      [self](const std::shared_ptr<ReadTicket>& t) { return self->await(t); });
  s->embed_buf_ =
      AlignedBuffer(align_up(layout.embedding_row_bytes(), kDirectAlign) + kDirectAlign);
  return s;
}

Status StreamingSource::await(const std::shared_ptr<ReadTicket>& ticket) {
  const double t0 = now_s();
  Status st = pool_->wait(ticket);  // the caller needs it now
  std::lock_guard<std::mutex> lock(mu_);
  stats_.io_wait_s += now_s() - t0;
  return st;
}

// Packed units are checked once per process (pack.h).
Status StreamingSource::verify_locked(int u, const uint8_t* bytes) {
  const UnitLayout& ul = unit_layout(u);
  if (!ul.verify || verified_[static_cast<size_t>(plan_unit(u))]) return Status();
  NJ_RETURN_IF_ERROR(verify_unit(ul, bytes, files_[ul.extents[0].file]->path()));
  verified_[static_cast<size_t>(plan_unit(u))] = true;
  return Status();
}

// --- trunk ring ---

int StreamingSource::next_streamed(int u) const {
  const int n = ring_units();
  for (int i = 1; i <= n; ++i) {
    const int v = (u + i) % n;
    if (!pinned(v)) return v;
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
    for (const auto& slot : ring_) present = present || slot.unit == next || slot.next_unit == next;
    if (present) continue;
    for (size_t i = 0; i < ring_.size(); ++i) {
      TrunkSlot& slot = ring_[i];
      if (slot.refs > 0 || slot.unit == u || writing_locked(slot)) continue;
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
      slot.ticket = read_trunk_async(next, slot.buf.data(), ReadPriority::kPrefetch);
      break;
    }
  }
  // The first unit after u that has no slot yet, if it is lossless, is read ahead into
  // staging, to decode into u's slot once u is let go: so the disk does not wait for the
  // layer's compute to end before it starts on the unit after the next.
  next = u;
  for (size_t ahead = 0; ahead < ring_.size(); ++ahead) {
    next = next_streamed(next);
    if (next < 0 || next == u) return;
    bool present = false;
    for (const auto& slot : ring_) present = present || slot.unit == next || slot.next_unit == next;
    if (present) continue;
    if (!can_read_ahead(next)) return;
    for (TrunkSlot& slot : ring_) {
      if (slot.unit != u || slot.refs == 0 || slot.next_unit != -1) continue;
      slot.next_unit = next;
      slot.next_gate = std::make_shared<DecodeGate>();
      if (options_.timeline)
        options_.timeline->record(next, -1, TimelineKind::kSubmit,
                                  static_cast<int>(ReadPriority::kPrefetch));
      slot.next_ticket = read_unit_async(unit_layout(next), nullptr, ReadPriority::kPrefetch,
                                         options_.timeline ? next : -1, slot.next_gate);
      return;
    }
    return;
  }
}

bool StreamingSource::can_read_ahead(int u) const {
  const UnitLayout& ul = unit_layout(u);
  return !ul.blocks.empty() && !held_buf_[static_cast<size_t>(plan_unit(u))].size();
}

bool StreamingSource::writing_locked(const TrunkSlot& slot) {
  return slot.ticket && !slot.ticket->done();
}

void StreamingSource::land_read_ahead_locked(size_t from, size_t to) {
  TrunkSlot& f = ring_[from];
  TrunkSlot& t = ring_[to];
  t.unit = f.next_unit;
  t.ticket = std::move(f.next_ticket);
  t.layer_view.reset();
  t.head_view.reset();
  pool_->open(f.next_gate, t.buf.data());
  f.next_unit = -1;
  f.next_gate.reset();
}

Result<int> StreamingSource::acquire_unit(int u) {
  std::shared_ptr<ReadTicket> ticket;
  int slot_index = -1;
  while (true) {
    // A free slot whose last read or decode is still writing it (left by a pass that stopped
    // early, or asked out of order): waited for before the slot is given another unit.
    std::shared_ptr<ReadTicket> writing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < ring_.size(); ++i)
        if (ring_[i].unit == u) slot_index = static_cast<int>(i);
      int ahead = -1;  // the slot whose read-ahead unit u is
      for (size_t i = 0; i < ring_.size() && slot_index < 0 && ahead < 0; ++i)
        if (ring_[i].next_unit == u) ahead = static_cast<int>(i);
      if (slot_index < 0) {
        // Read ahead for a slot still in use (its caller holds it) decodes into a free one;
        // a unit not prefetched (first use, or an out-of-order request) is read now.
        for (size_t i = 0; i < ring_.size() && slot_index < 0; ++i)
          if (ring_[i].refs == 0 && !writing_locked(ring_[i])) slot_index = static_cast<int>(i);
        for (size_t i = 0; i < ring_.size() && slot_index < 0 && !writing; ++i)
          if (ring_[i].refs == 0) writing = ring_[i].ticket;
        if (slot_index < 0 && !writing)
          return internal_error(
              "trunk ring exhausted: every slot is in use (a caller holds too many layers)");
      }
      if (slot_index >= 0) {
        TrunkSlot& slot = ring_[static_cast<size_t>(slot_index)];
        if (slot.unit != u && ahead >= 0) {
          land_read_ahead_locked(static_cast<size_t>(ahead), static_cast<size_t>(slot_index));
        } else if (slot.unit != u) {
          slot.unit = u;
          slot.layer_view.reset();
          slot.head_view.reset();
          slot.ticket = read_trunk_async(u, slot.buf.data(), ReadPriority::kUrgent);
        }
        slot.refs++;
        ticket = slot.ticket;
        prefetch_after_locked(u);
        break;
      }
    }
    (void)pool_->wait(writing);  // its unit's own error, if any, is its next user's
  }
  trace(u, TimelineKind::kWaitBegin);
  Status st = await(ticket);
  trace(u, TimelineKind::kWaitEnd);
  std::lock_guard<std::mutex> lock(mu_);
  TrunkSlot& slot = ring_[static_cast<size_t>(slot_index)];
  if (!st.ok()) {
    slot.unit = -1;  // its bytes are not trustworthy
    unref_locked(static_cast<size_t>(slot_index));
    return st;
  }
  const ModelConfig& c = layout_.config();
  if (!slot.head_view && !slot.layer_view) {
    if (Status v = verify_locked(u, slot.buf.data()); !v.ok()) {
      slot.unit = -1;
      unref_locked(static_cast<size_t>(slot_index));
      return v;
    }
  }
  if (u >= c.layers && !slot.head_view) {
    auto head = std::make_shared<HeadWeights>();
    if (head_parts_ > 1) {
      const HeadPart& part = head_part_layouts_[static_cast<size_t>(u - c.layers)];
      *head = materialize_head(c, part.layout, slot.buf.data());
      head->first_row = part.first_row;
    } else {
      *head = materialize_head(c, layout_.head(), slot.buf.data());
    }
    slot.head_view = std::move(head);
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
  trace(ring_[static_cast<size_t>(slot)].unit, TimelineKind::kRelease);
  unref_locked(static_cast<size_t>(slot));
}

void StreamingSource::unref_locked(size_t slot) {
  TrunkSlot& s = ring_[slot];
  if (--s.refs == 0 && s.next_unit != -1) land_read_ahead_locked(slot, slot);
}

Result<std::shared_ptr<const LayerWeights>> StreamingSource::layer(int l) {
  if (plan_.pinned[static_cast<size_t>(l)]) return pinned_layer_[static_cast<size_t>(l)];
  NJ_ASSIGN_OR_RETURN(int slot, acquire_unit(l));
  std::shared_ptr<const LayerWeights> view = ring_[static_cast<size_t>(slot)].layer_view;
  return std::shared_ptr<const LayerWeights>(
      view.get(), [this, slot, view](const LayerWeights*) { release_unit(slot); });
}

Result<std::shared_ptr<const HeadWeights>> StreamingSource::head(int part) {
  const int u = layout_.config().layers + part;
  if (pinned(u)) return pinned_head_;
  NJ_ASSIGN_OR_RETURN(int slot, acquire_unit(u));
  std::shared_ptr<const HeadWeights> view = ring_[static_cast<size_t>(slot)].head_view;
  return std::shared_ptr<const HeadWeights>(
      view.get(), [this, slot, view](const HeadWeights*) { release_unit(slot); });
}

void StreamingSource::will_need_layer(int l) {
  if (plan_.pinned[static_cast<size_t>(l)] || ring_.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& slot : ring_)
    if (slot.unit == l || slot.next_unit == l) return;
  for (auto& slot : ring_) {
    if (slot.refs == 0 && !writing_locked(slot)) {
      slot.unit = l;
      slot.layer_view.reset();
      slot.head_view.reset();
      slot.ticket = read_trunk_async(l, slot.buf.data(), ReadPriority::kPrefetch);
      return;
    }
  }
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

Result<std::shared_ptr<const ExpertWeights>> StreamingSource::expert(int l, int e) {
  return experts_->acquire(l, e);
}

int StreamingSource::expert_hold_limit() const {
  return std::max(1, plan_.expert_buffers / 2);
}

bool StreamingSource::expert_ready(int l, int e) const {
  return experts_->loaded(l, e);
}

void StreamingSource::will_need_experts(int l, std::span<const int> experts) {
  experts_->will_need(l, experts);
}

WeightStats StreamingSource::stats() const {
  const ExpertCacheStats e = experts_->stats();
  std::lock_guard<std::mutex> lock(mu_);
  WeightStats s = stats_;
  s.expert_bytes_read = e.bytes_read;
  s.expert_hits = e.hits;
  s.expert_misses = e.misses;
  s.layer_hits = e.layer_hits;
  s.layer_misses = e.layer_misses;
  const ReadPoolCounters pool = pool_->counters();
  s.read_s = pool.busy_s;
  s.decoded_bytes = pool.consumed_bytes;
  s.decode_s = pool.consume_s;
  return s;
}

}  // namespace nj
