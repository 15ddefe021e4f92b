// The order of a sweep layer's attention half (engine/sweep/layer_chunks.h): every row once
// per layer, in chunks within one generation; a sequence starts only after its parent is
// done and is let go only once it is done and its branches have started; and a window of
// many documents holds LayerChunks::bound states at once, not one per sequence.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <utility>
#include <vector>

#include "engine/sweep/layer_chunks.h"

namespace nj {
namespace {

struct Tree {
  std::vector<int> parent, rows, row0;
  int depth = 0;
};

// Rows laid out as LayerChunks lays them out (walk's checks hold it to this): generation by
// generation, branches in their parents' order, then their own.
void lay_out(Tree& t) {
  const size_t S = t.parent.size();
  std::vector<int> depth(S, 0);
  for (size_t i = 0; i < S; ++i)
    if (t.parent[i] >= 0) depth[i] = depth[static_cast<size_t>(t.parent[i])] + 1;
  t.depth = S ? *std::max_element(depth.begin(), depth.end()) : 0;
  t.row0.assign(S, 0);
  int r = 0;
  for (int d = 0; d <= t.depth; ++d) {
    std::vector<size_t> g;
    for (size_t i = 0; i < S; ++i)
      if (depth[i] == d) g.push_back(i);
    std::stable_sort(g.begin(), g.end(), [&](size_t a, size_t b) {
      return (t.parent[a] < 0 ? -1 : t.row0[static_cast<size_t>(t.parent[a])]) <
             (t.parent[b] < 0 ? -1 : t.row0[static_cast<size_t>(t.parent[b])]);
    });
    for (size_t i : g) t.row0[i] = r, r += t.rows[i];
  }
}

// A classify window: the template prefix, documents after it, a few label paths of each.
Tree classify_window(int documents, int branches) {
  Tree t;
  t.parent.push_back(-1);
  t.rows.push_back(30);
  for (int d = 0; d < documents; ++d) {
    const int doc = static_cast<int>(t.parent.size());
    t.parent.push_back(0);
    t.rows.push_back(100 + (d * 37) % 101);
    for (int b = 0; b < branches; ++b) {
      t.parent.push_back(doc);
      t.rows.push_back(1 + b % 3);
    }
  }
  lay_out(t);
  return t;
}

Tree random_tree(std::mt19937& rng, int sequences) {
  Tree t;
  for (int i = 0; i < sequences; ++i) {
    const bool root = i == 0 || rng() % 3 == 0;
    t.parent.push_back(root ? -1 : static_cast<int>(rng() % static_cast<unsigned>(i)));
    t.rows.push_back(1 + static_cast<int>(rng() % 40));
  }
  lay_out(t);
  return t;
}

// Runs `layers` layers' chunks, checking every promise; returns the peak of live states.
int walk(const Tree& t, int chunk_rows, int chunk_sequences, int waiting, int layers = 2) {
  const size_t S = t.parent.size();
  LayerChunks lc(t.parent, t.rows, chunk_rows, chunk_sequences, waiting);
  int total = 0;
  for (int r : t.rows) total += r;
  std::vector<int> depth(S, 0);
  for (size_t i = 0; i < S; ++i)
    if (t.parent[i] >= 0) depth[i] = depth[static_cast<size_t>(t.parent[i])] + 1;
  for (int layer = 0; layer < layers; ++layer) {
    lc.begin_layer();
    std::vector<int> covered(static_cast<size_t>(total), 0), done_rows(S, 0);
    std::vector<char> started(S, 0), released(S, 0);
    std::vector<int> unstarted_children(S, 0);
    for (size_t i = 0; i < S; ++i)
      if (t.parent[i] >= 0) ++unstarted_children[static_cast<size_t>(t.parent[i])];
    int live = 0, chunks = 0;
    for (LayerChunks::Chunk k; lc.next(k); ++chunks) {
      REQUIRE(k.rows > 0);
      REQUIRE(k.rows <= chunk_rows);
      REQUIRE(static_cast<int>(k.starting.size()) <= chunk_sequences);
      for (int r = k.row0; r < k.row0 + k.rows; ++r) ++covered[static_cast<size_t>(r)];
      int next_row = k.row0;
      for (int i : k.sequences) {  // contiguous, one generation
        const auto s = static_cast<size_t>(i);
        CHECK(depth[s] == k.generation);
        CHECK(!released[s]);
        const int lo = std::max(t.row0[s], k.row0),
                  hi = std::min(t.row0[s] + t.rows[s], k.row0 + k.rows);
        CHECK(lo == next_row);
        next_row = hi;
        done_rows[s] += hi - lo;
      }
      CHECK(next_row == k.row0 + k.rows);
      for (int i : k.starting) {
        const auto s = static_cast<size_t>(i);
        CHECK(!started[s]);
        CHECK(t.row0[s] >= k.row0);
        started[s] = 1;
        ++live;
        if (t.parent[s] >= 0) {  // its parent is done, and still held
          const auto p = static_cast<size_t>(t.parent[s]);
          CHECK(done_rows[p] == t.rows[p]);
          CHECK(!released[p]);
          CHECK(lc.last_branch(i) == (--unstarted_children[p] == 0));
        }
      }
      for (int i : lc.finish(k)) {
        const auto s = static_cast<size_t>(i);
        CHECK(done_rows[s] == t.rows[s]);
        CHECK(unstarted_children[s] == 0);
        CHECK(!released[s]);
        released[s] = 1;
        --live;
      }
      CHECK(live <= LayerChunks::bound(chunk_sequences, waiting, t.depth));
    }
    for (int c : covered) CHECK(c == 1);
    for (size_t i = 0; i < S; ++i) CHECK(released[i]);
    CHECK(live == 0);
  }
  CHECK(lc.peak_states() <= LayerChunks::bound(chunk_sequences, waiting, t.depth));
  return lc.peak_states();
}

TEST_CASE("a sweep layer's chunks cover every row once and hold few states", "[engine][sweep]") {
  SECTION("a classify window of 48 documents, 4 label paths each, after a template prefix") {
    const Tree t = classify_window(48, 4);
    for (auto [starting, waiting] : {std::pair(8, 2), std::pair(16, 4)}) {  // the default, and more
      const int peak = walk(t, 256, starting, waiting);
      CHECK(peak <= LayerChunks::bound(starting, waiting, 2));
      CHECK(peak < static_cast<int>(t.parent.size()) / 4);  // 241 sequences
    }
  }
  SECTION("tiny chunks, one waiting parent") {
    walk(classify_window(9, 3), 4, 1, 1);
  }
  SECTION("random trees") {
    std::mt19937 rng(7);
    for (int n = 0; n < 300; ++n) {
      const Tree t = random_tree(rng, 1 + n % 60);
      INFO("tree " << n);
      walk(t, 1 + static_cast<int>(rng() % 64), 1 + static_cast<int>(rng() % 8),
           1 + static_cast<int>(rng() % 5));
    }
  }
}

}  // namespace
}  // namespace nj
