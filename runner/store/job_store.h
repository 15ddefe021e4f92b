// The job store: jobs, items, their output tokens, state checkpoints, results and an audit
// log in one SQLite database under the home directory (<home>/nightjar.db).
//
// Schema (schemas/NNN_*.sql, applied in order; the full column list is in 001_initial.sql):
//
//   schema_version(version)                         one row: the last applied migration
//   jobs(id, name, kind, model_dir, memory_bytes, max_attempts, priority, spec_path,
//        settings, created_at, shard, submission, outputs_state, outputs_error, outputs_at)
//   items(id, job_id, seq, custom_id, input_text, prompt_ids, params, state, attempts,
//         claims, lease_owner, lease_expires, tokens_done, prefill_s, decode_s,
//         last_error, started_at, finished_at,
//         io_wait_s, compute_s, bytes_read, tokens_fed, decode_steps,
//         retry_at, numerics_version, max_batch, spec_*, batch_deaths)
//                                                               UNIQUE(job_id, custom_id)
//   tokens(item_id, pos, token_id, logprobs)        the append-only output log
//   checkpoints(id, item_id, position, tokens_done, path, bytes, created_at)
//   results(item_id, finish_reason, prompt_tokens, output_tokens, output_ids,
//           output_text, prefill_s, decode_s, created_at, details)   at most one per item
//   events(id, at, job_id, item_id, kind, detail)
//
// Item states:  queued --claim--> running --finish--> done
//                                 running --release (graceful stop)--> queued
//                                 running --fail_attempt / stale lease--> queued | failed
//                                 (a stale lease of a batch: queued, not charged; see claim_next)
//                                 running --release_lease (run failed)--> queued
//               queued|running --cancel--> cancelled;  failed|cancelled --retry--> queued
//
// Durability: WAL; transitions, checkpoint rows and results commit with synchronous=FULL;
// token appends with NORMAL (a process crash never loses them; a power cut may lose the
// appends after the last FULL commit, which a resume regenerates identically). Writers take
// the lock with BEGIN IMMEDIATE, so two `run` processes serialize their claims.
//
// Thread-safety: a JobStore is one connection; use it from one thread at a time (open a
// second JobStore for another thread). Many processes may open the same file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "engine/session/logprobs.h"
#include "engine/util/status.h"
#include "runner/store/sqlite.h"

