// The store's work queue: claiming items under leases, reclaiming stale leases, and every
// write a running item makes (tokens, checkpoints, the result, stops and failures), each
// guarded by the lease so a process that lost its item can never write to it.
#include <map>

#include <nlohmann/json.hpp>

#include "runner/store/job_store.h"
#include "runner/store/sqlite.h"
#include "runner/store/store_internal.h"

namespace nj::runner {

using sql::Stmt;
using sql::Sync;
using sql::Transaction;
using namespace store_internal;

namespace {

struct RunningItem {
  int64_t id;
  int64_t job_id;
  std::string custom_id;
  std::string owner;
  double expires;
  int attempts;
  int max_attempts;
  int batch_deaths;
};

// Ends an attempt of item `id` and its lease: back to the queue (not claimed before
// `retry_at`, when given), or failed for good at `now` when `fail`. The one UPDATE both a
// failed attempt and a reclaimed lease make.
Status requeue_or_fail(sql::Db& db, int64_t id, bool fail, int attempts, const std::string& error,
                       double now, std::optional<double> retry_at) {
  NJ_ASSIGN_OR_RETURN(Stmt u,
                      db.prepare("UPDATE items SET state = ?, attempts = ?, last_error = ?, "
                                 "lease_owner = NULL, lease_expires = NULL, "
                                 "finished_at = ?, retry_at = ? WHERE id = ?"));
  u.bind(1, fail ? "failed" : "queued").bind(2, attempts).bind(3, error);
  if (fail)
    u.bind(4, now);
  else
    u.bind_null(4);
  return u.bind(5, retry_at).bind(6, id).run();
}

// Step 1 of claim_next: reclaims stale leases (expired, or held by a process that no longer
// exists), in the caller's transaction.
Status reclaim_stale_leases(sql::Db& db, const std::string& owner, double now,
                            const OwnerAliveFn& alive, const ClaimFilter& filter,
                            std::vector<Reclaimed>* reclaimed) {
  // A lease in our own name is stale too unless this process says it holds the item now (an
  // earlier, unfinished attempt of this process: a run that ended on a store error, say).
  std::vector<RunningItem> running;
  {
    NJ_ASSIGN_OR_RETURN(
        Stmt s, db.prepare("SELECT i.id, i.job_id, i.custom_id, i.lease_owner, i.lease_expires, "
                           "i.attempts, j.max_attempts, i.batch_deaths FROM items i "
                           "JOIN jobs j ON j.id = i.job_id WHERE i.state = 'running'"));
    for (;;) {
      NJ_ASSIGN_OR_RETURN(bool row, s.step());
      if (!row) break;
      running.push_back({s.int64(0), s.int64(1), s.text(2), s.text(3), s.real(4),
                         static_cast<int>(s.int64(5)), static_cast<int>(s.int64(6)),
                         static_cast<int>(s.int64(7))});
    }
  }
  std::vector<std::pair<const RunningItem*, std::string>> stale;  // each with why
  std::map<std::string, int> batch_of;  // stale items per owner: the batch its process held
  for (const RunningItem& r : running) {
    std::string why;
    if (r.owner == owner && filter.held.count(r.id)) continue;
    if (r.owner == owner)
      why = "this process (" + owner + ") held the lease from an earlier, unfinished attempt";
    else if (!alive(r.owner))
      why = "the run process " + r.owner + " died while holding the item (killed or crashed)";
    else if (r.expires < now)
      why = "the lease of " + r.owner + " expired without a heartbeat (process stuck?)";
    else
      continue;
    stale.emplace_back(&r, std::move(why));
    ++batch_of[r.owner];
  }
  // Who is charged (docs/design/jobs.md, "Attempts"): an item that was alone in its process is charged an
  // attempt, as its own failure; items that shared a batch are not (any of them, or none,
  // may have brought the process down), each counts a batch death instead, and at
  // kSoloAfterBatchDeaths it runs alone (step 2), where a death is charged to it alone.
  for (const auto& [r, why] : stale) {
    const int batch = batch_of[r->owner];
    Reclaimed out{r->id, r->job_id, r->custom_id, ItemState::kQueued, batch == 1, why};
    nlohmann::json detail = {{"owner", r->owner}, {"batch", batch}, {"charged", out.charged}};
    if (out.charged) {
      const int attempts = r->attempts + 1;
      const bool fail = attempts >= r->max_attempts;
      if (fail) out.state = ItemState::kFailed;
      // retry_at is cleared: a running item's was in the past when it was claimed.
      NJ_RETURN_IF_ERROR(requeue_or_fail(db, r->id, fail, attempts, why, now, std::nullopt));
      detail["attempts"] = attempts;
    } else {
      const int deaths = r->batch_deaths + 1;
      out.error = why + "; it shared its batch with " + std::to_string(batch - 1) +
                  " other item(s), so no attempt is charged (" + std::to_string(deaths) +
                  (deaths == 1 ? " batch death" : " batch deaths") +
                  (deaths >= kSoloAfterBatchDeaths ? ": it runs alone from now on)" : ")");
      NJ_ASSIGN_OR_RETURN(
          Stmt u, db.prepare("UPDATE items SET state = 'queued', batch_deaths = ?, "
                             "last_error = ?, lease_owner = NULL, lease_expires = NULL, "
                             "retry_at = NULL WHERE id = ?"));
      NJ_RETURN_IF_ERROR(u.bind(1, deaths).bind(2, out.error).bind(3, r->id).run());
      detail["attempts"] = r->attempts;
      detail["batch_deaths"] = deaths;
    }
    detail["error"] = out.error;
    NJ_RETURN_IF_ERROR(insert_event(db, now, r->job_id, r->id,
                                    out.state == ItemState::kFailed ? "failed" : "lease_reclaimed",
                                    detail.dump()));
    if (reclaimed) reclaimed->push_back(std::move(out));
  }
  return Status();
}

}  // namespace

Result<std::optional<Claim>> JobStore::claim_next(const std::string& owner, double lease_s,
                                                  const OwnerAliveFn& alive,
                                                  const ClaimFilter& filter,
                                                  std::vector<Reclaimed>* reclaimed) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  const double now = clock_();

