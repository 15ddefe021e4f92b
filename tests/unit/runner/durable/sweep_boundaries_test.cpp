// A sweep's layer boundaries on disk (runner/durable/sweep_boundaries.h): saved when due or
// when the run stops, read back bit for bit by the same window, and ignored (the window starts
// at layer 0) when damaged or written for another window, model or layer shape.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runner/durable/sweep_boundaries.h"
#include "tests/unit/model/test_models.h"

namespace nj::runner {
namespace {

// A window's stream: `rows` rows of `hidden`, `banks` bank entries, filled from `seed`.
struct Stream {
  int rows, hidden, banks;
  std::vector<float> h, blocks;
  Stream(int r, int w, int b, float seed) : rows(r), hidden(w), banks(b) {
    h.resize(static_cast<size_t>(r * w));
    blocks.resize(static_cast<size_t>(b * r * w));
    for (size_t i = 0; i < h.size(); ++i) h[i] = seed + static_cast<float>(i) * 0.25f;
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = -seed - static_cast<float>(i);
  }
  SweepBoundary at(int layer, int banked) {
    return SweepBoundary{layer, rows, hidden, banked, h.data(), blocks.data(), static_cast<size_t>(rows * hidden)};
  }
};

bool same(const std::vector<float>& a, const std::vector<float>& b, size_t n) {
  return std::memcmp(a.data(), b.data(), n * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("a sweep's boundary is saved when due and read back by the same window only",
          "[runner][sweep]") {
  testing::TempDir home;
  bool stopping = false;
  SweepKeeping keep{home.path(), 77, 0.0, [&] { return stopping; }};
  const std::vector<int32_t> doc = {5, 6, 7};
  std::vector<SweepSequence> window = {SweepSequence{doc}};
  const uint64_t key = SweepBoundaries::window_key(window);
  std::vector<int32_t> other_doc = {5, 6, 8};
  std::vector<SweepSequence> other = {SweepSequence{other_doc}};
  CHECK(SweepBoundaries::window_key(other) != key);

  Stream saved(3, 8, 2, 1.5f);
  {
    SweepBoundaries b(*Env::posix(), keep, 4, key);
    CHECK_FALSE(b.at_boundary(saved.at(5, 2)));  // due (interval 0): saved, not stopping
    CHECK(b.saves() == 1);
    CHECK(std::filesystem::exists(home.file(SweepBoundaries::path(4, key))));
  }
  SECTION("the same window resumes at the saved layer with the saved bits") {
    Stream back(3, 8, 2, 0.0f);
    SweepBoundaries b(*Env::posix(), keep, 4, key);
    SweepBoundary at = back.at(0, 0);
    REQUIRE(b.resume(at).ok());
    CHECK(at.layer == 5);
    CHECK(at.banked == 2);
    CHECK(b.resumed_layer() == 5);
    CHECK(same(back.h, saved.h, saved.h.size()));
    CHECK(same(back.blocks, saved.blocks, saved.blocks.size()));
    b.remove();
    CHECK_FALSE(std::filesystem::exists(home.file(SweepBoundaries::path(4, key))));
  }
  SECTION("a flipped byte, a truncation, another model or other rows start at layer 0") {
    const std::string file = home.file(SweepBoundaries::path(4, key));
    const auto size = std::filesystem::file_size(file);
    for (int damage = 0; damage < 4; ++damage) {
      INFO("damage " << damage);
      std::vector<char> bytes(size);
      {
        std::ifstream in(file, std::ios::binary);
        in.read(bytes.data(), static_cast<std::streamsize>(size));
      }
      std::vector<char> bad = bytes;
      SweepKeeping k = keep;
      int rows = 3;
      if (damage == 0) bad[size / 2] ^= 0x10;
      if (damage == 1) bad.resize(size - 5);
      if (damage == 2) k.model_fingerprint = 78;
      if (damage == 3) rows = 4;
      {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(bad.data(), static_cast<std::streamsize>(bad.size()));
      }
      Stream back(rows, 8, 2, 0.0f);
      SweepBoundaries b(*Env::posix(), k, 4, key);
      SweepBoundary at = back.at(0, 0);
      REQUIRE(b.resume(at).ok());
      CHECK(at.layer == 0);
      std::ofstream restore(file, std::ios::binary | std::ios::trunc);
      restore.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
  }
  SECTION("a stop saves the boundary and stops the sweep, whatever the interval") {
    SweepKeeping rarely{home.path(), 77, 1e9, [&] { return stopping; }};
    SweepBoundaries b(*Env::posix(), rarely, 4, key);
    Stream now(3, 8, 3, 9.0f);
    CHECK_FALSE(b.at_boundary(now.at(6, 3)));  // not due: nothing saved
    CHECK(b.saves() == 0);
    stopping = true;
    CHECK(b.at_boundary(now.at(7, 3)));
    CHECK(b.saves() == 1);
    Stream back(3, 8, 3, 0.0f);
    SweepBoundary at = back.at(0, 0);
    SweepBoundaries again(*Env::posix(), rarely, 4, key);
    REQUIRE(again.resume(at).ok());
    CHECK(at.layer == 7);
    CHECK(same(back.blocks, now.blocks, now.blocks.size()));
  }
  SECTION("a finished job's boundary files go") {
    SweepBoundaries::remove_job(*Env::posix(), home.path(), 40);  // another job's: stays
    CHECK(std::filesystem::exists(home.file(SweepBoundaries::path(4, key))));
    SweepBoundaries::remove_job(*Env::posix(), home.path(), 4);
    CHECK_FALSE(std::filesystem::exists(home.file(SweepBoundaries::path(4, key))));
  }
}

}  // namespace nj::runner
