// The job store: opening and migrating, submitting, queries, cancel and retry.
#include "runner/store/job_store.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "runner/store/migrations.h"
#include "runner/store/sqlite.h"
#include "runner/store/store_internal.h"

namespace nj::runner {

using sql::Stmt;
using sql::Sync;
using sql::Transaction;

namespace store_internal {

const char* const kJobColumns =
    "j.id, j.name, j.kind, j.model_dir, j.memory_bytes, j.max_attempts, j.priority, j.spec_path, "
    "j.settings, j.created_at, j.outputs_state, j.outputs_error, j.outputs_at";

const char* const kItemColumns =
    "i.id, i.job_id, i.seq, i.custom_id, i.input_text, i.prompt_ids, i.params, i.state, "
    "i.attempts, "
    "i.claims, i.lease_owner, i.lease_expires, i.tokens_done, i.prefill_s, i.decode_s, "
    "i.last_error, "
    "i.started_at, i.finished_at, json_extract(i.params, '$.max_tokens'), "
    "i.io_wait_s, i.compute_s, i.bytes_read, i.tokens_fed, i.decode_steps, i.retry_at, "
    "i.numerics_version, i.max_batch, i.spec_passes, i.spec_drafted, i.spec_accepted, "
    "i.batch_deaths";

JobRow read_job(const Stmt& s, int c) {
  JobRow j;
  j.id = s.int64(c + 0);
  j.name = s.text(c + 1);
  j.kind = s.text(c + 2);
  j.model_dir = s.text(c + 3);
  if (auto m = s.opt_int64(c + 4)) j.memory_bytes = static_cast<uint64_t>(*m);
  j.max_attempts = static_cast<int>(s.int64(c + 5));
  j.priority = static_cast<int>(s.int64(c + 6));
  j.spec_path = s.text(c + 7);
  j.settings_json = s.text(c + 8);
  j.created_at = s.real(c + 9);
  j.outputs_state = s.opt_text(c + 10);
  j.outputs_error = s.opt_text(c + 11);
  j.outputs_at = s.opt_real(c + 12);
  return j;
}

ItemRow read_item(const Stmt& s, int c) {
  ItemRow i;
  i.id = s.int64(c + 0);
  i.job_id = s.int64(c + 1);
  i.seq = s.int64(c + 2);
  i.custom_id = s.text(c + 3);
  i.input_text = s.opt_text(c + 4);
  i.prompt_ids = blob_to_ids(s.blob(c + 5));
  i.params_json = s.text(c + 6);
  auto state = parse_item_state(s.text(c + 7));
  i.state = state.ok() ? *state : ItemState::kFailed;  // the CHECK constraint rules out others
  i.attempts = static_cast<int>(s.int64(c + 8));
  i.claims = static_cast<int>(s.int64(c + 9));
  i.lease_owner = s.opt_text(c + 10);
  i.lease_expires = s.opt_real(c + 11);
  i.tokens_done = s.int64(c + 12);
  i.prefill_s = s.real(c + 13);
  i.decode_s = s.real(c + 14);
  i.last_error = s.opt_text(c + 15);
  i.started_at = s.opt_real(c + 16);
  i.finished_at = s.opt_real(c + 17);
  i.max_tokens = s.int64(c + 18);
  i.usage.io_wait_s = s.real(c + 19);
  i.usage.compute_s = s.real(c + 20);
  i.usage.bytes_read = static_cast<uint64_t>(s.int64(c + 21));
  i.usage.tokens_fed = s.int64(c + 22);
  i.usage.decode_steps = s.int64(c + 23);
  i.retry_at = s.opt_real(c + 24);
  if (auto v = s.opt_int64(c + 25)) i.numerics_version = static_cast<int>(*v);
  i.usage.max_batch = s.int64(c + 26);
  i.usage.spec_passes = s.int64(c + 27);
  i.usage.spec_drafted = s.int64(c + 28);
  i.usage.spec_accepted = s.int64(c + 29);
  i.batch_deaths = static_cast<int>(s.int64(c + 30));
  return i;
}

Status insert_event(sql::Db& db, double at, std::optional<int64_t> job_id,
                    std::optional<int64_t> item_id, const std::string& kind,
                    const std::string& detail_json) {
  NJ_ASSIGN_OR_RETURN(
      Stmt s,
      db.prepare("INSERT INTO events (at, job_id, item_id, kind, detail) VALUES (?,?,?,?,?)"));
  s.bind(1, at).bind(2, job_id).bind(3, item_id).bind(4, kind);
  if (detail_json.empty())
    s.bind_null(5);
  else
    s.bind(5, detail_json);
  return s.run();
}

Result<std::vector<int32_t>> read_tokens(sql::Db& db, int64_t item_id) {
  NJ_ASSIGN_OR_RETURN(
      Stmt s, db.prepare("SELECT pos, token_id FROM tokens WHERE item_id = ? ORDER BY pos"));
  s.bind(1, item_id);
  std::vector<int32_t> out;
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    if (s.int64(0) != static_cast<int64_t>(out.size()))
      return corruption(db.path() + ": item " + std::to_string(item_id) +
                        " has a gap in its tokens at position " + std::to_string(out.size()));
    out.push_back(static_cast<int32_t>(s.int64(1)));
  }
  return out;
}

Result<std::vector<CheckpointRow>> read_checkpoints(sql::Db& db, int64_t item_id) {
  NJ_ASSIGN_OR_RETURN(Stmt s,
                      db.prepare("SELECT id, position, tokens_done, path, bytes FROM checkpoints "
                                 "WHERE item_id = ? ORDER BY position DESC"));
  s.bind(1, item_id);
  std::vector<CheckpointRow> out;
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back(
        {s.int64(0), s.int64(1), s.int64(2), s.text(3), static_cast<uint64_t>(s.int64(4))});
  }
  return out;
}

}  // namespace store_internal

