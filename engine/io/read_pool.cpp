// ReadPool: chunked, prioritized reads on worker threads.
#include "engine/io/read_pool.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <system_error>

namespace nj {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

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

Result<std::unique_ptr<ReadPool>> ReadPool::create(int threads, size_t chunk_bytes,
                                                   size_t staging_bytes) {
  std::unique_ptr<ReadPool> pool(new ReadPool(chunk_bytes, staging_bytes));
  const int n = std::clamp(threads, 1, kMaxIoThreads);
  for (int i = 0; i < n; ++i) {
    try {
      pool->threads_.emplace_back([p = pool.get()] { p->worker(); });
    } catch (const std::system_error& e) {
      // The destructor stops and joins the threads already started.
      return resource_exhausted("cannot start I/O thread " + std::to_string(i + 1) + " of " +
                                std::to_string(n) + ": " + e.what() +
                                " (fewer --io-threads, or raise the process limits)");
    }
  }
  return pool;
}

ReadPool::~ReadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::shared_ptr<ReadTicket> ReadPool::submit(std::vector<ReadRequest> requests,
                                             ReadPriority priority) {
  auto ticket = std::make_shared<ReadTicket>();
  std::sort(requests.begin(), requests.end(), [](const ReadRequest& a, const ReadRequest& b) {
    if (a.file == b.file) return a.offset < b.offset;
    if (!a.file || !b.file) return a.file == nullptr;  // bytes in memory first
    return a.file->path() < b.file->path();
  });
  std::vector<Chunk> chunks;
  for (const ReadRequest& r : requests) {
    if (r.consume) {  // one piece: it is decoded whole
      chunks.push_back(Chunk{r, ticket});
      continue;
    }
    for (size_t done = 0; done < r.length; done += chunk_bytes_) {
      ReadRequest c = r;
      c.offset = r.offset + done;
      c.length = std::min(chunk_bytes_, r.length - done);
      c.dst = r.dst + done;
      chunks.push_back(Chunk{c, ticket});
    }
  }
  ticket->remaining_ = chunks.size();
  if (chunks.empty()) return ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = queues_[static_cast<int>(priority)];
    for (auto& c : chunks) q.push_back(std::move(c));
  }
  cv_.notify_all();
  return ticket;
}

void ReadPool::promote(const std::shared_ptr<ReadTicket>& ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& pre = queues_[static_cast<int>(ReadPriority::kPrefetch)];
  auto& urg = queues_[static_cast<int>(ReadPriority::kUrgent)];
  auto mid = std::stable_partition(pre.begin(), pre.end(),
                                   [&](const Chunk& c) { return c.ticket != ticket; });
  for (auto it = mid; it != pre.end(); ++it) urg.push_back(std::move(*it));
  pre.erase(mid, pre.end());
}

ReadPoolCounters ReadPool::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReadPoolCounters c = counters_;
  if (in_flight_ > 0) c.busy_s += now_s() - busy_since_;
  return c;
}

// Reads one chunk, or reads and consumes one block. Returns the failure, if any.
Status ReadPool::run_chunk(Chunk& chunk, uint8_t* staging) {
  ReadRequest& r = chunk.req;
  const ReadTrace& tr = r.trace;
  if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kReadStart);
  if (!r.consume) {
    Status s = r.file->read_at(r.offset, r.dst, r.length);
    if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kReadEnd);
    return s;
  }
  if (r.length > staging_bytes_)
    return invalid_argument("a block of " + std::to_string(r.length) + " bytes does not fit the " +
                            std::to_string(staging_bytes_) + "-byte staging buffer");
  const uint8_t* bytes = r.src;
  if (r.file) {
    NJ_RETURN_IF_ERROR(r.file->read_at(r.offset, staging, r.length));
    bytes = staging;
  }
  if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kReadEnd);
  timespec t0{}, t1{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  Status s = r.consume(std::span<const uint8_t>(bytes, r.length));
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  if (tr.timeline) tr.timeline->record(tr.unit, tr.block, TimelineKind::kDecodeEnd);
  std::lock_guard<std::mutex> lock(mu_);
  counters_.consumed_bytes += r.length;
  counters_.consume_s += static_cast<double>(t1.tv_sec - t0.tv_sec) +
                         1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
  return s;
}

void ReadPool::worker() {
  AlignedBuffer staging(staging_bytes_,
                        staging_on_huge_pages(staging_bytes_) ? PageSize::kHuge : PageSize::kAuto);
  while (true) {
    Chunk chunk;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queues_[0].empty() || !queues_[1].empty(); });
      auto& q = !queues_[0].empty() ? queues_[0] : queues_[1];
      if (q.empty()) return;  // stopping, and nothing left
      chunk = std::move(q.front());
      q.pop_front();
      if (chunk.req.file && in_flight_++ == 0) busy_since_ = now_s();
    }
    // A batch that already failed skips its remaining chunks.
    bool skip;
    {
      std::lock_guard<std::mutex> lock(chunk.ticket->mu_);
      skip = !chunk.ticket->status_.ok();
    }
    Status s = skip ? Status() : run_chunk(chunk, staging.data());
    const bool from_disk = chunk.req.file != nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (from_disk && --in_flight_ == 0) counters_.busy_s += now_s() - busy_since_;
      if (s.ok() && !skip && from_disk) {
        counters_.bytes += chunk.req.length;
        counters_.reads += 1;
      }
    }
    {
      std::lock_guard<std::mutex> lock(chunk.ticket->mu_);
      if (!s.ok() && chunk.ticket->status_.ok()) chunk.ticket->status_ = s;
      if (s.ok() && !skip) chunk.ticket->bytes_ += chunk.req.length;
      if (--chunk.ticket->remaining_ == 0) chunk.ticket->cv_.notify_all();
    }
  }
}

}  // namespace nj
