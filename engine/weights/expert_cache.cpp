// The expert cache (expert_cache.h): announcing, reading, pinning and evicting experts.
#include "engine/weights/expert_cache.h"

#include <algorithm>

namespace nj {

size_t LruExpertPolicy::choose_victim(std::span<const ExpertCandidate> c) const {
  size_t best = 0;
  for (size_t i = 1; i < c.size(); ++i) {
    if (c[i].last_use < c[best].last_use ||
        (c[i].last_use == c[best].last_use && c[i].buffer < c[best].buffer))
      best = i;
  }
  return best;
}

ExpertCache::ExpertCache(const ModelLayout& layout, int buffers, uint64_t buffer_bytes,
                         std::vector<int> cache_slots,
                         std::shared_ptr<const ExpertCachePolicy> policy, ReadUnit read,
                         Await await)
    : layout_(layout),
      cache_slots_(std::move(cache_slots)),
      policy_(std::move(policy)),
      read_(std::move(read)),
      await_(std::move(await)) {
  const size_t layers = static_cast<size_t>(layout.config().layers);
  // One allocation for every buffer: large enough for transparent huge pages (AlignedBuffer),
  // where hundreds of separate MB-sized buffers would each sit in 4 KiB pages. An expert
  // group walks a few hundred MB of scattered experts per pass; on 4 KiB pages that is a TLB
  // miss every 4 KiB, and a miss is a nested page walk in a virtual machine. Measured on
  // bench-8g's expert shapes (192 MXFP4 experts drawn from 7.7 GB, 2 threads): 66-76 ms per
  // pass in 4 KiB pages, 14-19 ms in huge pages.
  const size_t stride = align_up(static_cast<size_t>(buffer_bytes), kDirectAlign);
  buffers_.resize(static_cast<size_t>(std::max(0, buffers)));
  slab_ = AlignedBuffer(stride * buffers_.size());
  for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].bytes = slab_.data() + i * stride;
  where_.resize(layers);
  pending_.resize(layers);
  stats_.layer_hits.assign(layers, 0);
  stats_.layer_misses.assign(layers, 0);
}

ExpertCacheStats ExpertCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ExpertCache::issue_locked(int b, int layer, int e) {
  Buffer& buf = buffers_[static_cast<size_t>(b)];
  if (buf.layer >= 0) where_[static_cast<size_t>(buf.layer)].erase(buf.expert);
  buf.layer = layer;
  buf.expert = e;
  buf.view.reset();
  buf.uses = 0;
  buf.needed = true;
  buf.hit = false;
  where_[static_cast<size_t>(layer)][e] = b;
  buf.ticket = read_(layout_.expert(layer, e).unit, buf.bytes, ReadPriority::kUrgent);
}

// A buffer for a miss of `layer`: a free one, else the policy's pick among idle experts that
// nobody is about to use. -1 when every buffer is in use, loading, or announced.
int ExpertCache::obtain_buffer_locked() {
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].layer < 0 && buffers_[i].refs == 0) return static_cast<int>(i);
  std::vector<ExpertCandidate> idle;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (b.refs == 0 && !b.needed && (!b.ticket || b.ticket->done()))
      idle.push_back({static_cast<int>(i), b.layer, b.expert, b.last_use, b.uses});
  }
  if (idle.empty()) return -1;
  return idle[policy_->choose_victim(idle)].buffer;
}

void ExpertCache::pump_locked(int layer) {
  auto& pending = pending_[static_cast<size_t>(layer)];
  while (!pending.empty()) {
    const int b = obtain_buffer_locked();
    if (b < 0) return;
    const int e = pending.front();
    pending.pop_front();
    issue_locked(b, layer, e);
    stats_.layer_misses[static_cast<size_t>(layer)]++;
    stats_.misses++;
  }
}

void ExpertCache::will_need(int l, std::span<const int> ids) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& where = where_[static_cast<size_t>(l)];
  auto& pending = pending_[static_cast<size_t>(l)];
  for (int e : ids) {
    auto it = where.find(e);
    if (it != where.end()) {
      Buffer& b = buffers_[static_cast<size_t>(it->second)];
      if (!b.needed) {
        b.needed = true;
        b.hit = true;
        stats_.layer_hits[static_cast<size_t>(l)]++;
        stats_.hits++;
      }
    } else if (std::find(pending.begin(), pending.end(), e) == pending.end()) {
      pending.push_back(e);
    }
  }
  pump_locked(l);
}

Result<std::shared_ptr<const ExpertWeights>> ExpertCache::acquire(int l, int e) {
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
      int nb = obtain_buffer_locked();
      if (nb < 0) {
        for (size_t i = 0; i < buffers_.size() && nb < 0; ++i) {
          Buffer& c = buffers_[i];
          if (c.refs == 0 && (!c.ticket || c.ticket->done())) {
            if (c.needed && c.layer == l) pending.push_front(c.expert);
            nb = static_cast<int>(i);
          }
        }
      }
      if (nb < 0) return internal_error("expert pool exhausted: every buffer is in use or loading");
      issue_locked(nb, l, e);
      stats_.layer_misses[static_cast<size_t>(l)]++;
      stats_.misses++;
      it = where.find(e);
    }
    b = it->second;
    Buffer& buf = buffers_[static_cast<size_t>(b)];
    buf.refs++;
    buf.needed = false;
    buf.last_use = ++tick_;
    buf.uses++;
    ticket = buf.ticket;
  }
  Status st = await_(ticket);
  std::lock_guard<std::mutex> lock(mu_);
  Buffer& buf = buffers_[static_cast<size_t>(b)];
  if (!st.ok()) {
    buf.refs--;
    where_[static_cast<size_t>(l)].erase(e);
    buf.layer = buf.expert = -1;
    return st;
  }
  if (!buf.view) {
    const ExpertLayout& el = layout_.expert(l, e);
    buf.view = std::make_shared<ExpertWeights>(materialize_expert(el, buf.bytes));
    stats_.bytes_read += el.unit.tensor_bytes;
  }
  std::shared_ptr<const ExpertWeights> view = buf.view;
  return std::shared_ptr<const ExpertWeights>(
      view.get(), [this, b, view](const ExpertWeights*) { release(b); });
}

bool ExpertCache::loaded(int l, int e) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto& where = where_[static_cast<size_t>(l)];
  auto it = where.find(e);
  if (it == where.end()) return false;
  const Buffer& b = buffers_[static_cast<size_t>(it->second)];
  return !b.ticket || b.ticket->done();
}

void ExpertCache::release(int b) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer& buf = buffers_[static_cast<size_t>(b)];
  const int layer = buf.layer;
  if (--buf.refs > 0) return;
  // Keep at most the planned number of idle experts for this layer; the rest is staging.
  const int quota = cache_slots_[static_cast<size_t>(layer)];
  std::vector<ExpertCandidate> idle;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& x = buffers_[i];
    if (x.layer == layer && x.refs == 0 && !x.needed && (!x.ticket || x.ticket->done()))
      idle.push_back({static_cast<int>(i), x.layer, x.expert, x.last_use, x.uses});
  }
  while (static_cast<int>(idle.size()) > quota) {
    const size_t v = policy_->choose_victim(idle);
    Buffer& victim = buffers_[static_cast<size_t>(idle[v].buffer)];
    where_[static_cast<size_t>(layer)].erase(victim.expert);
    victim.layer = victim.expert = -1;
    victim.view.reset();
    idle.erase(idle.begin() + static_cast<long>(v));
  }
  pump_locked(layer);
}

}  // namespace nj