using namespace store_internal;

const char* item_state_name(ItemState s) {
  switch (s) {
    case ItemState::kQueued:
      return "queued";
    case ItemState::kRunning:
      return "running";
    case ItemState::kDone:
      return "done";
    case ItemState::kFailed:
      return "failed";
    case ItemState::kCancelled:
      return "cancelled";
  }
  return "?";
}

Result<ItemState> parse_item_state(const std::string& name) {
  for (ItemState s : {ItemState::kQueued, ItemState::kRunning, ItemState::kDone, ItemState::kFailed,
                      ItemState::kCancelled})
    if (name == item_state_name(s)) return s;
  return invalid_argument("unknown item state '" + name + "'");
}

std::vector<uint8_t> ids_to_blob(std::span<const int32_t> ids) {
  std::vector<uint8_t> out(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t v = static_cast<uint32_t>(ids[i]);
    for (int b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<uint8_t>(v >> (8 * b));
  }
  return out;
}

std::vector<int32_t> blob_to_ids(std::span<const uint8_t> blob) {
  std::vector<int32_t> out(blob.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(blob[i * 4 + b]) << (8 * b);
    out[i] = static_cast<int32_t>(v);
  }
  return out;
}

namespace {

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(v >> (8 * b)));
}
uint32_t get_u32(std::span<const uint8_t> in, size_t at) {
  uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= static_cast<uint32_t>(in[at + b]) << (8 * b);
  return v;
}

}  // namespace

std::vector<uint8_t> logprobs_to_blob(const TokenLogprobs& lp) {
  std::vector<uint8_t> out;
  out.reserve(4 + 8 * lp.top.size());
  put_u32(out, std::bit_cast<uint32_t>(lp.logprob));
  for (const auto& [id, logprob] : lp.top) {
    put_u32(out, static_cast<uint32_t>(id));
    put_u32(out, std::bit_cast<uint32_t>(logprob));
  }
  return out;
}