namespace nj::runner {

enum class ItemState { kQueued, kRunning, kDone, kFailed, kCancelled };
const char* item_state_name(ItemState s);
Result<ItemState> parse_item_state(const std::string& name);

struct NewItem {
  std::string custom_id;
  std::optional<std::string> input_text;  // the prompt as text, when given as text
  std::vector<int32_t> prompt_ids;
  std::string params_json;  // per-item settings (jobs::generate_params_to_json)
};

struct NewJob {
  std::string name;
  std::string kind;
  std::string model_dir;
  std::optional<uint64_t> memory_bytes;
  int max_attempts = 3;
  int priority = 0;
  std::string spec_path;
  std::string settings_json;
  std::vector<NewItem> items;
};

// What submit_shard did: queued the job, or found it already queued by an earlier call.
struct ShardSubmit {
  int64_t job_id = 0;
  bool created = false;
};

struct JobRow {
  int64_t id = 0;
  std::string name;
  std::string kind;
  std::string model_dir;
  std::optional<uint64_t> memory_bytes;
  int max_attempts = 0;
  int priority = 0;
  std::string spec_path;
  std::string settings_json;
  double created_at = 0;
  // The declared outputs (005_output_state.sql): "written", "failed", or nullopt (none
  // declared, or not written yet); the last failure's message; when.
  std::optional<std::string> outputs_state;
  std::optional<std::string> outputs_error;
  std::optional<double> outputs_at;
};

// What the engine did for an item (002_engine_usage.sql): accumulated over all attempts in
// the store, and handed over as a delta with every progress write.
struct EngineUsage {
  double io_wait_s = 0;      // blocked waiting for weights from disk
  double compute_s = 0;      // in kernels
  uint64_t bytes_read = 0;   // weight bytes read from disk
  int64_t tokens_fed = 0;    // tokens consumed (prompt, replays, decode inputs)
  int64_t decode_steps = 0;  // single-token passes after the prompt
  int64_t max_batch = 0;     // the most sequences that shared a pass with it (008_max_batch.sql)
  // Speculative decoding (009_speculation.sql): decode passes that fed the token just chosen
  // with drafts verified in the same pass, the drafted tokens fed, those accepted.
  int64_t spec_passes = 0, spec_drafted = 0, spec_accepted = 0;
  EngineUsage& operator+=(const EngineUsage& o) {
    io_wait_s += o.io_wait_s;
    compute_s += o.compute_s;
    bytes_read += o.bytes_read;
    tokens_fed += o.tokens_fed;
    decode_steps += o.decode_steps;
    max_batch = std::max(max_batch, o.max_batch);
    spec_passes += o.spec_passes;
    spec_drafted += o.spec_drafted;
    spec_accepted += o.spec_accepted;
    return *this;
  }
};

struct ItemRow {
  int64_t id = 0;
  int64_t job_id = 0;
  int64_t seq = 0;
  std::string custom_id;
  std::optional<std::string> input_text;
  std::vector<int32_t> prompt_ids;
  std::string params_json;
  ItemState state = ItemState::kQueued;
  int attempts = 0;
  int claims = 0;
  std::optional<std::string> lease_owner;
  std::optional<double> lease_expires;
  int64_t tokens_done = 0;
  int64_t max_tokens = 0;  // from params (0 when absent)
  double prefill_s = 0;
  double decode_s = 0;
  EngineUsage usage;
  std::optional<std::string> last_error;
  std::optional<double> started_at;
  std::optional<double> finished_at;
  std::optional<double> retry_at;       // queued: not claimed before (006_retry_at.sql)
  std::optional<int> numerics_version;  // of its stored output (007_numerics_version.sql)
  // Process deaths it was not charged for, in a batch with other items (010_batch_deaths.sql):
  // at kSoloAfterBatchDeaths it runs alone (reclaim rule at claim_next).
  int batch_deaths = 0;
};

struct JobSummary {
  JobRow job;
  int64_t queued = 0, running = 0, done = 0, failed = 0, cancelled = 0;
  int64_t tokens_done = 0;  // output tokens stored, all items
  // max_tokens of queued, running and done items plus the tokens failed or cancelled items
  // produced: tokens_planned - tokens_done is the generation work left.
  int64_t tokens_planned = 0;
  double active_s = 0;  // engine time, all items and attempts
  int64_t items() const { return queued + running + done + failed + cancelled; }
};

struct CheckpointRow {
  int64_t id = 0;
  int64_t position = 0;     // tokens the saved state consumed (prompt + output)
  int64_t tokens_done = 0;  // output tokens among them
  std::string path;         // relative to the home directory
  uint64_t bytes = 0;
};

struct ResultRow {
  std::string finish_reason;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  std::vector<int32_t> output_ids;
  std::optional<std::string> output_text;
  double prefill_s = 0;
  double decode_s = 0;
  double created_at = 0;
  std::optional<std::string> details_json;  // kind-specific fields (classification), JSON
};

struct EventRow {
  int64_t id = 0;
  double at = 0;
  std::optional<int64_t> job_id;
  std::optional<int64_t> item_id;
  std::string kind;
  std::string detail_json;
};

// An item whose batches died this many times runs alone from then on (claim_next).
inline constexpr int kSoloAfterBatchDeaths = 2;

// What a run that already holds items may claim next.
struct ClaimFilter {
  // Items this process holds now (their leases are not stale). When it holds any, items
  // that run alone (batch_deaths >= kSoloAfterBatchDeaths) are not claimed.
  std::set<int64_t> held;
  // Only items whose job runs this model directory with this budget (0: resident), so that
  // they can share the passes of the items held.
  struct Model {
    std::string dir;
    uint64_t memory_bytes = 0;
    int64_t max_context = 0;  // the positions its plan holds: jobs recorded as needing more wait
    std::string kind;         // the states a sequence keeps differ by kind (classify: 2)
    // The jobs' `speculative:` as stored (job_kind.h, stored_speculative_text): the plan
    // holds drafts or not by it.
    std::string speculative = "auto";
  };
  std::optional<Model> model;
  // Only items whose prompt has at most this many tokens (a layer sweep's window fills by
  // its documents' rows, engine/plan/sweep_plan.h SweepWindowFill).
  std::optional<int64_t> max_prompt_tokens;
  // Only items of this job: a layer sweep's window holds one job's documents, because its
  // room counts each document with that job's label branches and template prefix.
  std::optional<int64_t> job_id;
};

// What `run` receives with a claimed item: everything it needs to resume.
struct Claim {
  JobRow job;
  ItemRow item;
  std::vector<int32_t> tokens;             // the stored output, positions 0..n-1
  std::vector<CheckpointRow> checkpoints;  // newest (largest position) first
  // Whether it runs alone: nothing joins its batch (its batches died too often).
  bool alone() const { return item.batch_deaths >= kSoloAfterBatchDeaths; }
};

// A stale lease that claim_next took back (its process died, or its lease expired).
struct Reclaimed {
  int64_t item_id = 0;
  int64_t job_id = 0;
  std::string custom_id;
  ItemState state = ItemState::kQueued;  // kFailed: charged its last attempt
  bool charged = false;                  // an attempt was charged: it was alone in its process
  std::string error;                     // as recorded in last_error
};

// Progress the runner hands over with every write: output tokens not yet stored (output
// positions first_pos, first_pos+1, ...), their log-probabilities when the item asked for
// them (empty, or one per token), and engine time since the last write.
struct Progress {
  int64_t first_pos = 0;
  std::span<const int32_t> tokens;
  double prefill_s = 0;
  double decode_s = 0;
  EngineUsage usage;
  std::span<const TokenLogprobs> logprobs;  // empty, or one per token
};

struct NewCheckpoint {
  int64_t position = 0;
  int64_t tokens_done = 0;
  std::string path;  // relative to the home directory
  uint64_t bytes = 0;
};

struct NewResult {
  std::string finish_reason;
  int64_t prompt_tokens = 0;
  std::optional<std::string> output_text;
  std::optional<std::string> details_json;  // kind-specific fields (classification), JSON
  std::optional<int> numerics_version;      // recorded with the item when given
};

struct StoreOptions {
  // How long a statement waits for another process's write lock before failing. Writers
  // hold it for milliseconds; 30 s rides out a slow disk without hanging a stuck night.
  int busy_timeout_ms = 30000;
  // PRAGMA quick_check on open: finds a damaged file before work is written into it. Cost is
  // linear in the file size (a second per few hundred MB); heartbeat connections skip it.
  bool quick_check = true;
  // The journal of a store this open creates (an existing store keeps its own; sqlite.h
  // Journal). WAL unless the store lives on a filesystem shared between hosts (a Slurm
  // task's home), where only a rollback journal is safe.
  sql::Journal journal = sql::Journal::kWal;
  // Wall-clock seconds since the epoch; leases compare clocks of several processes.
  // Tests substitute their own.
  std::function<double()> clock;
};

// Whether the process named by a lease owner string still runs (see runner/durable/lease_owner.h).
using OwnerAliveFn = std::function<bool(const std::string& owner)>;

class JobStore {
 public:
  // Opens the store at `path`, creating it (and applying every migration) when `create` is
  // set. Fails with NotFound when absent and !create; Corruption when quick_check fails;
  // FailedPrecondition when the file was written by a newer nightjar.
  static Result<std::unique_ptr<JobStore>> open(const std::string& path, bool create,
                                                StoreOptions options = {});
  ~JobStore();

