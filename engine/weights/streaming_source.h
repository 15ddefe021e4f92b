// A WeightSource that runs a model larger than its memory budget by streaming from disk.
//
// It follows a ResidencyPlan: pinned trunk units are read once at open; the others cycle
// through a ring of buffers in the order the forward pass uses them (layers 0..L-1, the
// head (in parts when it is larger than a layer: ResidencyPlan::head_parts), then layer 0 of
// the next pass), the next unit always being read while the current
// one computes. Routed experts come from an ExpertCache (engine/moe/expert_cache.h): a pool
// of one-expert buffers read when the router announces them, of which each layer keeps up
// to its planned number of idle experts. Reads go
// through a ReadPool: O_DIRECT where the filesystem allows, chunked, urgent first.
// Units of a lossless pack are read block by block and decoded into their ring slot on the
// I/O threads; units the plan holds compressed keep their stored bytes in RAM and are
// "read" from there the same way (no disk, decode only).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/io/file.h"
#include "engine/io/read_pool.h"
#include "engine/io/timeline.h"
#include "engine/model/tensor_index.h"
#include "engine/weights/expert_cache.h"
#include "engine/weights/residency_plan.h"
#include "engine/weights/weight_source.h"

namespace nj {

// The timeline's unit for routed experts' reads (trunk units are 0..layers).
inline constexpr int kTracedExpert = -2;

using FileOpener =
    std::function<Result<std::unique_ptr<RandomAccessFile>>(const std::string& path)>;

// Opens with O_DIRECT where the filesystem allows it and says so (once) where it does not.
Result<std::unique_ptr<RandomAccessFile>> open_for_streaming(const std::string& path);

struct StreamingOptions {
  int io_threads = kDefaultIoThreads;  // reads in flight: NVMe needs several to reach its rate
  size_t chunk_bytes = 4u << 20;       // one read; large enough for full-speed transfers
  FileOpener open_file = open_for_streaming;  // tests inject faults here
  std::shared_ptr<const ExpertCachePolicy> policy = std::make_shared<LruExpertPolicy>();
  // Optional: the trunk units' pipeline events go here (diagnosis; stream_bench --timeline).
  std::shared_ptr<Timeline> timeline;
};

class StreamingSource final : public WeightSource {
 public:
  // Opens the files, allocates the plan's buffers and reads the pinned units. `index`,
  // `layout` and `plan` must outlive the source.
  static Result<std::unique_ptr<StreamingSource>> open(const TensorIndex& index,
                                                       const ModelLayout& layout,
                                                       const ResidencyPlan& plan,
                                                       StreamingOptions options = {});
  ~StreamingSource() override;

  const ModelLayout& layout() const override { return layout_; }
  Result<std::shared_ptr<const LayerWeights>> layer(int l) override;
  Result<std::shared_ptr<const ExpertWeights>> expert(int l, int e) override;
  // Half the expert pool (at least one): the other half keeps reading ahead.
  int expert_hold_limit() const override;
  bool expert_ready(int l, int e) const override;
  int head_parts() const override { return head_parts_; }
  Result<std::shared_ptr<const HeadWeights>> head(int part) override;
  Status embed(std::span<const int32_t> ids, float* out) override;
  void will_need_layer(int l) override;
  void will_need_experts(int l, std::span<const int> experts) override;
  WeightStats stats() const override;

