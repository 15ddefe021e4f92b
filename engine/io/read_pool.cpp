// ReadPool: chunked, prioritized reads on worker threads.
#include "engine/io/read_pool.h"

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

ReadPool::ReadPool(size_t chunk_bytes)
    : chunk_bytes_(align_up(std::max<size_t>(chunk_bytes, kDirectAlign), kDirectAlign)) {}

Result<std::unique_ptr<ReadPool>> ReadPool::create(int threads, size_t chunk_bytes) {
  std::unique_ptr<ReadPool> pool(new ReadPool(chunk_bytes));
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

std::shared_ptr<ReadTicket> ReadPool::submit(std::vector<ReadRequest> requests, ReadPriority priority) {
  auto ticket = std::make_shared<ReadTicket>();
  std::sort(requests.begin(), requests.end(), [](const ReadRequest& a, const ReadRequest& b) {
    return a.file != b.file ? a.file->path() < b.file->path() : a.offset < b.offset;
  });
  std::vector<Chunk> chunks;
  for (const ReadRequest& r : requests) {
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
  auto mid = std::stable_partition(pre.begin(), pre.end(), [&](const Chunk& c) { return c.ticket != ticket; });
  for (auto it = mid; it != pre.end(); ++it) urg.push_back(std::move(*it));
  pre.erase(mid, pre.end());
}

ReadPoolCounters ReadPool::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReadPoolCounters c = counters_;
  if (in_flight_ > 0) c.busy_s += now_s() - busy_since_;
  return c;
}

void ReadPool::worker() {
  while (true) {
    Chunk chunk;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queues_[0].empty() || !queues_[1].empty(); });
      auto& q = !queues_[0].empty() ? queues_[0] : queues_[1];
      if (q.empty()) return;  // stopping, and nothing left
      chunk = std::move(q.front());
      q.pop_front();
      if (in_flight_++ == 0) busy_since_ = now_s();
    }
    // A batch that already failed skips its remaining chunks.
    bool skip;
    {
      std::lock_guard<std::mutex> lock(chunk.ticket->mu_);
      skip = !chunk.ticket->status_.ok();
    }
    Status s = skip ? Status() : chunk.req.file->read_at(chunk.req.offset, chunk.req.dst, chunk.req.length);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--in_flight_ == 0) counters_.busy_s += now_s() - busy_since_;
      if (s.ok() && !skip) {
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
