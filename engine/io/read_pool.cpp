// ReadPool: chunked, prioritized reads on worker threads; decodes on their own threads.
#include "engine/io/read_pool.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

namespace nj {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace

int default_decode_threads() {
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores, 1u, 4u));
}

Status ReadTicket::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return remaining_ == 0; });
  return status_;
}

bool ReadTicket::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return remaining_ == 0;
}

ReadPool::ReadPool(size_t chunk_bytes, size_t staging_bytes)
    : chunk_bytes_(align_up(std::max<size_t>(chunk_bytes, kDirectAlign), kDirectAlign)),
      staging_bytes_(align_up(staging_bytes, kDirectAlign)) {}

Status ReadPool::start_thread(void (ReadPool::*body)(), int i, int n, const char* what) {
  try {
    (body == &ReadPool::worker ? threads_ : decode_threads_).emplace_back([this, body] {
      (this->*body)();
    });
  } catch (const std::system_error& e) {
    return resource_exhausted("cannot start " + std::string(what) + " " + std::to_string(i + 1) +
                              " of " + std::to_string(n) + ": " + e.what() +
                              " (fewer --io-threads, or raise the process limits)");
  }
  return Status();
}

Result<std::unique_ptr<ReadPool>> ReadPool::create(int threads, size_t chunk_bytes,
                                                   size_t staging_bytes, int decode_threads) {
  std::unique_ptr<ReadPool> pool(new ReadPool(chunk_bytes, staging_bytes));
  const int n = std::clamp(threads, 1, kMaxIoThreads);
  if (pool->staging_bytes_ > 0) {
    const PageSize pages =
        staging_on_huge_pages(pool->staging_bytes_) ? PageSize::kHuge : PageSize::kAuto;
    for (int i = 0; i < n; ++i) {
      pool->staging_.emplace_back(pool->staging_bytes_, pages);
      pool->free_staging_.push_back(i);
    }
  }
  // The destructor stops and joins the threads already started.
  for (int i = 0; i < n; ++i)
    NJ_RETURN_IF_ERROR(pool->start_thread(&ReadPool::worker, i, n, "I/O thread"));
  const int d = pool->staging_bytes_ > 0 ? std::clamp(decode_threads, 1, kMaxIoThreads) : 0;
  for (int i = 0; i < d; ++i)
    NJ_RETURN_IF_ERROR(pool->start_thread(&ReadPool::decoder, i, d, "decode thread"));
  return pool;
}

ReadPool::~ReadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();  // every read done; their decodes are queued
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_decode_ = true;
  }
  decode_cv_.notify_all();
  for (auto& t : decode_threads_) t.join();
}

std::shared_ptr<ReadTicket> ReadPool::submit(std::vector<ReadRequest> requests,
                                             ReadPriority priority,
                                             std::shared_ptr<DecodeGate> gate) {
  auto ticket = std::make_shared<ReadTicket>();
  std::sort(requests.begin(), requests.end(), [](const ReadRequest& a, const ReadRequest& b) {
    if (a.file == b.file) return a.offset < b.offset;
    if (!a.file || !b.file) return a.file == nullptr;  // bytes in memory first
    return a.file->path() < b.file->path();
  });
  std::vector<Chunk> reads, decodes;
  for (const ReadRequest& r : requests) {
    if (r.consume) {  // one piece: it is decoded whole
      if (r.file && r.length > staging_bytes_) {
        ticket->status_ =
            invalid_argument("a block of " + std::to_string(r.length) + " bytes does not fit the " +
                             std::to_string(staging_bytes_) + "-byte staging buffer");
        return ticket;  // failed, with nothing queued
      }
      (r.file ? reads : decodes).push_back(Chunk{r, ticket, -1, gate});
      continue;
    }
    NJ_CHECK_MSG(!gate, "a gated batch reads only blocks to decode");
    for (size_t done = 0; done < r.length; done += chunk_bytes_) {
      ReadRequest c = r;
      c.offset = r.offset + done;
      c.length = std::min(chunk_bytes_, r.length - done);
      c.dst = r.dst + done;
      reads.push_back(Chunk{c, ticket});
    }
  }
  NJ_CHECK_MSG(!gate || decodes.empty(), "a gated batch reads from a file");
  if (!decodes.empty() && decode_threads_.empty()) {
    ticket->status_ = invalid_argument("this read pool has no staging for blocks to decode");
    return ticket;
  }
  ticket->remaining_ = reads.size() + decodes.size();
  if (ticket->remaining_ == 0) return ticket;
  const int q = static_cast<int>(priority);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : reads) queues_[q].push_back(std::move(c));
    for (auto& c : decodes) decodes_[q].push_back(std::move(c));
  }
  if (!reads.empty()) cv_.notify_all();
  if (!decodes.empty()) decode_cv_.notify_all();
  return ticket;
}

