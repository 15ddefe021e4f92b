// Many items, one pass: the runner's batch. Each item this process holds runs its own
// logic (restore, catch up, replay, sample, commit, checkpoint, stop, fail) on a thread of
// its own, exactly as it would alone; whenever it feeds the engine, its tokens wait for the
// next pass, which carries the waiting tokens of every item of the group through one
// Forward::run. So a pass reads each weight once for the whole batch, and every item's
// logits are bit-identical to running it alone (engine/forward/batch.h).
//
// Turns. The items' logic never runs concurrently with another item's or with a pass:
// an item runs while it holds the group's turn (a mutex), and gives it up only inside
// ItemSession::feed while its tokens wait. The scheduler (the `run` loop) takes the turn
// between passes to claim items and to start a pass once every member waits or has
// finished. So the store, the checkpoint files and the logs are used by one item at a time,
// as before; only the engine's passes are shared.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/sweep/sweep.h"
#include "engine/plan/pass_cost.h"
#include "engine/util/status.h"
#include "runner/durable/sweep_boundaries.h"

namespace nj::runner {

class PassGroup;

// Speculative decoding in a batch (engine/speculative/), for `run`'s passes and for the lockstep
// passes of `generate --prompts-file` (runner/run/lockstep.h) alike: at most `draft_tokens`
// drafts per sequence and pass (the batch's plan holds them; 0: its sequences decode
// plainly), each sequence's draft length adapting to its own acceptance against `cost`, the
// plan's byte cost of a pass by its rows. Speculation never changes a token
// (engine/speculative/decode.h): the output, commits and checkpoints are plain decoding's.
//   run       a generate item speculates when its job's `speculative:` is not off and the
//             plan holds drafts; the plan holds them only for jobs whose mode asks
//             (engine/runtime/model_plan.h, plan_model), and a batch's items share their jobs' mode
//             (the claim filter).
//   lockstep  REQUIRES: the Forward takes tentative steps of 1 + draft_tokens rows for every
//             sequence of a pass (ForwardOptions::tentative_rows, tentative_sequences).
struct BatchSpeculation {
  int draft_tokens = 0;
  PassCost cost;
};

// The engine as one item sees it: its own sequence state, fed in passes shared with the
// rest of its group. The interface of engine Session. Not thread-safe: its item's thread.
// The state is allocated when first fed (an empty state is every layer's KDA matrices, 435 MB
// at K3's shapes): an item that only sweeps holds none.
class ItemSession {
 public:
  ItemSession(PassGroup& group, int prefill_chunk);

  // Consumes `ids` in passes of at most prefill_chunk tokens, each shared with the group.
  // all_logits (when given) receives [ids.size()][vocab]. Errors: the pass's (every item
  // of a failed pass gets the error) or Aborted when the run is ending.
  Status feed(std::span<const int32_t> ids, std::vector<float>* all_logits = nullptr);

  // Speculative verification (engine/speculative/decode.h): feeds `ids` as one tentative step of
  // the group's next pass (the token just chosen and its drafts), all_logits receiving
  // [ids.size()][vocab]. The state is unsettled until keep(rows), which must follow before
  // this item gives up its turn again (the group's next pass refuses to run before every
  // tentative step of the last one is settled). Errors as feed.
  // REQUIRES: ids.size() <= the group Forward's ForwardOptions::tentative_rows.
  Status feed_tentative(std::span<const int32_t> ids, std::vector<float>* all_logits);
  Status keep(int rows);

  const std::vector<float>& last_logits() const { return state_.last_logits; }
  int64_t position() const { return state_.position; }
  // The state fed so far (no layers before the first feed, or after set_state(SequenceState{})).
  const SequenceState& state() const { return state_; }
  const ModelConfig& config() const;
  // Gives up the turn until the group's next pass is over, feeding nothing (an item that
  // waits for another item's work, e.g. a shared prefix being prefilled).
  Status skip_pass();
  // Replaces the state (restore from a state checkpoint). REQUIRES: shaped for this model.
  void set_state(SequenceState state) { state_ = std::move(state); }
  // The layer sweep (engine/sweep/sweep.h): runs `part` (this item's sequences; parents index
  // into it; `job_id` and `item_id` its item's) in the group's next sweep, which carries the parts
  // of every member that waits with one (the window). Each sequence's usage, when not given, is
  // this item's. `after`, when not empty, is the job's template prefix: the part's roots without a
  // start state continue it, and the window computes it once for all its items of the job
  // (a root of the window, the parent of their documents; its cost is shared by their rows).
  // Leaves the session's own state as it was. Errors: the sweep's (every member of a
  // failed sweep gets it; Cancelled when the run stopped it at a layer boundary) or Aborted
  // when the run is ending.
  Status sweep(std::span<SweepSequence> part, int64_t job_id, int64_t item_id,
               std::span<const int32_t> after = {});
  // A generate item's prompt (the state's first tokens) through the group's next prompt
  // sweep, before its next pass (PassGroup::sweep_prompts): the state becomes the one after
  // `ids`, as feed(ids) would leave it, bit for bit. Errors as sweep().
  Status sweep_prompt(std::span<const int32_t> ids, int64_t job_id, int64_t item_id);
  // The documents (parts) the last sweep carried: this item's window.
  int last_sweep_window() const { return last_window_; }
  // This item's share of the passes it took part in (by its rows; batch.h).
  const SequenceUsage& usage() const { return usage_; }