  int schema_version() const { return schema_version_; }
  const std::string& path() const;
  double now() const { return clock_(); }

  // ---- submit, queries, control (job_store.cpp) ----------------------------------------

  // Inserts the job and all its items in one transaction: all or nothing. Returns the job id.
  // FailedPrecondition naming the custom_id on a duplicate id.
  Result<int64_t> submit(const NewJob& job);

  // Submits `job` as shard `shard` ("I/N", jobs/shard.h) of an array, at most once
  // (shard_submit.cpp): when the store already holds a shard of a job of this name with the
  // same digest (job_digest), it writes nothing and returns that job. FailedPrecondition
  // naming both when it holds another shard or another digest under the name (a changed
  // spec, or another --tasks count). Atomic like submit.
  Result<ShardSubmit> submit_shard(const NewJob& job, const std::string& shard);

  Result<std::vector<JobSummary>> list_jobs();
  Result<JobSummary> job_summary(int64_t job_id);
  // A job by numeric id or by name (the name must be unique). NotFound / InvalidArgument.
  Result<JobRow> find_job(const std::string& id_or_name);
  // Items in spec order.
  Result<std::vector<ItemRow>> items(int64_t job_id);
  // The most prompt tokens one of the job's items has (0 for a job without items).
  Result<int64_t> longest_prompt(int64_t job_id);
  Result<std::vector<int32_t>> tokens(int64_t item_id);
  // The log-probabilities stored with the item's tokens, in output order. Corruption naming
  // the position when a token has none or an unreadable one.
  Result<std::vector<TokenLogprobs>> token_logprobs(int64_t item_id);
  Result<std::optional<ResultRow>> result(int64_t item_id);
  Result<std::vector<CheckpointRow>> checkpoints(int64_t item_id);
  // Events of a job (item_id unset) or of one item, oldest first.
  Result<std::vector<EventRow>> events(std::optional<int64_t> job_id,
                                       std::optional<int64_t> item_id);