void ReadPool::open(const std::shared_ptr<DecodeGate>& gate, uint8_t* dst) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    gate->dst_ = dst;
    gate->open_ = true;
  }
  cv_.notify_all();  // its reads may take any staging buffer now
  decode_cv_.notify_all();
}

void ReadPool::promote(const std::shared_ptr<ReadTicket>& ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (std::deque<Chunk>* qs : {queues_, decodes_}) {
    auto& pre = qs[static_cast<int>(ReadPriority::kPrefetch)];
    auto& urg = qs[static_cast<int>(ReadPriority::kUrgent)];
    auto mid = std::stable_partition(pre.begin(), pre.end(),
                                     [&](const Chunk& c) { return c.ticket != ticket; });
    for (auto it = mid; it != pre.end(); ++it) urg.push_back(std::move(*it));
    pre.erase(mid, pre.end());
  }
}

ReadPoolCounters ReadPool::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReadPoolCounters c = counters_;
  if (in_flight_ > 0) c.busy_s += now_s() - busy_since_;
  return c;
}

long ReadPool::runnable_locked(int q) const {
  const std::deque<Chunk>& queue = queues_[q];
  for (size_t i = 0; i < queue.size(); ++i) {
    const Chunk& c = queue[i];
    if (stop_ && c.held_back()) return static_cast<long>(i);  // dropped (the destructor)
    if (!c.req.consume) return static_cast<long>(i);
    if (free_staging_.size() > (c.held_back() ? kUngatedStaging : 0)) return static_cast<long>(i);
  }
  return -1;
}

long ReadPool::decodable_locked(int q) const {
  const std::deque<Chunk>& queue = decodes_[q];
  for (size_t i = 0; i < queue.size(); ++i)
    if (stop_decode_ || !queue[i].held_back()) return static_cast<long>(i);
  return -1;
}

bool ReadPool::skip(const Chunk& chunk) const {
  std::lock_guard<std::mutex> lock(chunk.ticket->mu_);
  return !chunk.ticket->status_.ok();
}

void ReadPool::finish(Chunk& chunk, const Status& s, bool skipped) {
  std::lock_guard<std::mutex> lock(chunk.ticket->mu_);
  if (!s.ok() && chunk.ticket->status_.ok()) chunk.ticket->status_ = s;
  if (s.ok() && !skipped) chunk.ticket->bytes_ += chunk.req.length;
  if (--chunk.ticket->remaining_ == 0) chunk.ticket->cv_.notify_all();
}