  // 1. Reclaim stale leases: expired, or held by a process that no longer exists.
  NJ_RETURN_IF_ERROR(reclaim_stale_leases(*db_, owner, now, alive, filter, reclaimed));

  // 2. The next queued item: job priority, then FIFO by job, then spec order.
  NJ_ASSIGN_OR_RETURN(
      Stmt pick,
      db_->prepare(
          std::string(
              "SELECT i.id FROM items i JOIN jobs j ON j.id = i.job_id WHERE i.state = 'queued' "
              "AND (i.retry_at IS NULL OR i.retry_at <= ?) ") +
          // An item that runs alone never joins a batch that holds items already.
          (filter.held.empty()
               ? std::string()
               : "AND i.batch_deaths < " + std::to_string(kSoloAfterBatchDeaths) + " ") +
          (filter.model ? "AND j.model_dir = ? AND coalesce(j.memory_bytes, 0) = ? "
                          "AND coalesce(json_extract(j.settings, '$.max_context'), 0) <= ? "
                          "AND j.kind = ? "
                          "AND coalesce(json_extract(j.settings, '$.speculative'), 'auto') = ? "
                        : "") +
          // prompt_ids holds 4 bytes a token (ids_to_blob).
          (filter.max_prompt_tokens ? "AND length(i.prompt_ids) <= 4 * ? " : "") +
          (filter.job_id ? "AND i.job_id = ? " : "") +
          "ORDER BY j.priority DESC, j.id, i.seq LIMIT 1"));
  pick.bind(1, now);
  if (filter.model)
    pick.bind(2, filter.model->dir)
        .bind(3, static_cast<int64_t>(filter.model->memory_bytes))
        .bind(4, filter.model->max_context)
        .bind(5, filter.model->kind)
        .bind(6, filter.model->speculative);
  int next = filter.model ? 7 : 2;
  if (filter.max_prompt_tokens) pick.bind(next++, *filter.max_prompt_tokens);
  if (filter.job_id) pick.bind(next, *filter.job_id);
  NJ_ASSIGN_OR_RETURN(bool found, pick.step());
  if (!found) {
    NJ_RETURN_IF_ERROR(txn->commit());
    return std::optional<Claim>();
  }
  const int64_t item_id = pick.int64(0);
  pick.reset();