std::optional<TokenLogprobs> blob_to_logprobs(std::span<const uint8_t> blob) {
  if (blob.size() < 4 || (blob.size() - 4) % 8 != 0) return std::nullopt;
  TokenLogprobs lp;
  lp.logprob = std::bit_cast<float>(get_u32(blob, 0));
  for (size_t at = 4; at < blob.size(); at += 8)
    lp.top.emplace_back(static_cast<int32_t>(get_u32(blob, at)),
                        std::bit_cast<float>(get_u32(blob, at + 4)));
  return lp;
}

// ---- open and migrate -------------------------------------------------------------------

JobStore::JobStore(std::unique_ptr<sql::Db> db, StoreOptions options) : db_(std::move(db)) {
  clock_ = options.clock ? std::move(options.clock) : [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
}

JobStore::~JobStore() = default;

const std::string& JobStore::path() const {
  return db_->path();
}

Result<std::unique_ptr<JobStore>> JobStore::open(const std::string& path, bool create,
                                                 StoreOptions options) {
  const bool quick_check = options.quick_check;
  NJ_ASSIGN_OR_RETURN(auto db,
                      sql::Db::open(path, create, options.busy_timeout_ms, options.journal));
  std::unique_ptr<JobStore> store(new JobStore(std::move(db), std::move(options)));
  if (quick_check) {
    NJ_ASSIGN_OR_RETURN(Stmt s, store->db_->prepare("PRAGMA quick_check"));
    std::string report;
    for (;;) {
      NJ_ASSIGN_OR_RETURN(bool row, s.step());
      if (!row) break;
      report += (report.empty() ? "" : "; ") + s.text(0);
    }
    if (report != "ok")
      return corruption(path + ": the job store fails its integrity check: " + report);
  }
  NJ_RETURN_IF_ERROR(store->migrate(create));
  return store;
}

namespace {

// The applied migration number: 0 for an empty database. Corruption for a database that
// is not a job store.
Result<int> read_schema_version(sql::Db& db) {
  NJ_ASSIGN_OR_RETURN(
      Stmt t, db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = "
                         "'schema_version'"));
  NJ_ASSIGN_OR_RETURN(bool row, t.step());
  if (row && t.int64(0) == 0) {
    NJ_ASSIGN_OR_RETURN(Stmt any, db.prepare("SELECT count(*) FROM sqlite_master"));
    NJ_ASSIGN_OR_RETURN(bool r2, any.step());
    if (r2 && any.int64(0) > 0)
      return corruption(db.path() +
                        ": this SQLite file is not a nightjar job store (no schema_version table)");
    return 0;
  }
  NJ_ASSIGN_OR_RETURN(Stmt v, db.prepare("SELECT version FROM schema_version"));
  NJ_ASSIGN_OR_RETURN(bool vrow, v.step());
  if (!vrow) return corruption(db.path() + ": the schema_version table is empty");
  return static_cast<int>(v.int64(0));
}

}  // namespace

Status JobStore::migrate(bool create) {
  const auto all = store_migrations();
  const int latest = all.empty() ? 0 : all.back().version;
  NJ_ASSIGN_OR_RETURN(int version, read_schema_version(*db_));
  if (version > latest)
    return failed_precondition(db_->path() + ": the job store has schema version " +
                               std::to_string(version) +
                               ", newer than this nightjar understands (" + std::to_string(latest) +
                               "); use a newer nightjar");
  if (version == 0 && !create)
    return not_found(db_->path() + ": no job store here (nothing submitted yet)");
  if (version < latest) {
    NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
    // Another process may have migrated between our read and our lock.
    NJ_ASSIGN_OR_RETURN(version, read_schema_version(*db_));
    for (const Migration& m : all) {
      if (m.version <= version) continue;
      NJ_RETURN_IF_ERROR(db_->exec(m.sql).with_context(std::string("migration ") + m.name));
      NJ_ASSIGN_OR_RETURN(Stmt s, db_->prepare("UPDATE schema_version SET version = ?"));
      NJ_RETURN_IF_ERROR(s.bind(1, m.version).run());
      version = m.version;
    }
    NJ_RETURN_IF_ERROR(txn->commit());
  }
  schema_version_ = version;
  return Status();
}