void ReadPool::worker() {
  while (true) {
    Chunk chunk;
    int q = -1;
    {
      std::unique_lock<std::mutex> lock(mu_);
      long at = -1;
      cv_.wait(lock, [&] {
        for (q = 0; q < 2; ++q)
          if ((at = runnable_locked(q)) >= 0) return true;
        return stop_ && queues_[0].empty() && queues_[1].empty();
      });
      if (at < 0) return;  // stopping, and nothing left
      chunk = std::move(queues_[q][static_cast<size_t>(at)]);
      queues_[q].erase(queues_[q].begin() + at);
      // The last read taken while stopping: the threads still waiting (for a staging buffer)
      // can return now, and nothing else would wake them (a freed buffer wakes one thread).
      if (stop_ && queues_[0].empty() && queues_[1].empty()) cv_.notify_all();
      if (chunk.held_back() && stop_) {  // read ahead for a unit no one will use now
        lock.unlock();
        finish(chunk, cancelled("read ahead, dropped at shutdown"), false);
        continue;
      }
      if (chunk.req.consume) {
        chunk.staging = free_staging_.back();
        free_staging_.pop_back();
      }
      if (in_flight_++ == 0) busy_since_ = now_s();
    }
    // A batch that already failed skips its remaining chunks.
    const bool skipped = skip(chunk);
    Status s;
    ReadRequest& r = chunk.req;
    const ReadTrace& tr = r.trace;
    if (!skipped) {
      uint8_t* dst = r.consume ? staging_[static_cast<size_t>(chunk.staging)].data() : r.dst;
      if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kReadStart);
      s = r.file->read_at(r.offset, dst, r.length);
      if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kReadEnd);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--in_flight_ == 0) counters_.busy_s += now_s() - busy_since_;
      if (s.ok() && !skipped) {
        counters_.bytes += r.length;
        counters_.reads += 1;
      }
      if (r.consume && s.ok() && !skipped) {  // on to a decode thread, in its batch's queue
        decodes_[q].push_back(std::move(chunk));
        decode_cv_.notify_one();
        continue;
      }
      if (r.consume) {  // nothing to decode: the staging buffer is free again
        free_staging_.push_back(chunk.staging);
        cv_.notify_one();
      }
    }
    finish(chunk, s, skipped);
  }
}

void ReadPool::decoder() {
  while (true) {
    Chunk chunk;
    {
      std::unique_lock<std::mutex> lock(mu_);
      long at = -1;
      int q = 0;
      decode_cv_.wait(lock, [&] {
        for (q = 0; q < 2; ++q)
          if ((at = decodable_locked(q)) >= 0) return true;
        return stop_decode_;
      });
      if (at < 0) return;  // stopping, and nothing left
      chunk = std::move(decodes_[q][static_cast<size_t>(at)]);
      decodes_[q].erase(decodes_[q].begin() + at);
    }
    run_decode(chunk);
  }
}

void ReadPool::run_decode(Chunk& chunk) {
  bool dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped = chunk.held_back();  // read ahead for a unit no one will use now
  }
  const bool skipped = dropped || skip(chunk);
  Status s;
  ReadRequest& r = chunk.req;
  const ReadTrace& tr = r.trace;
  double cpu_s = 0;
  if (!skipped) {
    const uint8_t* bytes =
        chunk.staging >= 0 ? staging_[static_cast<size_t>(chunk.staging)].data() : r.src;
    if (tr.timeline && !r.file) {  // a block held in RAM: "read" at once
      tr.timeline->record(tr.unit, tr.block, TimelineKind::kReadStart);
      tr.timeline->record(tr.unit, tr.block, TimelineKind::kReadEnd);
    }
    if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kDecodeStart);
    const double t0 = thread_cpu_s();
    s = r.consume(std::span<const uint8_t>(bytes, r.length));
    cpu_s = thread_cpu_s() - t0;
    if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kDecodeEnd);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!skipped) {
      counters_.consumed_bytes += r.length;
      counters_.consume_s += cpu_s;
    }
    if (chunk.staging >= 0) {
      free_staging_.push_back(chunk.staging);
      cv_.notify_one();
    }
  }
  finish(chunk, dropped ? cancelled("read ahead, dropped at shutdown") : s, skipped);
}

Status ReadPool::wait(const std::shared_ptr<ReadTicket>& ticket) {
  promote(ticket);
  while (!ticket->done()) {
    Chunk chunk;
    {
      std::lock_guard<std::mutex> lock(mu_);
      long at = -1;
      int q = 0;
      for (q = 0; q < 2 && at < 0; ++q) {
        const std::deque<Chunk>& queue = decodes_[q];
        for (size_t i = 0; i < queue.size() && at < 0; ++i)
          if (!queue[i].held_back() && queue[i].ticket == ticket) at = static_cast<long>(i);
        if (at >= 0) break;
      }
      if (at < 0) break;  // nothing of it left to decode: wait for its reads
      chunk = std::move(decodes_[q][static_cast<size_t>(at)]);
      decodes_[q].erase(decodes_[q].begin() + at);
    }
    run_decode(chunk);
  }
  return ticket->wait();
}

}  // namespace nj
