// The order of a layer's attention half in a sweep (engine/sweep/sweep.h): chunks of the
// window's rows, each within one generation (roots, their branches, theirs), and each
// sequence's layer state alive only from the chunk where it starts until it is done and its
// last branch has started. A window of many documents then holds a few dozen layer states
// at once, not one per sequence (a K3 KDA layer's state is 4.2 MB).
//
// A chunk runs a generation's ready rows (those whose parents are done) as soon as they fill
// a chunk, or once the generation before is done, or once `waiting_parents` done sequences
// wait for their branches; otherwise the shallowest unfinished generation goes on. At most
// `chunk_sequences` sequences start in one chunk. Rows never depend on their chunk
// (engine/forward/batch.h), so the order changes memory, never bits.
#pragma once

#include <span>
#include <vector>

namespace nj {

class LayerChunks {
 public:
  struct Chunk {
    int generation = 0, row0 = 0, rows = 0;
    std::vector<int> sequences;  // the sequences with rows in it, in row order
    std::vector<int> starting;   // those whose first row is in it: their states are made now
  };

  // Per sequence: its parent (-1: a root; else an earlier sequence) and its rows. The window's
  // rows are laid out generation by generation, each generation's sequences in their parents'
  // order, then their own (so that the branches of the parents done first are ready first).
  LayerChunks(std::span<const int> parent, std::span<const int> rows, int chunk_rows,
              int chunk_sequences, int waiting_parents);

  const std::vector<int>& order() const { return order_; }         // the sequences in row order
  int row0(int i) const { return row0_[static_cast<size_t>(i)]; }  // i's first row

  void begin_layer();  // before each layer's first next()
  // The next chunk of the layer; false when the layer's rows are all done.
  bool next(Chunk& k);
  // Whether `i`, starting in the current chunk, is its parent's last branch to start (so
  // it may take the parent's state instead of copying it).
  bool last_branch(int i) const { return last_branch_[static_cast<size_t>(i)] != 0; }
  // After a chunk ran: the sequences whose states are no longer needed (done, and every
  // branch of theirs started).
  std::vector<int> finish(const Chunk& k);

  int peak_states() const { return peak_; }  // the most states alive at once, any layer so far

  // The most states alive at once for a window of generations up to `max_depth` deep: the
  // waiting parents (fewer than `waiting_parents` before a chunk that does not serve them,
  // plus those one chunk completes), the sequences going on in each generation, and one
  // chunk's starters (layer_chunks_test walks classify windows and random trees against it).
  static int bound(int chunk_sequences, int waiting_parents, int max_depth) {
    return waiting_parents + 2 * (chunk_sequences + max_depth + 1);
  }

 private:
  int ready_rows(int d) const;
  void start(int i);
  void release(int i, std::vector<int>& out);

  std::vector<int> parent_, rows_, row0_, children_, order_;
  std::vector<std::vector<int>> generations_;  // sequences in row order
  std::vector<int> generation_end_;            // first row past each generation
  int chunk_rows_, chunk_sequences_, waiting_parents_;
  // Per layer.
  std::vector<int> cursor_, next_;  // each generation's next row, and the sequence holding it
  std::vector<int> children_left_;
  std::vector<char> done_, last_branch_;
  int waiting_ = 0, live_ = 0, peak_ = 0;
};

}  // namespace nj