// ---- submit ---------------------------------------------------------------------------

Result<int64_t> JobStore::submit(const NewJob& job) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(int64_t job_id, insert_job(job, clock_(), nullptr, nullptr));
  NJ_RETURN_IF_ERROR(txn->commit());
  return job_id;
}

Result<int64_t> JobStore::insert_job(const NewJob& job, double now, const std::string* shard,
                                     const std::string* digest) {
  NJ_ASSIGN_OR_RETURN(
      Stmt j, db_->prepare("INSERT INTO jobs (name, kind, model_dir, memory_bytes, max_attempts, "
                           "priority, spec_path, settings, created_at, shard, submission) "
                           "VALUES (?,?,?,?,?,?,?,?,?,?,?)"));
  j.bind(1, job.name).bind(2, job.kind).bind(3, job.model_dir);
  if (job.memory_bytes)
    j.bind(4, static_cast<int64_t>(*job.memory_bytes));
  else
    j.bind_null(4);
  j.bind(5, job.max_attempts)
      .bind(6, job.priority)
      .bind(7, job.spec_path)
      .bind(8, job.settings_json)
      .bind(9, now);
  if (shard)
    j.bind(10, *shard).bind(11, *digest);
  else
    j.bind_null(10).bind_null(11);
  NJ_RETURN_IF_ERROR(j.run());
  const int64_t job_id = db_->last_insert_rowid();

  NJ_ASSIGN_OR_RETURN(
      Stmt it, db_->prepare("INSERT INTO items (job_id, seq, custom_id, input_text, prompt_ids, "
                            "params) VALUES (?,?,?,?,?,?)"));
  for (size_t k = 0; k < job.items.size(); ++k) {
    const NewItem& item = job.items[k];
    it.bind(1, job_id)
        .bind(2, static_cast<int64_t>(k))
        .bind(3, item.custom_id)
        .bind(4, item.input_text);
    it.bind_blob(5, ids_to_blob(item.prompt_ids)).bind(6, item.params_json);
    Status s = it.run();
    if (!s.ok()) {
      if (s.code() == StatusCode::kFailedPrecondition)
        return failed_precondition("item '" + item.custom_id + "': " + s.message());
      return s;
    }
  }
  nlohmann::json detail = {{"items", job.items.size()}, {"spec", job.spec_path}};
  if (shard) detail["shard"] = *shard;
  NJ_RETURN_IF_ERROR(insert_event(*db_, now, job_id, std::nullopt, "submitted", detail.dump()));
  return job_id;
}

// ---- queries --------------------------------------------------------------------------

namespace {

const char* const kSummarySql =
    "SELECT %JOB%, "
    "  count(i.id), "
    "  coalesce(sum(i.state = 'queued'), 0), coalesce(sum(i.state = 'running'), 0), "
    "  coalesce(sum(i.state = 'done'), 0), coalesce(sum(i.state = 'failed'), 0), "
    "  coalesce(sum(i.state = 'cancelled'), 0), coalesce(sum(i.tokens_done), 0), "
    "  coalesce(sum(CASE WHEN i.state IN ('queued', 'running', 'done') "
    "                    THEN json_extract(i.params, '$.max_tokens') ELSE i.tokens_done END), 0), "
    "  coalesce(sum(i.prefill_s + i.decode_s), 0) "
    "FROM jobs j LEFT JOIN items i ON i.job_id = j.id %WHERE% GROUP BY j.id ORDER BY j.id";

std::string summary_sql(const char* where) {
  std::string s = kSummarySql;
  s.replace(s.find("%JOB%"), 5, kJobColumns);
  s.replace(s.find("%WHERE%"), 7, where);
  return s;
}

JobSummary read_summary(const Stmt& s) {
  JobSummary out;
  out.job = read_job(s, 0);
  const int c = kJobColumnCount + 1;  // after count(i.id)
  out.queued = s.int64(c + 0);
  out.running = s.int64(c + 1);
  out.done = s.int64(c + 2);
  out.failed = s.int64(c + 3);
  out.cancelled = s.int64(c + 4);
  out.tokens_done = s.int64(c + 5);
  out.tokens_planned = s.int64(c + 6);
  out.active_s = s.real(c + 7);
  return out;
}

}  // namespace

