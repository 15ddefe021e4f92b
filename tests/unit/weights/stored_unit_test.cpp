// How a lossless unit is read (engine/pack/stored_unit.h): runs of whole blocks, in order,
// each one read of at most kBlockRunBytes unless a single block is larger; and the staging
// memory one I/O thread takes for them (engine/io/read_pool.h).
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>

#include "engine/io/read_pool.h"
#include "engine/weights/stored_unit.h"

namespace nj {
namespace {

// A unit of blocks of the given stored sizes, each starting on a 4 KiB boundary.
UnitLayout unit_of(const std::vector<uint32_t>& stored) {
  UnitLayout u;
  uint64_t at = 0, raw = 0;
  for (uint32_t n : stored) {
    u.blocks.push_back(StoredBlock{at, n, 1u << 20, raw, 0});
    at = align_up(at + n, kDirectAlign);
    raw += 1u << 20;
  }
  return u;
}

TEST_CASE("a lossless unit is read in runs of whole blocks, in order, of at most 4 MiB each",
          "[engine][pack][lossless]") {
  // 700 KB blocks (bench-8g's), one of 9 MB (larger than a run), a tail of small ones.
  std::vector<uint32_t> sizes(13, 700000);
  sizes.push_back(9000000);
  for (int i = 0; i < 5; ++i) sizes.push_back(3000 + 1000 * i);
  const UnitLayout u = unit_of(sizes);
  const std::vector<BlockRun> runs = block_runs(u);
  REQUIRE(!runs.empty());
  size_t next = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const BlockRun& r = runs[i];
    INFO("run " << i);
    CHECK(r.first == next);  // every block once, in order
    REQUIRE(r.count >= 1);
    next = r.first + r.count;
    const StoredBlock& first = u.blocks[r.first];
    const StoredBlock& last = u.blocks[r.first + r.count - 1];
    CHECK(r.stored_offset == first.stored_offset);
    CHECK(r.read_bytes ==
          align_up(last.stored_offset + last.stored_bytes, kDirectAlign) - first.stored_offset);
    CHECK(r.read_bytes % kDirectAlign == 0);
    if (r.count > 1) CHECK(r.read_bytes <= kBlockRunBytes);
    if (next < u.blocks.size()) {  // the next block would not have fitted this run
      const StoredBlock& b = u.blocks[next];
      CHECK(align_up(b.stored_offset + b.stored_bytes, kDirectAlign) - r.stored_offset >
            kBlockRunBytes);
    }
  }
  CHECK(next == u.blocks.size());
  // 5 blocks of 700 KB (4 KiB-aligned) fit 4 MiB, a sixth does not; the 9 MB block is alone.
  CHECK(runs[0].count == 5);
  bool big_alone = false;
  for (const BlockRun& r : runs) big_alone = big_alone || (r.first == 13 && r.count == 1);
  CHECK(big_alone);
  CHECK(largest_block_run(u) == align_up(9000000, kDirectAlign));
  CHECK(block_runs(UnitLayout{}).empty());
  CHECK(largest_block_run(UnitLayout{}) == 0);
}

TEST_CASE("an I/O thread's staging for runs of 1 MiB and more is whole huge pages",
          "[engine][io][lossless]") {
  CHECK(staging_buffer_bytes(0) == 0);
  CHECK(staging_buffer_bytes(100u << 10) == 100u << 10);  // small models' blocks: 4 KiB pages
  CHECK(staging_buffer_bytes((100u << 10) + 1) == (100u << 10) + kDirectAlign);
  CHECK(staging_buffer_bytes(1u << 20) == 2u << 20);
  CHECK(staging_buffer_bytes(4u << 20) == 4u << 20);
  CHECK(staging_buffer_bytes((4u << 20) - 4096) == 4u << 20);
  CHECK(staging_buffer_bytes(9000000) == 10u << 20);
}

}  // namespace
}  // namespace nj