 private:
  struct TrunkSlot {
    AlignedBuffer buf;
    int unit = -1;  // layer, or layers() + k for part k of the head; -1 empty
    std::shared_ptr<ReadTicket> ticket;
    std::shared_ptr<const LayerWeights> layer_view;
    std::shared_ptr<const HeadWeights> head_view;
    int refs = 0;
    // A lossless unit read ahead into staging while this slot is still in use (refs > 0):
    // its blocks decode here once the slot is let go (DecodeGate). -1: none.
    int next_unit = -1;
    std::shared_ptr<ReadTicket> next_ticket;
    std::shared_ptr<DecodeGate> next_gate;
  };
  StreamingSource(const TensorIndex& index, const ModelLayout& layout, const ResidencyPlan& plan,
                  StreamingOptions options);
  // The plan's trunk units: the layers and the head.
  int units() const { return static_cast<int>(plan_.pinned.size()); }
  // What the ring cycles through: the layers and the head's parts. Ring unit u is the plan's
  // unit plan_unit(u).
  int ring_units() const { return layout_.config().layers + head_parts_; }
  int plan_unit(int u) const { return std::min(u, layout_.config().layers); }
  bool pinned(int u) const { return plan_.pinned[static_cast<size_t>(plan_unit(u))]; }
  const UnitLayout& unit_layout(int u) const;
  // `traced_unit` != -1: its reads go on the timeline (if any) under that unit.
  // With a `gate` (a lossless unit from disk only), its blocks decode into the gate's
  // destination instead of `buffer` (null).
  std::shared_ptr<ReadTicket> read_unit_async(const UnitLayout& u, uint8_t* buffer, ReadPriority p,
                                              int traced_unit = -1,
                                              std::shared_ptr<DecodeGate> gate = nullptr);
  // read_unit_async for trunk unit `unit`, traced on the timeline if there is one.
  std::shared_ptr<ReadTicket> read_trunk_async(int unit, uint8_t* buffer, ReadPriority p);
  void trace(int unit, TimelineKind kind) const;
  // Checks (once per process) and decodes block k of a lossless trunk unit. I/O threads.
  Status consume_block(const UnitLayout& u, size_t k, std::span<const uint8_t> stored,
                       uint8_t* buffer);
  // Counts a trunk unit's bytes as read (nothing for one held in RAM). REQUIRES: mu_ held.
  void count_unit_read_locked(int u);
  // Acquires trunk unit u (waits for its bytes); returns the slot index, or -1 if pinned.
  Result<int> acquire_unit(int u);
  void release_unit(int slot);
  // One use of the slot less; lands its read-ahead unit there when it was the last.
  // REQUIRES: mu_ held.
  void unref_locked(size_t slot);
  void prefetch_after_locked(int u);
  // Whether trunk unit u can be read ahead into staging (a lossless unit read from disk).
  bool can_read_ahead(int u) const;
  // Whether a read or decode may still write the slot's buffer (its ticket is not done): a
  // slot is given another unit only once it is not, or two units' bytes would race in it.
  // REQUIRES: mu_ held.
  static bool writing_locked(const TrunkSlot& slot);
  // Moves slot `from`'s read-ahead unit into slot `to` (refs 0, not writing) and lets it
  // decode there. REQUIRES: mu_ held.
  void land_read_ahead_locked(size_t from, size_t to);
  int next_streamed(int u) const;
  Status verify_locked(int u, const uint8_t* bytes);
  // Waits for a read the caller needs now (moving it to the urgent queue); counts the wait.
  // REQUIRES: mu_ not held.
  Status await(const std::shared_ptr<ReadTicket>& ticket);

  const TensorIndex& index_;
  const ModelLayout& layout_;
  const ResidencyPlan& plan_;
  StreamingOptions options_;
  std::vector<std::unique_ptr<RandomAccessFile>> files_;
  std::unique_ptr<ReadPool> pool_;

  mutable std::mutex mu_;
  std::vector<AlignedBuffer> pinned_buf_;  // [units]; empty when streamed
  std::vector<std::shared_ptr<const LayerWeights>> pinned_layer_;
  std::shared_ptr<const HeadWeights> pinned_head_;
  int head_parts_ = 1;
  std::vector<HeadPart> head_part_layouts_;  // with head_parts_ > 1
  std::vector<TrunkSlot> ring_;
  std::unique_ptr<ExpertCache> experts_;
  std::vector<bool> verified_;           // [units]: packed unit checked in this process
  std::vector<AlignedBuffer> held_buf_;  // [units]: stored run of a unit held compressed
  std::mutex block_mu_;
  std::vector<std::vector<bool>> block_verified_;  // [units][block]: checked in this process
  AlignedBuffer embed_buf_;
  WeightStats stats_;
};

}  // namespace nj