Result<std::vector<JobSummary>> JobStore::list_jobs() {
  NJ_ASSIGN_OR_RETURN(Stmt s, db_->prepare(summary_sql("")));
  std::vector<JobSummary> out;
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back(read_summary(s));
  }
  return out;
}

Result<JobSummary> JobStore::job_summary(int64_t job_id) {
  NJ_ASSIGN_OR_RETURN(Stmt s, db_->prepare(summary_sql("WHERE j.id = ?")));
  s.bind(1, job_id);
  NJ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return not_found("no job " + std::to_string(job_id));
  return read_summary(s);
}

Result<JobRow> JobStore::find_job(const std::string& id_or_name) {
  const bool numeric = !id_or_name.empty() &&
                       id_or_name.find_first_not_of("0123456789") == std::string::npos &&
                       id_or_name.size() < 19;
  NJ_ASSIGN_OR_RETURN(Stmt s,
                      db_->prepare(std::string("SELECT ") + kJobColumns + " FROM jobs j WHERE " +
                                   (numeric ? "j.id = ?" : "j.name = ?") + " ORDER BY j.id"));
  if (numeric)
    s.bind(1, static_cast<int64_t>(std::stoll(id_or_name)));
  else
    s.bind(1, id_or_name);
  std::vector<JobRow> found;
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    found.push_back(read_job(s, 0));
  }
  if (found.empty()) return not_found("no job '" + id_or_name + "' in " + db_->path());
  if (found.size() > 1) {
    std::string ids;
    for (const auto& j : found) ids += (ids.empty() ? "" : ", ") + std::to_string(j.id);
    return invalid_argument("job name '" + id_or_name + "' is ambiguous (jobs " + ids +
                            "); give the job id");
  }
  return found.front();
}

Result<int64_t> JobStore::longest_prompt(int64_t job_id) {
  // prompt_ids holds 4 bytes a token (ids_to_blob).
  NJ_ASSIGN_OR_RETURN(
      Stmt s, db_->prepare("SELECT coalesce(max(length(prompt_ids)), 0) / 4 FROM items WHERE job_id = ?"));
  s.bind(1, job_id);
  NJ_ASSIGN_OR_RETURN(bool row, s.step());
  return row ? s.int64(0) : int64_t{0};
}

Result<std::vector<ItemRow>> JobStore::items(int64_t job_id) {
  NJ_ASSIGN_OR_RETURN(Stmt s, db_->prepare(std::string("SELECT ") + kItemColumns +
                                           " FROM items i WHERE i.job_id = ? ORDER BY i.seq"));
  s.bind(1, job_id);
  std::vector<ItemRow> out;
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back(read_item(s, 0));
  }
  return out;
}

Result<std::vector<int32_t>> JobStore::tokens(int64_t item_id) {
  return read_tokens(*db_, item_id);
}

Result<std::vector<TokenLogprobs>> JobStore::token_logprobs(int64_t item_id) {
  NJ_ASSIGN_OR_RETURN(
      Stmt s, db_->prepare("SELECT pos, logprobs FROM tokens WHERE item_id = ? ORDER BY pos"));
  s.bind(1, item_id);
  std::vector<TokenLogprobs> out;
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    const std::string where = db_->path() + ": item " + std::to_string(item_id) +
                              ", output token " + std::to_string(out.size());
    if (s.int64(0) != static_cast<int64_t>(out.size()))
      return corruption(where + ": a gap in the tokens");
    if (s.is_null(1)) return corruption(where + ": no log-probabilities stored");
    std::optional<TokenLogprobs> lp = blob_to_logprobs(s.blob(1));
    if (!lp) return corruption(where + ": log-probabilities of a size that fits no entry");
    out.push_back(std::move(*lp));
  }
  return out;
}

