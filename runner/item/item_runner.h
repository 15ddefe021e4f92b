// Running one claimed item through the engine, crash-safely.
//
//   resume    the item's state checkpoint is restored if usable (a missing or damaged one
//             is dropped with a warning); the prompt tokens it lacks are fed; the output
//             tokens stored after it are replayed by teacher forcing, and the sampler must
//             draw each of them again (this both checks the replay and advances the RNG
//             exactly as the first run did). Without a usable checkpoint: prompt + stored
//             tokens from position 0, the same way. A replay that diverges after a
//             checkpoint is retried from position 0; diverging from 0 fails the attempt.
//   numerics  when the stored output came from other arithmetic (the store's
//             numerics_version differs from engine/ops/numerics.h, or is unrecorded):
//             the checkpoint is dropped unread (`numerics_changed`), the stored tokens are
//             replayed from position 0, and kept when the sampler draws every one of them
//             again; otherwise the output restarts from the prompt (`numerics_restart`), not
//             a failed attempt. Either way the result is what this binary gives
//             uninterrupted, and the item records this binary's numerics version.
//   generate  sample -> feed -> every commit_tokens / commit_interval_s: store the tokens;
//             every checkpoint_tokens / checkpoint_interval_s: store the tokens, write the
//             state file (durably), then its row.
//   finish    at max_tokens, at the end-of-sequence token, or, for a chat item, at the end of
//             its reply (<|end_of_msg|> or a stop string, jobs/chat/chat_reply.h): the last
//             tokens, the result and state 'done' in one transaction. Items that ask for
//             log-probabilities store each token's with the token, in the same commit.
//   stop      (signal or deadline, checked after every token and between prefill chunks)
//             checkpoint, store the tokens, put the item back in the queue.
//
// So a crash at any instant loses at most the tokens since the last commit, and those are
// regenerated identically: the output equals an uninterrupted run's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/runtime/model.h"
#include "engine/speculative/speculator.h"
#include "engine/tokenizer/tokenizer.h"
#include "runner/durable/lease_keeper.h"
#include "runner/item/pass_group.h"
#include "runner/durable/prefix_states.h"
#include "runner/item/progress.h"
#include "runner/durable/state_checkpoints.h"
#include "runner/item/stop.h"
#include "runner/store/job_store.h"

namespace nj::runner {

struct ItemRunOptions {
  // Output tokens are committed when this many are pending or this long after the last
  // commit, whichever comes first: the most work a crash can cost, regenerated on resume.
  // A commit appends to the WAL without an fsync, so even every token would be cheap for a
  // giant model; the cap matters for small fast models.
  int commit_tokens = 64;
  double commit_interval_s = 1.0;
  // State checkpoints when the sequence has advanced this many tokens (prompt or output)
  // since the last one, or after this long. Each writes the whole state (hundreds of MB for
  // K3 at long contexts) with two fsyncs, so they are spaced in minutes; between them a
  // resume replays the stored tokens, which costs one prefill pass per chunk.
  int64_t checkpoint_tokens = 2048;
  double checkpoint_interval_s = 120;
  // Tokens fed to the engine per call while catching up (prompt and replay).
  int prefill_chunk = kDefaultPrefillChunk;
  // Classify items restore the job's template prefix state instead of prefilling it (the
  // prefix is prefilled once per job). Off only to measure what that saves.
  bool prefix_reuse = true;
  // Classify items are scored by the layer sweep (engine/sweep/sweep.h): the documents of a
  // batch and their label branches go through the model layer by layer, each weight read
  // once for the whole window. Off: token-major passes (prefill chunks, then the label
  // trie's decode steps). `run --schedule` decides it per job (scheduler.h).
  bool sweep = false;
  // A generate item's prompt of at most this many tokens goes through a layer sweep, with the
  // prompts of the items that start beside it, before the passes decode it (run --schedule
  // sweep under a budget; PassGroup::sweep_prompts). 0: prompts are fed in passes.
  int64_t prompt_sweep_rows = 0;
};

enum class ItemOutcome {
  kDone,           // result stored, item done
  kStopped,        // graceful stop: checkpointed, back in the queue
  kLostLease,      // the item was cancelled or reclaimed meanwhile; nothing more written
  kAttemptFailed,  // an engine or input error, recorded as a failed attempt
};

// How one attempt at an item ended. (It was called ItemReport, as is the morning report's
// per-item row in runner/report/report.h, in the same namespace: two classes of one name
// violate the one-definition rule, and at -O0 the linker kept one of their destructors for
// both, which clang's UBSan caught destroying garbage.)
struct AttemptReport {
  ItemOutcome outcome = ItemOutcome::kDone;
  std::optional<ItemState> state_after;  // kAttemptFailed: queued (will retry) or failed
  std::string message;                   // the error or the stop reason
  int64_t tokens_generated = 0;          // new output tokens in this attempt
  SpeculationStats speculation;          // what speculation did in this attempt
};

// What an item run works with. All references must outlive run_item.
struct ItemEnv {
  JobStore& store;
  Model& model;
  const Tokenizer* tokenizer;  // the model's, or null: results then carry no output_text
  StateCheckpoints& checkpoints;
  const ItemRunOptions& options;
  const std::string& owner;
  const StopControl& stop;
  const ItemLease& lease;
  PassGroup& passes;        // the passes this item's tokens share with the rest of its batch
  PrefixGate& prefix_gate;  // classify: one item of the batch at a time loads/prefills a prefix
  ProgressReporter& progress;
  const BatchSpeculation& speculation;
};

// session.feed(ids, rows), adding the item's share of what the engine did to `usage`
// (add_usage). Returns the feed's status.
Status feed_counted(ItemSession& session, std::span<const int32_t> ids, std::vector<float>* rows,
                    bool decode, EngineUsage& usage);
// Adds what the engine did for an item between two readings of its session's usage to
// `usage`: engine time, weight bytes read (its share of each pass, by its rows), tokens
// consumed, the largest batch it shared a pass with, and one decode step when `decode`.
void add_usage(const SequenceUsage& before, const SequenceUsage& after, bool decode,
               EngineUsage& usage);

// Runs the claimed item until it is done, stops, loses its lease or fails an attempt.
// Returns a Status only for store failures (I/O, disk full), after which the run must end
// (the scheduler then releases the item's lease).
Result<AttemptReport> run_item(const ItemEnv& env, const Claim& claim);

}  // namespace nj::runner