  NJ_ASSIGN_OR_RETURN(
      Stmt take,
      db_->prepare("UPDATE items SET state = 'running', lease_owner = ?, lease_expires = ?, "
                   "claims = claims + 1, started_at = coalesce(started_at, ?), retry_at = NULL "
                   "WHERE id = ?"));
  NJ_RETURN_IF_ERROR(
      take.bind(1, owner).bind(2, now + lease_s).bind(3, now).bind(4, item_id).run());

  Claim claim;
  {
    NJ_ASSIGN_OR_RETURN(
        Stmt s, db_->prepare(std::string("SELECT ") + kJobColumns + ", " + kItemColumns +
                             " FROM items i JOIN jobs j ON j.id = i.job_id WHERE i.id = ?"));
    s.bind(1, item_id);
    NJ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) return internal_error("claimed item " + std::to_string(item_id) + " vanished");
    claim.job = read_job(s, 0);
    claim.item = read_item(s, kJobColumnCount);
  }
  NJ_ASSIGN_OR_RETURN(claim.tokens, read_tokens(*db_, item_id));
  if (static_cast<int64_t>(claim.tokens.size()) != claim.item.tokens_done)
    return corruption(db_->path() + ": item " + std::to_string(item_id) + " records " +
                      std::to_string(claim.item.tokens_done) + " tokens but stores " +
                      std::to_string(claim.tokens.size()));
  NJ_ASSIGN_OR_RETURN(claim.checkpoints, read_checkpoints(*db_, item_id));
  NJ_RETURN_IF_ERROR(insert_event(*db_, now, claim.job.id, item_id, "claimed",
                                  nlohmann::json{{"owner", owner},
                                                 {"claim", claim.item.claims},
                                                 {"attempts", claim.item.attempts},
                                                 {"tokens_done", claim.item.tokens_done},
                                                 {"checkpoints", claim.checkpoints.size()}}
                                      .dump()));
  NJ_RETURN_IF_ERROR(txn->commit());
  lease_s_ = lease_s;
  return std::optional<Claim>(std::move(claim));
}

Result<std::vector<int64_t>> JobStore::heartbeat(const std::vector<int64_t>& items,
                                                 const std::string& owner, double lease_s) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kNormal));
  const double until = clock_() + lease_s;
  std::vector<int64_t> gone;
  for (int64_t item_id : items) {
    NJ_ASSIGN_OR_RETURN(
        Stmt s, db_->prepare("UPDATE items SET lease_expires = ? WHERE id = ? AND lease_owner = ? "
                             "AND state = 'running'"));
    NJ_RETURN_IF_ERROR(s.bind(1, until).bind(2, item_id).bind(3, owner).run());
    if (db_->changes() != 1) gone.push_back(item_id);
  }
  NJ_RETURN_IF_ERROR(txn->commit());
  return gone;
}