  // Queued and running items -> cancelled (a running `run` notices at its next write).
  // Returns the number of items cancelled.
  Result<int64_t> cancel_job(int64_t job_id);
  // Failed and cancelled items -> queued with attempts reset; stored tokens are kept, so the
  // items resume. Returns the number of items requeued.
  Result<int64_t> retry_job(int64_t job_id);

  // One item a control command moved: its custom_id and the state it left.
  struct MovedItem {
    std::string custom_id;
    std::string from;
  };
  // cancel_job / retry_job for the items named by `custom_ids` (in that order; all of the
  // job's items in its state when empty). A named id that is not the job's fails with
  // NotFound, a named item in a state the action does not apply to (cancel: queued or
  // running; retry: failed or cancelled) with FailedPrecondition naming it and its state;
  // either way nothing changes (one transaction), and the message names the items, not the
  // job (the caller does). Each moved item gets an event.
  Result<std::vector<MovedItem>> cancel_items(int64_t job_id,
                                              const std::vector<std::string>& custom_ids);
  Result<std::vector<MovedItem>> retry_items(int64_t job_id,
                                             const std::vector<std::string>& custom_ids);

  Status add_event(std::optional<int64_t> job_id, std::optional<int64_t> item_id,
                   const std::string& kind, const std::string& detail_json);

  // Records how writing the job's declared outputs went: `written` (the paths), or `error`
  // (the job then shows outputs_state "failed" until a later write succeeds). With an
  // outputs_written / outputs_failed event, in one transaction.
  Status record_outputs(int64_t job_id, const std::vector<std::string>& written,
                        const std::optional<std::string>& error);

  // The earliest time a queued item waits for (retry_at in the future), if any.
  Result<std::optional<double>> next_retry_at();

  // ---- the work queue (queue.cpp) -----------------------------------------------------
  // Every call below that names an item writes only while `owner` holds its lease and the
  // item is running; it returns false (writing nothing) when the lease is gone (the item was
  // cancelled or its lease reclaimed).

  // In one BEGIN IMMEDIATE transaction: reclaims stale leases (expired, or whose owner
  // `alive` says is dead, or held in `owner`'s name but not in `filter.held`); then takes
  // the next queued item whose retry_at has passed (job priority, then job id, then spec
  // order) and whose job runs `filter.model` when given, with a lease of `lease_s` seconds.
  // nullopt when nothing (matching) is claimable.
  // The reclaim charges what a death can be blamed on: an item that was its process's only
  // stale lease gets attempts + 1 (failing at max_attempts); items of a batch (several stale
  // leases of one owner) are queued uncharged with batch_deaths + 1, and run alone once it
  // reaches kSoloAfterBatchDeaths. Every item reclaimed is appended to `reclaimed` when
  // given (the caller counts those failed for good and finishes their jobs).
  Result<std::optional<Claim>> claim_next(const std::string& owner, double lease_s,
                                          const OwnerAliveFn& alive,
                                          const ClaimFilter& filter = {},
                                          std::vector<Reclaimed>* reclaimed = nullptr);

  // Extends the leases of `items` to now + lease_s, in one transaction. Returns the items
  // whose lease is no longer ours (cancelled, reclaimed, finished).
  Result<std::vector<int64_t>> heartbeat(const std::vector<int64_t>& items,
                                         const std::string& owner, double lease_s);

