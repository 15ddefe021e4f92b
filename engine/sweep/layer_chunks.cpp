// The order of a sweep layer's attention half (see layer_chunks.h).
#include "engine/sweep/layer_chunks.h"

#include <algorithm>

#include "engine/util/status.h"

namespace nj {

LayerChunks::LayerChunks(std::span<const int> parent, std::span<const int> rows, int chunk_rows,
                         int chunk_sequences, int waiting_parents)
    : parent_(parent.begin(), parent.end()),
      rows_(rows.begin(), rows.end()),
      row0_(parent.size(), 0),
      children_(parent.size(), 0),
      chunk_rows_(std::max(1, chunk_rows)),
      chunk_sequences_(std::max(1, chunk_sequences)),
      waiting_parents_(std::max(1, waiting_parents)) {
  const size_t S = parent_.size();
  std::vector<int> depth(S, 0);
  for (size_t i = 0; i < S; ++i) {
    if (parent_[i] >= 0) {
      depth[i] = depth[static_cast<size_t>(parent_[i])] + 1;
      ++children_[static_cast<size_t>(parent_[i])];
    }
    if (static_cast<size_t>(depth[i]) >= generations_.size())
      generations_.resize(static_cast<size_t>(depth[i]) + 1);
    generations_[static_cast<size_t>(depth[i])].push_back(static_cast<int>(i));
  }
  // Each generation after the one before, in its parents' order (a parent's place is known:
  // it is of an earlier generation), then its own.
  std::vector<int> place(S, 0);
  int row = 0;
  for (auto& g : generations_) {
    std::stable_sort(g.begin(), g.end(), [&](int a, int b) {
      const int pa = parent_[static_cast<size_t>(a)], pb = parent_[static_cast<size_t>(b)];
      return (pa < 0 ? -1 : place[static_cast<size_t>(pa)]) <
             (pb < 0 ? -1 : place[static_cast<size_t>(pb)]);
    });
    for (int i : g) {
      place[static_cast<size_t>(i)] = static_cast<int>(order_.size());
      order_.push_back(i);
      row0_[static_cast<size_t>(i)] = row;
      row += rows_[static_cast<size_t>(i)];
    }
    generation_end_.push_back(row);
  }
}

void LayerChunks::begin_layer() {
  const size_t G = generations_.size();
  cursor_.assign(G, 0);
  next_.assign(G, 0);
  for (size_t d = 0; d < G; ++d) cursor_[d] = row0_[static_cast<size_t>(generations_[d].front())];
  children_left_ = children_;
  done_.assign(parent_.size(), 0);
  last_branch_.assign(parent_.size(), 0);
  waiting_ = live_ = 0;
}

int LayerChunks::ready_rows(int d) const {
  const auto& g = generations_[static_cast<size_t>(d)];
  int end = cursor_[static_cast<size_t>(d)];
  for (size_t j = static_cast<size_t>(next_[static_cast<size_t>(d)]); j < g.size(); ++j) {
    const auto i = static_cast<size_t>(g[j]);
    if (parent_[i] >= 0 && !done_[static_cast<size_t>(parent_[i])]) break;
    end = row0_[i] + rows_[i];
  }
  return end - cursor_[static_cast<size_t>(d)];
}

bool LayerChunks::next(Chunk& k) {
  const int G = static_cast<int>(generations_.size());
  auto unfinished = [&](int d) {
    return cursor_[static_cast<size_t>(d)] < generation_end_[static_cast<size_t>(d)];
  };
  int d = -1;
  for (int g = G - 1; g >= 1 && d < 0; --g) {
    if (!unfinished(g)) continue;
    const int ready = ready_rows(g);
    if (ready > 0 && (ready >= chunk_rows_ || !unfinished(g - 1) || waiting_ >= waiting_parents_))
      d = g;
  }
  for (int g = 0; g < G && d < 0; ++g)
    if (unfinished(g)) d = g;  // every generation before it is done: all its rows are ready
  if (d < 0) return false;

  const auto& gen = generations_[static_cast<size_t>(d)];
  k.generation = d;
  k.row0 = cursor_[static_cast<size_t>(d)];
  k.rows = 0;
  k.sequences.clear();
  k.starting.clear();
  size_t j = static_cast<size_t>(next_[static_cast<size_t>(d)]);
  for (; j < gen.size(); ++j) {
    const auto i = static_cast<size_t>(gen[j]);
    const int lo = k.row0 + k.rows, end = row0_[i] + rows_[i];
    const bool starts = lo == row0_[i];
    if (parent_[i] >= 0 && !done_[static_cast<size_t>(parent_[i])]) break;
    if (starts && static_cast<int>(k.starting.size()) == chunk_sequences_) break;
    const int take = std::min(end - lo, chunk_rows_ - k.rows);
    if (take <= 0) break;
    k.sequences.push_back(gen[j]);
    if (starts) {
      k.starting.push_back(gen[j]);
      start(gen[j]);
    }
    k.rows += take;
    if (lo + take < end) break;  // the chunk is full inside this sequence
  }
  NJ_CHECK_MSG(k.rows > 0, "a sweep layer's chunk has no rows");
  cursor_[static_cast<size_t>(d)] = k.row0 + k.rows;
  next_[static_cast<size_t>(d)] = static_cast<int>(j);  // the sequence the next chunk goes on with
  return true;
}

void LayerChunks::start(int i) {
  ++live_;
  peak_ = std::max(peak_, live_);
  const int p = parent_[static_cast<size_t>(i)];
  if (p >= 0) last_branch_[static_cast<size_t>(i)] = --children_left_[static_cast<size_t>(p)] == 0;
}

void LayerChunks::release(int i, std::vector<int>& out) {
  --live_;
  out.push_back(i);
}

std::vector<int> LayerChunks::finish(const Chunk& k) {
  std::vector<int> out;
  for (int i : k.starting) {  // parents whose last branch started here
    const int p = parent_[static_cast<size_t>(i)];
    if (p >= 0 && last_branch_[static_cast<size_t>(i)]) {
      --waiting_;
      release(p, out);
    }
  }
  for (int i : k.sequences) {
    const auto s = static_cast<size_t>(i);
    if (row0_[s] + rows_[s] > k.row0 + k.rows) continue;  // goes on in the next chunk
    done_[s] = 1;
    if (children_left_[s] == 0)
      release(i, out);
    else
      ++waiting_;
  }
  return out;
}

}  // namespace nj
