// Many reads in flight on a small pool of I/O threads: the engine's way of keeping the disk
// busy. A batch of reads is split into chunks (4 MiB by default) sorted by file and offset;
// the threads take chunks from two queues, urgent first (what the forward pass is waiting
// for now: routed experts) then prefetch (the next layers' trunk), so a demand read never
// waits behind a gigabyte of read-ahead. A failed or short read fails its whole batch with
// the file and offset; nothing is ever filled with zeros.
//
// A request may also carry a `consume` step (decoding a compressed block): the pool then
// reads it whole into one of its staging buffers and hands the bytes to `consume` on a
// decode thread, so decoding overlaps compute as the reads do. The I/O thread goes on to its
// next read at once: the disk is not left idle while a run decodes, and an urgent read
// (a routed expert) does not wait behind a decode. Such a request may also take its bytes
// from memory instead of a file (a compressed block held in RAM): it goes straight to the
// decode threads.
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
  // staging_bytes) go to a staging buffer instead of dst, and `consume` gets them, on a
  // decode thread; its error fails the batch. The bytes are valid only during the call.
  std::function<Status(std::span<const uint8_t> bytes)> consume;
  const uint8_t* src = nullptr;
  ReadTrace trace;  // optional: where its start, end and decode go on a timeline
};

// Holds back the decodes of a batch read ahead of the buffer they decode into (a ring slot
// still in use): its reads go on into staging, and its decodes wait until ReadPool::open
// names their destination. Reads of gated batches leave kUngatedStaging staging buffers to
// the others, so a pass waiting for some other unit is never stuck behind them.
class DecodeGate {
 public:
  // Where the batch's decodes write. REQUIRES: called by a `consume` step of the batch
  // (decodes run only once the gate is open).
  uint8_t* destination() const { return dst_; }

 private:
  friend class ReadPool;
  uint8_t* dst_ = nullptr;
  bool open_ = false;  // guarded by the pool's mutex
};

// Staging buffers that reads of a closed gate's batch never take.
inline constexpr size_t kUngatedStaging = 2;

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

// The default number of decode threads: one per core (at most 4), so that a unit the
// forward pass is about to need decodes on every core. They run at the process's priority:
// at the lowest (SCHED_IDLE) they would never delay the forward pass's threads, but on a
// host shared with other work they starved (2-3 s per token against 0.7 at 420 MiB on
// bench-8g at load 11), and a lower nice value measured no faster than the same one.
int default_decode_threads();

struct ReadPoolCounters {
  uint64_t bytes = 0;           // completed
  uint64_t reads = 0;           // chunks completed
  double busy_s = 0;            // wall time with at least one read in flight
  uint64_t consumed_bytes = 0;  // bytes handed to `consume` steps
  double consume_s = 0;         // thread CPU time spent in them (summed over threads)
};

// The most I/O threads a pool starts: an NVMe device reaches its rate with a few dozen reads
// in flight, and each thread costs a stack; more would only risk exhausting the process.
inline constexpr int kMaxIoThreads = 256;

// The memory one staging buffer takes for requests of up to `staging_bytes`:
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
  // large read. For requests with a `consume` step of up to `staging_bytes` (0: none
  // accepted) the pool holds `threads` staging buffers of staging_buffer_bytes each (a read
  // takes a free one; its decode gives it back) and starts `decode_threads` decode threads
  // (at least 1).
  // ResourceExhausted naming the thread when the system refuses to start one (then no thread of the
  // pool is left running).
  static Result<std::unique_ptr<ReadPool>> create(int threads = kDefaultIoThreads,
                                                  size_t chunk_bytes = 4u << 20,
                                                  size_t staging_bytes = 0,
                                                  int decode_threads = default_decode_threads());
  ~ReadPool();  // finishes queued work first
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  // Queues the reads and returns at once. The destination buffers (and `src` bytes) must stay
  // valid until the ticket is done. Requests are sorted by file and offset (bytes in memory
  // by `offset` too). An empty batch returns a finished ticket. A `consume`
  // request longer than staging_bytes fails its batch (InvalidArgument).
  // With a `gate`, every request must have a `consume` step and come from a file: they are
  // read as staging allows, and decoded once the gate is open. A batch whose gate is never
  // opened is dropped by the pool's destructor (its ticket then fails as Cancelled).
  std::shared_ptr<ReadTicket> submit(std::vector<ReadRequest> requests, ReadPriority priority,
                                     std::shared_ptr<DecodeGate> gate = nullptr);

  // Lets the gated batch's decodes run, into `dst` (DecodeGate::destination).
  void open(const std::shared_ptr<DecodeGate>& gate, uint8_t* dst);

  // Waits for the batch, which the caller needs now: promotes it, and decodes its blocks
  // that are read and waiting for a decode thread on the calling thread meanwhile.
  // Returns the batch's first error, if any.
  Status wait(const std::shared_ptr<ReadTicket>& ticket);

  // Moves a batch's not-yet-started reads and decodes to the urgent queues (the caller is
  // now waiting for it).
  void promote(const std::shared_ptr<ReadTicket>& ticket);

  ReadPoolCounters counters() const;

 private:
  struct Chunk {
    ReadRequest req;
    std::shared_ptr<ReadTicket> ticket;
    int staging = -1;  // the staging buffer its bytes were read into (decode queue only)
    std::shared_ptr<DecodeGate> gate;
    // REQUIRES: the pool's mutex held.
    bool held_back() const { return gate && !gate->open_; }
  };
  ReadPool(size_t chunk_bytes, size_t staging_bytes);
  Status start_thread(void (ReadPool::*body)(), int i, int n, const char* what);
  void worker();
  void decoder();
  // The index in queues_[q] of the first chunk an I/O thread can start now (a read that
  // decodes needs a free staging buffer), or -1. REQUIRES: mu_ held.
  long runnable_locked(int q) const;
  // The same for decode threads in decodes_[q] (a gated batch's once its gate is open).
  long decodable_locked(int q) const;
  bool skip(const Chunk& chunk) const;  // its batch already failed
  void finish(Chunk& chunk, const Status& s, bool skipped);
  void run_decode(Chunk& chunk);  // decodes (or drops) a chunk from decodes_

  const size_t chunk_bytes_;
  const size_t staging_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;         // I/O threads: a read queued, a staging buffer freed
  std::condition_variable decode_cv_;  // decode threads: a decode queued
  std::deque<Chunk> queues_[2];        // reads, by ReadPriority
  std::deque<Chunk> decodes_[2];       // read (or in memory), to decode, by ReadPriority
  std::vector<AlignedBuffer> staging_;
  std::vector<int> free_staging_;
  bool stop_ = false;         // I/O threads: finish the queued reads, then return
  bool stop_decode_ = false;  // decode threads: the same, once the I/O threads are done
  int in_flight_ = 0;
  double busy_since_ = 0;
  ReadPoolCounters counters_;
  std::vector<std::thread> threads_;
  std::vector<std::thread> decode_threads_;
};

}  // namespace nj