  // Stores output tokens (grouped commit, synchronous=NORMAL).
  Result<bool> append_tokens(int64_t item_id, const std::string& owner, const Progress& progress);

  // Stores pending tokens and records `checkpoint` (its file is already durable) as the
  // item's checkpoint, replacing the rows of earlier ones (an item has one checkpoint file,
  // rewritten by each save).
  Result<bool> add_checkpoint(int64_t item_id, const std::string& owner, const Progress& progress,
                              const NewCheckpoint& checkpoint);

  // Deletes the item's checkpoint rows (its file was found unusable).
  Result<bool> drop_checkpoints(int64_t item_id, const std::string& owner);

  // Stores the last tokens, the result and state 'done' in ONE transaction, clears the error
  // of an earlier attempt (the events keep it), and deletes the item's checkpoint rows (the
  // caller then removes the files).
  Result<bool> finish_item(int64_t item_id, const std::string& owner, const Progress& progress,
                           const NewResult& result);

  // Graceful stop: stores pending tokens and puts the item back in the queue (attempts unchanged).
  Result<bool> release_item(int64_t item_id, const std::string& owner, const Progress& progress,
                            const std::string& detail_json);

  // A failed attempt: stores pending tokens, attempts + 1, last_error = error; the item goes
  // back to the queue, or fails when attempts reach max_attempts or the error is `final`
  // (deterministic: another attempt would repeat it). Back in the queue, it is not claimed
  // for `retry_after_s` seconds when given (backoff). Returns the new state.
  Result<std::optional<ItemState>> fail_attempt(int64_t item_id, const std::string& owner,
                                                const Progress& progress, const std::string& error,
                                                bool final = false,
                                                std::optional<double> retry_after_s = {});

  // The run is ending on a failure of its own (a full disk, a store error), not the item's:
  // the item goes back to the queue with its attempts unchanged and a `released` event
  // naming `reason`. Pending (uncommitted) tokens are not stored; they are regenerated.
  Result<bool> release_lease(int64_t item_id, const std::string& owner, const std::string& reason);

  // Records that the item's stored output (and what is stored from now on) is the
  // arithmetic of engine numerics version `version`.
  Result<bool> set_numerics_version(int64_t item_id, const std::string& owner, int version);

  // The item's stored output came from other arithmetic and this binary does not reproduce
  // it: deletes its tokens and checkpoint rows (tokens_done = 0), records `version`, and adds
  // a `numerics_restart` event with `detail_json`, in one transaction.
  Result<bool> restart_output(int64_t item_id, const std::string& owner, int version,
                              const std::string& detail_json);

 private:
  JobStore(std::unique_ptr<sql::Db> db, StoreOptions options);
  Status migrate(bool create);
  // cancel_items / retry_items: `from` the states the action applies to, `set` the UPDATE's
  // assignments (bound: ?1 = now), `kind` the event.
  Result<std::vector<MovedItem>> move_items(int64_t job_id,
                                            const std::vector<std::string>& custom_ids,
                                            const std::vector<std::string>& from, const char* set,
                                            const char* kind, const char* allowed);
  // The INSERTs of submit, inside the caller's transaction.
  Result<int64_t> insert_job(const NewJob& job, double now, const std::string* shard,
                             const std::string* digest);
  Result<bool> write_progress(int64_t item_id, const std::string& owner, const Progress& progress,
                              double lease_s);

  std::unique_ptr<sql::Db> db_;
  std::function<double()> clock_;
  int schema_version_ = 0;
  double lease_s_ = 0;  // the lease length of the last claim (extended with each write)
};

// A digest of what `job` queues (migration 004: everything but spec_path), 16 hex digits.
std::string job_digest(const NewJob& job);

// Token ids <-> the int32 little-endian blobs stored in items.prompt_ids and results.output_ids.
std::vector<uint8_t> ids_to_blob(std::span<const int32_t> ids);
std::vector<int32_t> blob_to_ids(std::span<const uint8_t> blob);

// TokenLogprobs <-> the blob in tokens.logprobs (format in 003_token_logprobs.sql).
// blob_to_logprobs: nullopt when the size does not fit the format.
std::vector<uint8_t> logprobs_to_blob(const TokenLogprobs& lp);
std::optional<TokenLogprobs> blob_to_logprobs(std::span<const uint8_t> blob);

}  // namespace nj::runner