// Inside a transaction: checks the lease, extends it, and stores the progress. False when
// the lease is gone; Internal when the tokens do not continue the stored ones (a bug).
Result<bool> JobStore::write_progress(int64_t item_id, const std::string& owner, const Progress& p,
                                      double lease_s) {
  const int64_t n = static_cast<int64_t>(p.tokens.size());
  if (!p.logprobs.empty() && p.logprobs.size() != p.tokens.size())
    return internal_error("item " + std::to_string(item_id) + ": " +
                          std::to_string(p.logprobs.size()) + " log-probabilities for " +
                          std::to_string(n) + " tokens");
  NJ_ASSIGN_OR_RETURN(
      Stmt u, db_->prepare("UPDATE items SET lease_expires = ?, tokens_done = tokens_done + ?, "
                           "prefill_s = prefill_s + ?, decode_s = decode_s + ?, "
                           "io_wait_s = io_wait_s + ?, compute_s = compute_s + ?, "
                           "bytes_read = bytes_read + ?, tokens_fed = tokens_fed + ?, "
                           "decode_steps = decode_steps + ?, max_batch = max(max_batch, ?), "
                           "spec_passes = spec_passes + ?, spec_drafted = spec_drafted + ?, "
                           "spec_accepted = spec_accepted + ? "
                           "WHERE id = ? AND lease_owner = ? AND state = 'running' "
                           "AND tokens_done = ?"));
  u.bind(1, clock_() + lease_s).bind(2, n).bind(3, p.prefill_s).bind(4, p.decode_s);
  u.bind(5, p.usage.io_wait_s).bind(6, p.usage.compute_s);
  u.bind(7, static_cast<int64_t>(p.usage.bytes_read)).bind(8, p.usage.tokens_fed);
  u.bind(9, p.usage.decode_steps).bind(10, p.usage.max_batch);
  u.bind(11, p.usage.spec_passes).bind(12, p.usage.spec_drafted).bind(13, p.usage.spec_accepted);
  NJ_RETURN_IF_ERROR(u.bind(14, item_id).bind(15, owner).bind(16, p.first_pos).run());
  if (db_->changes() != 1) {
    NJ_ASSIGN_OR_RETURN(
        Stmt q, db_->prepare("SELECT state, coalesce(lease_owner, ''), tokens_done FROM items "
                             "WHERE id = ?"));
    q.bind(1, item_id);
    NJ_ASSIGN_OR_RETURN(bool row, q.step());
    if (row && q.text(0) == "running" && q.text(1) == owner)
      return internal_error("item " + std::to_string(item_id) + ": writing tokens from position " +
                            std::to_string(p.first_pos) + " but " + std::to_string(q.int64(2)) +
                            " are stored");
    return false;
  }
  if (n > 0) {
    NJ_ASSIGN_OR_RETURN(
        Stmt ins,
        db_->prepare("INSERT INTO tokens (item_id, pos, token_id, logprobs) VALUES (?,?,?,?)"));
    for (int64_t k = 0; k < n; ++k) {
      ins.bind(1, item_id).bind(2, p.first_pos + k).bind(3, static_cast<int64_t>(p.tokens[k]));
      if (p.logprobs.empty())
        ins.bind_null(4);
      else
        ins.bind_blob(4, logprobs_to_blob(p.logprobs[static_cast<size_t>(k)]));
      NJ_RETURN_IF_ERROR(ins.run());
    }
  }
  return true;
}

Result<bool> JobStore::append_tokens(int64_t item_id, const std::string& owner,
                                     const Progress& progress) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kNormal));
  NJ_ASSIGN_OR_RETURN(bool owned, write_progress(item_id, owner, progress, lease_s_));
  if (!owned) return false;
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

Result<bool> JobStore::add_checkpoint(int64_t item_id, const std::string& owner,
                                      const Progress& progress, const NewCheckpoint& cp) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(bool owned, write_progress(item_id, owner, progress, lease_s_));
  if (!owned) return false;
  NJ_ASSIGN_OR_RETURN(Stmt del, db_->prepare("DELETE FROM checkpoints WHERE item_id = ?"));
  NJ_RETURN_IF_ERROR(del.bind(1, item_id).run());
  NJ_ASSIGN_OR_RETURN(
      Stmt ins,
      db_->prepare("INSERT INTO checkpoints (item_id, position, tokens_done, path, bytes, "
                   "created_at) VALUES (?,?,?,?,?,?)"));
  ins.bind(1, item_id).bind(2, cp.position).bind(3, cp.tokens_done).bind(4, cp.path);
  NJ_RETURN_IF_ERROR(ins.bind(5, static_cast<int64_t>(cp.bytes)).bind(6, clock_()).run());
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