namespace nj {
namespace {

// A file of `n` bytes, byte i = i % 251, removed at the end of the test.
struct PatternFile {
  std::string path;
  explicit PatternFile(size_t n) {
    char name[] = "/tmp/nightjar-readpool-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    path = name;
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i % 251);
    REQUIRE(::write(fd, bytes.data(), n) == static_cast<ssize_t>(n));
    ::close(fd);
  }
  ~PatternFile() { ::unlink(path.c_str()); }
};

TEST_CASE(
    "a gated batch is read ahead but decoded only once its gate opens, into the gate's "
    "destination, one never opened is dropped when the pool stops",
    "[engine][pack][lossless]") {
  static constexpr size_t block = 64 << 10;  // static: the read callbacks need no capture
  PatternFile f(8 * block);
  auto file = open_random_access(f.path, IoMode::kBuffered);
  REQUIRE(file.ok());
  std::atomic<int> decoded{0};
  std::vector<uint8_t> out(4 * block, 0);
  auto gated = [&](size_t first, const std::shared_ptr<DecodeGate>& gate) {
    std::vector<ReadRequest> reqs;
    for (size_t k = first; k < first + 4; ++k) {
      ReadRequest r;
      r.file = file->get();
      r.offset = k * block;
      r.length = block;
      r.consume = [&decoded, gate, k, first](std::span<const uint8_t> bytes) {
        std::copy(bytes.begin(), bytes.end(), gate->destination() + (k - first) * block);
        decoded++;
        return Status();
      };
      reqs.push_back(std::move(r));
    }
    return reqs;
  };
  auto gate = std::make_shared<DecodeGate>();
  auto ahead = std::make_shared<DecodeGate>();
  std::shared_ptr<ReadTicket> dropped;
  {
    auto pool = ReadPool::create(8, 4u << 20, block, 2);
    REQUIRE(pool.ok());
    auto ticket = (*pool)->submit(gated(0, gate), ReadPriority::kPrefetch, gate);
    // Reads go on, but nothing decodes while the gate is closed.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((*pool)->counters().bytes < 4 * block && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK((*pool)->counters().bytes == 4 * block);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(decoded == 0);
    CHECK(!ticket->done());
    (*pool)->open(gate, out.data());
    REQUIRE((*pool)->wait(ticket).ok());
    CHECK(decoded == 4);
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i] != static_cast<uint8_t>(i % 251)) FAIL("byte " << i << " differs");
    dropped = (*pool)->submit(gated(4, ahead), ReadPriority::kPrefetch, ahead);
  }  // the pool stops with `ahead` never opened
  CHECK(dropped->done());
  CHECK(dropped->wait().code() == StatusCode::kCancelled);
  CHECK(decoded == 4);
}

TEST_CASE(
    "a pool stopped while reads wait for staging returns: every I/O thread sees the last read "
    "taken",
    "[engine][pack][lossless]") {
  // Four I/O threads, so four staging buffers: a gated batch never opened takes two (its
  // decodes wait until the pool stops), an open batch the other two while its first decode
  // (whichever of its reads finished first: the one decoder then decodes nothing else) is
  // held, and its third read waits for a buffer. The pool is stopped then, and the held
  // decode let go: one freed buffer wakes one thread for the last read, and the others,
  // waiting for staging, must see that nothing is left.
  static constexpr size_t block = 64 << 10;
  PatternFile f(8 * block);
  auto file = open_random_access(f.path, IoMode::kBuffered);
  REQUIRE(file.ok());
  std::atomic<bool> let_go{false}, held{false};
  auto requests = [&](size_t first, size_t n, bool hold_first) {
    std::vector<ReadRequest> reqs;
    for (size_t k = first; k < first + n; ++k) {
      ReadRequest r;
      r.file = file->get();
      r.offset = k * block;
      r.length = block;
      r.consume = [&let_go, &held, hold_first](std::span<const uint8_t>) {
        if (hold_first && !held.exchange(true))
          while (!let_go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return Status();
      };
      reqs.push_back(std::move(r));
    }
    return reqs;
  };
  auto pool = ReadPool::create(4, 4u << 20, block, 1);
  REQUIRE(pool.ok());
  struct LetGo {  // a failed REQUIRE must not leave the held decode (and the pool's end) waiting
    std::atomic<bool>& flag;
    ~LetGo() { flag = true; }
  } let_go_on_exit{let_go};
  auto wait_bytes = [&](uint64_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((*pool)->counters().bytes < n && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return (*pool)->counters().bytes;
  };
  auto gate = std::make_shared<DecodeGate>();
  auto gated = (*pool)->submit(requests(0, 2, false), ReadPriority::kPrefetch, gate);
  REQUIRE(wait_bytes(2 * block) == 2 * block);
  auto open = (*pool)->submit(requests(2, 3, true), ReadPriority::kPrefetch);
  REQUIRE(wait_bytes(4 * block) == 4 * block);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK((*pool)->counters().bytes == 4 * block);  // the third read waits for staging
  std::promise<void> stopped;
  std::future<void> done = stopped.get_future();
  std::thread stopper([&] {
    pool->reset();
    stopped.set_value();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the pool is stopping
  let_go = true;
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "hung: the read pool's destructor, I/O threads waiting for staging\n");
    std::abort();  // the threads cannot be cleaned up
  }
  stopper.join();
  CHECK(open->wait().ok());
  CHECK(gated->wait().code() == StatusCode::kCancelled);
}

}  // namespace
}  // namespace nj
