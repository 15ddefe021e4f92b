// Many reads in flight on a small pool of I/O threads: the engine's way of keeping the disk
// busy. A batch of reads is split into chunks (4 MiB by default) sorted by file and offset;
// the threads take chunks from two queues, urgent first (what the forward pass is waiting
// for now: routed experts) then prefetch (the next layers' trunk), so a demand read never
// waits behind a gigabyte of read-ahead. A failed or short read fails its whole batch with
// the file and offset; nothing is ever filled with zeros.
//
// A request may also carry a `consume` step (decoding a compressed block): the pool then
// reads it whole into a staging buffer of the thread that took it and hands the bytes to
// `consume` on that thread, so decoding overlaps compute as the reads do. Such a request
// may also take its bytes from memory instead of a file (a compressed block held in RAM).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "engine/io/file.h"
#include "engine/io/timeline.h"
#include "engine/util/status.h"

namespace nj {

struct ReadRequest {
  RandomAccessFile* file = nullptr;  // null: the bytes are in memory at `src` (with `consume`)
  uint64_t offset = 0;
  size_t length = 0;
  uint8_t* dst = nullptr;  // aligned as the file requires (see RandomAccessFile::read_at)
  // Optional. The request is then never split: its `length` bytes (at most the pool's
  // staging_bytes) go to a staging buffer instead of dst, and `consume` gets them, on the
  // I/O thread; its error fails the batch. The bytes are valid only during the call.
  std::function<Status(std::span<const uint8_t> bytes)> consume;
  const uint8_t* src = nullptr;
  ReadTrace trace;  // optional: where its start, end and decode go on a timeline
};

// The default number of I/O threads: NVMe needs several reads in flight to reach its rate.
inline constexpr int kDefaultIoThreads = 8;

enum class ReadPriority { kUrgent = 0, kPrefetch = 1 };

// Completion of one submitted batch. Thread-safe.
class ReadTicket {
 public:
  // Blocks until every chunk of the batch is done. Returns the first error, if any.
  Status wait();
  bool done() const;
  uint64_t bytes() const { return bytes_; }

 private:
  friend class ReadPool;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t remaining_ = 0;
  uint64_t bytes_ = 0;
  Status status_;
};

struct ReadPoolCounters {
  uint64_t bytes = 0;           // completed
  uint64_t reads = 0;           // chunks completed
  double busy_s = 0;            // wall time with at least one read in flight
  uint64_t consumed_bytes = 0;  // bytes handed to `consume` steps
  double consume_s = 0;         // thread time spent in them (summed over threads)
};

// The most I/O threads a pool starts: an NVMe device reaches its rate with a few dozen reads
// in flight, and each thread costs a stack; more would only risk exhausting the process.
inline constexpr int kMaxIoThreads = 256;

// The memory one I/O thread's staging buffer takes for requests of up to `staging_bytes`:
// on huge pages (see AlignedBuffer) from 1 MiB up, so rounded up to 2 MiB; smaller ones
// (small models' blocks) on 4 KiB pages, where rounding would cost more than it saves. The
// planner counts this.
inline bool staging_on_huge_pages(size_t staging_bytes) {
  return staging_bytes >= kHugePageBytes / 2;
}
inline size_t staging_buffer_bytes(size_t staging_bytes) {
  return align_up(staging_bytes,
                  staging_on_huge_pages(staging_bytes) ? kHugePageBytes : kDirectAlign);
}

class ReadPool {
 public:
  // A pool of `threads` I/O threads (1..kMaxIoThreads, clamped); reads are cut into chunks
  // of at most `chunk_bytes` (a multiple of kDirectAlign) so that several threads share a
  // large read. Each thread owns a staging buffer for requests with a `consume` step of up to
  // `staging_bytes` (0: none accepted), taking staging_buffer_bytes of memory.
  // ResourceExhausted naming the thread when the system refuses to start one (then no thread of the
  // pool is left running).
  static Result<std::unique_ptr<ReadPool>> create(int threads = kDefaultIoThreads,
                                                  size_t chunk_bytes = 4u << 20,
                                                  size_t staging_bytes = 0);
  ~ReadPool();  // finishes queued work first
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  // Queues the reads and returns at once. The destination buffers (and `src` bytes) must stay
  // valid until the ticket is done. Requests are sorted by file and offset (bytes in memory
  // by `offset` too). An empty batch returns a finished ticket. A `consume`
  // request longer than staging_bytes fails its batch (InvalidArgument).
  std::shared_ptr<ReadTicket> submit(std::vector<ReadRequest> requests, ReadPriority priority);

  // Moves a not-yet-started batch to the urgent queue (the caller is now waiting for it).
  void promote(const std::shared_ptr<ReadTicket>& ticket);

  ReadPoolCounters counters() const;

 private:
  struct Chunk {
    ReadRequest req;
    std::shared_ptr<ReadTicket> ticket;
  };
  ReadPool(size_t chunk_bytes, size_t staging_bytes);
  void worker();
  Status run_chunk(Chunk& chunk, uint8_t* staging);

  const size_t chunk_bytes_;
  const size_t staging_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> queues_[2];
  bool stop_ = false;
  int in_flight_ = 0;
  double busy_since_ = 0;
  ReadPoolCounters counters_;
  std::vector<std::thread> threads_;
};

}  // namespace nj