Result<std::vector<CheckpointRow>> JobStore::checkpoints(int64_t item_id) {
  return read_checkpoints(*db_, item_id);
}

Result<std::optional<ResultRow>> JobStore::result(int64_t item_id) {
  NJ_ASSIGN_OR_RETURN(
      Stmt s, db_->prepare("SELECT finish_reason, prompt_tokens, output_tokens, output_ids, "
                           "output_text, prefill_s, decode_s, created_at, details FROM results "
                           "WHERE item_id = ?"));
  s.bind(1, item_id);
  NJ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return std::optional<ResultRow>();
  ResultRow r;
  r.finish_reason = s.text(0);
  r.prompt_tokens = s.int64(1);
  r.output_tokens = s.int64(2);
  r.output_ids = blob_to_ids(s.blob(3));
  r.output_text = s.opt_text(4);
  r.prefill_s = s.real(5);
  r.decode_s = s.real(6);
  r.created_at = s.real(7);
  r.details_json = s.opt_text(8);
  return std::optional<ResultRow>(std::move(r));
}

Result<std::vector<EventRow>> JobStore::events(std::optional<int64_t> job_id,
                                               std::optional<int64_t> item_id) {
  std::string q = "SELECT id, at, job_id, item_id, kind, coalesce(detail, '') FROM events";
  if (item_id)
    q += " WHERE item_id = ?";
  else if (job_id)
    q += " WHERE job_id = ? OR item_id IN (SELECT id FROM items WHERE job_id = ?)";
  q += " ORDER BY id";
  NJ_ASSIGN_OR_RETURN(Stmt s, db_->prepare(q));
  if (item_id)
    s.bind(1, *item_id);
  else if (job_id)
    s.bind(1, *job_id).bind(2, *job_id);
  std::vector<EventRow> out;
  for (;;) {
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.int64(0), s.real(1), s.opt_int64(2), s.opt_int64(3), s.text(4), s.text(5)});
  }
  return out;
}

// ---- control ----------------------------------------------------------------------------

Result<int64_t> JobStore::cancel_job(int64_t job_id) {
  NJ_ASSIGN_OR_RETURN(auto moved, cancel_items(job_id, {}));
  return static_cast<int64_t>(moved.size());
}

Result<int64_t> JobStore::retry_job(int64_t job_id) {
  NJ_ASSIGN_OR_RETURN(auto moved, retry_items(job_id, {}));
  return static_cast<int64_t>(moved.size());
}

Result<std::vector<JobStore::MovedItem>> JobStore::cancel_items(
    int64_t job_id, const std::vector<std::string>& custom_ids) {
  return move_items(job_id, custom_ids, {"queued", "running"},
                    "state = 'cancelled', lease_owner = NULL, lease_expires = NULL, "
                    "finished_at = ?1",
                    "cancelled", "only queued or running items can be cancelled");
}

Result<std::vector<JobStore::MovedItem>> JobStore::retry_items(
    int64_t job_id, const std::vector<std::string>& custom_ids) {
  // Attempts start again from 0 (max_attempts applies afresh); the "retried" event keeps
  // the history (the attempts the item had, its last error).
  return move_items(job_id, custom_ids, {"failed", "cancelled"},
                    "state = 'queued', attempts = 0, batch_deaths = 0, last_error = NULL, "
                    "finished_at = NULL, retry_at = NULL",
                    "retried", "only failed or cancelled items can be retried");
}