Result<bool> JobStore::drop_checkpoints(int64_t item_id, const std::string& owner) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(Stmt cur, db_->prepare("SELECT tokens_done FROM items WHERE id = ?"));
  cur.bind(1, item_id);
  NJ_ASSIGN_OR_RETURN(bool row, cur.step());
  if (!row) return false;
  const int64_t stored = cur.int64(0);
  cur.reset();
  NJ_ASSIGN_OR_RETURN(bool owned,
                      write_progress(item_id, owner, Progress{stored, {}, 0, 0}, lease_s_));
  if (!owned) return false;
  NJ_ASSIGN_OR_RETURN(Stmt del, db_->prepare("DELETE FROM checkpoints WHERE item_id = ?"));
  NJ_RETURN_IF_ERROR(del.bind(1, item_id).run());
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

Result<bool> JobStore::finish_item(int64_t item_id, const std::string& owner,
                                   const Progress& progress, const NewResult& result) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(bool owned, write_progress(item_id, owner, progress, lease_s_));
  if (!owned) return false;
  const double now = clock_();
  NJ_ASSIGN_OR_RETURN(std::vector<int32_t> output, read_tokens(*db_, item_id));
  NJ_ASSIGN_OR_RETURN(Stmt item,
                      db_->prepare("SELECT job_id, prefill_s, decode_s FROM items WHERE id = ?"));
  item.bind(1, item_id);
  NJ_ASSIGN_OR_RETURN(bool row, item.step());
  if (!row) return internal_error("finished item " + std::to_string(item_id) + " vanished");
  const int64_t job_id = item.int64(0);
  const double prefill_s = item.real(1), decode_s = item.real(2);
  item.reset();

  NJ_ASSIGN_OR_RETURN(Stmt ins,
                      db_->prepare("INSERT INTO results (item_id, finish_reason, prompt_tokens, "
                                   "output_tokens, output_ids, output_text, prefill_s, decode_s, "
                                   "created_at, details) VALUES (?,?,?,?,?,?,?,?,?,?)"));
  ins.bind(1, item_id).bind(2, result.finish_reason).bind(3, result.prompt_tokens);
  ins.bind(4, static_cast<int64_t>(output.size()))
      .bind_blob(5, ids_to_blob(output))
      .bind(6, result.output_text);
  NJ_RETURN_IF_ERROR(
      ins.bind(7, prefill_s).bind(8, decode_s).bind(9, now).bind(10, result.details_json).run());

  NJ_ASSIGN_OR_RETURN(Stmt done,
                      db_->prepare("UPDATE items SET state = 'done', lease_owner = NULL, "
                                   "lease_expires = NULL, finished_at = ?, last_error = NULL, "
                                   "numerics_version = coalesce(?, numerics_version) "
                                   "WHERE id = ?"));
  NJ_RETURN_IF_ERROR(done.bind(1, now).bind(2, result.numerics_version).bind(3, item_id).run());

  NJ_ASSIGN_OR_RETURN(Stmt del, db_->prepare("DELETE FROM checkpoints WHERE item_id = ?"));
  NJ_RETURN_IF_ERROR(del.bind(1, item_id).run());
  NJ_RETURN_IF_ERROR(
      insert_event(*db_, now, job_id, item_id, "done",
                   nlohmann::json{{"owner", owner}, {"output_tokens", output.size()}}.dump()));
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

Result<bool> JobStore::release_item(int64_t item_id, const std::string& owner,
                                    const Progress& progress, const std::string& detail_json) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(bool owned, write_progress(item_id, owner, progress, lease_s_));
  if (!owned) return false;
  NJ_ASSIGN_OR_RETURN(Stmt u, db_->prepare("UPDATE items SET state = 'queued', lease_owner = NULL, "
                                           "lease_expires = NULL WHERE id = ? RETURNING job_id"));
  u.bind(1, item_id);
  NJ_ASSIGN_OR_RETURN(bool row, u.step());
  const int64_t job_id = row ? u.int64(0) : 0;
  u.reset();
  NJ_RETURN_IF_ERROR(insert_event(*db_, clock_(), job_id, item_id, "released", detail_json));
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