 private:
  SequenceState& live_state();  // state_, allocated empty when it has no layers yet

  PassGroup& group_;
  int prefill_chunk_;
  SequenceState state_;
  SequenceUsage usage_;
  int last_window_ = 0;
};

// What the passes of a group did, all sequences together (the totals that the items'
// shares, SequenceUsage, add up to).
struct PassTotals {
  uint64_t passes = 0;    // forward passes and layer sweeps
  uint64_t sweeps = 0;    // of which layer sweeps
  uint64_t rows = 0;      // tokens fed, over all items
  double bytes_read = 0;  // weight bytes read from disk
  double compute_s = 0;   // time in kernels
  double wait_s = 0;      // time blocked on the weight source
  int max_sequences = 0;  // the most items one pass carried
  void add(const PassTotals& o);
};

class PassGroup {
 public:
  struct Member;  // a member's thread and its waiting step (opaque)

  // `forward` and its model must outlive the group. At most `max_rows` rows per pass: a
  // member's step that does not fit waits for the next pass. Sweeps compute the attention
  // half `sweep_chunk_rows` rows at a time.
  PassGroup(Forward& forward, int max_rows, int sweep_chunk_rows = SweepOptions{}.chunk_rows);
  ~PassGroup();  // REQUIRES: no member still running (finish() returned true)

  Forward& forward() { return forward_; }
  const PassTotals& totals() const { return totals_; }

  // --- the scheduler's side: the group holds the turn for it except inside
  // wait_for_members(), so these run while no member does ---
  // Starts `body` on a thread of its own as a member; it runs once the scheduler waits.
  void spawn(std::function<void()> body);
  // Waits until every member waits for a pass or has finished; joins the finished ones and
  // returns how many finished. Then run_pass() if anyone waits.
  int wait_for_members();
  bool anyone_waiting() const;
  // Runs one pass over the waiting members (those that fit in max_rows, in the order they
  // started waiting) and wakes them with its status; also wakes the members that skip it.
  // When members skip, it first only wakes them to look again (and returns): call it again
  // after wait_for_members.
  void run_pass();

 private:
  friend class ItemSession;
  // The member side: queue `step` and wait for the pass that carries it.
  Status take_part(SeqStep step);
  // The member side of a sweep: queue `part` and wait for the sweep that carries it; returns
  // the sweep's status and sets *window to the parts it carried.
  Status take_sweep(std::span<SweepSequence> part, int64_t job_id, int64_t item_id,
                    std::span<const int32_t> after, int* window);

 public:
  // Sweeps save their layer boundaries in the home and resume from them (sweep_boundaries.h).
  // Scheduler's side, before members start.
  void keep_sweep_boundaries(SweepKeeping keeping) { keeping_ = std::move(keeping); }
  // Prompts (ItemSession::sweep_prompt) are swept in windows of at most `rows` rows and
  // kPromptSweepSequences prompts (engine/runtime/model_plan.h), the oldest first, before the
  // next pass. Scheduler's side, before members start.
  void sweep_prompts(int64_t rows) { prompt_sweep_rows_ = rows; }

 private:
  // Runs one sweep over the members waiting with a part, and wakes them.
  void run_sweep(std::vector<Member*> members);

  Forward& forward_;
  int max_rows_;
  int sweep_chunk_rows_;
  std::mutex mu_;
  std::unique_lock<std::mutex> lock_;  // the scheduler's hold on mu_
  std::condition_variable scheduler_cv_;
  std::vector<std::unique_ptr<Member>> members_;
  uint64_t waiting_order_ = 0;
  bool skippers_looked_ = false;  // the skipping members looked again since the last pass
  PassTotals totals_;
  std::optional<SweepKeeping> keeping_;
  int64_t prompt_sweep_rows_ = 0;
};

}  // namespace nj::runner