Result<std::vector<JobStore::MovedItem>> JobStore::move_items(
    int64_t job_id, const std::vector<std::string>& custom_ids,
    const std::vector<std::string>& from, const char* set, const char* kind, const char* allowed) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  const double now = clock_();
  struct Row {
    int64_t id;
    std::string state;
    int64_t attempts;
    std::optional<std::string> last_error;
  };
  std::map<std::string, Row> rows;
  std::vector<std::string> order;  // spec order
  {
    NJ_ASSIGN_OR_RETURN(Stmt q, db_->prepare("SELECT id, custom_id, state, attempts, last_error "
                                             "FROM items WHERE job_id = ? ORDER BY id"));
    q.bind(1, job_id);
    for (;;) {
      NJ_ASSIGN_OR_RETURN(bool row, q.step());
      if (!row) break;
      rows[q.text(1)] = Row{q.int64(0), q.text(2), q.int64(3), q.opt_text(4)};
      order.push_back(q.text(1));
    }
  }
  auto applies = [&](const std::string& state) {
    return std::find(from.begin(), from.end(), state) != from.end();
  };
  std::vector<std::string> chosen;
  if (custom_ids.empty()) {
    for (const std::string& id : order)
      if (applies(rows[id].state)) chosen.push_back(id);
  } else {
    std::vector<std::string> missing, refused;
    for (const std::string& id : custom_ids) {
      auto it = rows.find(id);
      if (it == rows.end())
        missing.push_back("'" + id + "'");
      else if (!applies(it->second.state))
        refused.push_back("'" + id + "' is " + it->second.state);
      else if (std::find(chosen.begin(), chosen.end(), id) == chosen.end())
        chosen.push_back(id);
    }
    auto joined = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
      return s;
    };
    if (!missing.empty())
      return not_found("no item " + joined(missing) + " in this job (nothing changed)");
    if (!refused.empty())
      return failed_precondition(joined(refused) + ": " + allowed + " (nothing changed)");
  }
  NJ_ASSIGN_OR_RETURN(Stmt u,
                      db_->prepare(std::string("UPDATE items SET ") + set + " WHERE id = ?2"));
  std::vector<MovedItem> moved;
  for (const std::string& id : chosen) {
    const Row& r = rows[id];
    u.reset();
    NJ_RETURN_IF_ERROR(u.bind(1, now).bind(2, r.id).run());
    nlohmann::json detail = {{"from", r.state}, {"attempts", r.attempts}};
    if (r.last_error) detail["last_error"] = *r.last_error;
    NJ_RETURN_IF_ERROR(insert_event(*db_, now, job_id, r.id, kind, detail.dump()));
    moved.push_back(MovedItem{id, r.state});
  }
  NJ_RETURN_IF_ERROR(insert_event(*db_, now, job_id, std::nullopt, kind,
                                  nlohmann::json{{"items", moved.size()}}.dump()));
  NJ_RETURN_IF_ERROR(txn->commit());
  return moved;
}

Status JobStore::record_outputs(int64_t job_id, const std::vector<std::string>& written,
                                const std::optional<std::string>& error) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  const double now = clock_();
  NJ_ASSIGN_OR_RETURN(Stmt u, db_->prepare("UPDATE jobs SET outputs_state = ?, outputs_error = ?, "
                                           "outputs_at = ? WHERE id = ?"));
  u.bind(1, error ? "failed" : "written").bind(2, error).bind(3, now);
  NJ_RETURN_IF_ERROR(u.bind(4, job_id).run());
  const nlohmann::json detail =
      error ? nlohmann::json{{"error", *error}} : nlohmann::json{{"paths", written}};
  NJ_RETURN_IF_ERROR(insert_event(*db_, now, job_id, std::nullopt,
                                  error ? "outputs_failed" : "outputs_written", detail.dump()));
  return txn->commit();
}

Result<std::optional<double>> JobStore::next_retry_at() {
  NJ_ASSIGN_OR_RETURN(
      Stmt s,
      db_->prepare("SELECT min(retry_at) FROM items WHERE state = 'queued' AND retry_at > ?"));
  s.bind(1, clock_());
  NJ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row) return std::optional<double>();
  return s.opt_real(0);
}

Status JobStore::add_event(std::optional<int64_t> job_id, std::optional<int64_t> item_id,
                           const std::string& kind, const std::string& detail_json) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kNormal));
  NJ_RETURN_IF_ERROR(insert_event(*db_, clock_(), job_id, item_id, kind, detail_json));
  return txn->commit();
}

}  // namespace nj::runner