Result<std::optional<ItemState>> JobStore::fail_attempt(int64_t item_id, const std::string& owner,
                                                        const Progress& progress,
                                                        const std::string& error, bool final,
                                                        std::optional<double> retry_after_s) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(bool owned, write_progress(item_id, owner, progress, lease_s_));
  if (!owned) return std::optional<ItemState>();
  const double now = clock_();
  NJ_ASSIGN_OR_RETURN(Stmt q,
                      db_->prepare("SELECT i.attempts, j.max_attempts, i.job_id FROM items i "
                                   "JOIN jobs j ON j.id = i.job_id WHERE i.id = ?"));
  q.bind(1, item_id);
  NJ_ASSIGN_OR_RETURN(bool row, q.step());
  if (!row) return internal_error("item " + std::to_string(item_id) + " vanished");
  const int attempts = static_cast<int>(q.int64(0)) + 1;
  const bool fail = final || attempts >= q.int64(1);
  const int64_t job_id = q.int64(2);
  q.reset();
  std::optional<double> retry_at;
  if (!fail && retry_after_s) retry_at = now + *retry_after_s;
  NJ_RETURN_IF_ERROR(requeue_or_fail(*db_, item_id, fail, attempts, error, now, retry_at));
  nlohmann::json detail = {{"owner", owner}, {"attempts", attempts}, {"error", error}};
  if (retry_at) detail["retry_at"] = *retry_at;
  if (final) detail["final"] = true;
  NJ_RETURN_IF_ERROR(
      insert_event(*db_, now, job_id, item_id, fail ? "failed" : "attempt_failed", detail.dump()));
  NJ_RETURN_IF_ERROR(txn->commit());
  return std::optional<ItemState>(fail ? ItemState::kFailed : ItemState::kQueued);
}

Result<bool> JobStore::release_lease(int64_t item_id, const std::string& owner,
                                     const std::string& reason) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(Stmt u, db_->prepare("UPDATE items SET state = 'queued', lease_owner = NULL, "
                                           "lease_expires = NULL WHERE id = ? AND lease_owner = ? "
                                           "AND state = 'running' RETURNING job_id"));
  u.bind(1, item_id).bind(2, owner);
  NJ_ASSIGN_OR_RETURN(bool row, u.step());
  if (!row) return false;
  const int64_t job_id = u.int64(0);
  u.reset();
  NJ_RETURN_IF_ERROR(insert_event(*db_, clock_(), job_id, item_id, "released",
                                  nlohmann::json{{"reason", reason}, {"owner", owner}}.dump()));
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

Result<bool> JobStore::set_numerics_version(int64_t item_id, const std::string& owner,
                                            int version) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(Stmt u, db_->prepare("UPDATE items SET numerics_version = ? WHERE id = ? "
                                           "AND lease_owner = ? AND state = 'running'"));
  NJ_RETURN_IF_ERROR(u.bind(1, version).bind(2, item_id).bind(3, owner).run());
  if (db_->changes() != 1) return false;
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

Result<bool> JobStore::restart_output(int64_t item_id, const std::string& owner, int version,
                                      const std::string& detail_json) {
  NJ_ASSIGN_OR_RETURN(auto txn, Transaction::begin(*db_, Sync::kFull));
  NJ_ASSIGN_OR_RETURN(Stmt u, db_->prepare("UPDATE items SET tokens_done = 0, numerics_version = ? "
                                           "WHERE id = ? AND lease_owner = ? AND state = 'running' "
                                           "RETURNING job_id"));
  u.bind(1, version).bind(2, item_id).bind(3, owner);
  NJ_ASSIGN_OR_RETURN(bool row, u.step());
  if (!row) return false;
  const int64_t job_id = u.int64(0);
  u.reset();
  for (const char* sql :
       {"DELETE FROM tokens WHERE item_id = ?", "DELETE FROM checkpoints WHERE item_id = ?"}) {
    NJ_ASSIGN_OR_RETURN(Stmt d, db_->prepare(sql));
    NJ_RETURN_IF_ERROR(d.bind(1, item_id).run());
  }
  NJ_RETURN_IF_ERROR(
      insert_event(*db_, clock_(), job_id, item_id, "numerics_restart", detail_json));
  NJ_RETURN_IF_ERROR(txn->commit());
  return true;
}

}  // namespace nj::runner
