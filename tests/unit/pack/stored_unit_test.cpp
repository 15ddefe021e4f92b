// How a lossless unit is read (engine/pack/stored_unit.h): runs of whole blocks, in order,
// each one read of at most kBlockRunBytes unless a single block is larger; and the staging
// memory one I/O thread takes for them (engine/io/read_pool.h).
#include <catch2/catch.hpp>

#include "engine/io/read_pool.h"
#include "engine/pack/stored_unit.h"

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
