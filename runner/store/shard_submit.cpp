// JobStore::submit_shard: a shard of an array job, queued at most once per home (migration
// 004), so that an array task that runs again (requeued, preempted, resubmitted) resumes
// the job it queued the first time instead of queueing it twice.
#include <cinttypes>
#include <cstdio>

#include <nlohmann/json.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "runner/store/job_store.h"
#include "runner/store/sqlite.h"
#include "runner/store/store_internal.h"

namespace nj::runner {

std::string job_digest(const NewJob& job) {
  nlohmann::json items = nlohmann::json::array();
  for (const NewItem& item : job.items)
    items.push_back({item.custom_id, item.input_text ? nlohmann::json(*item.input_text) : nullptr,
                     item.prompt_ids, item.params_json});
  const nlohmann::json all = {
      {"name", job.name},
      {"kind", job.kind},
      {"model_dir", job.model_dir},
      {"memory_bytes", job.memory_bytes ? nlohmann::json(*job.memory_bytes) : nullptr},
      {"max_attempts", job.max_attempts},
      {"priority", job.priority},
      {"settings", job.settings_json},
      {"items", items}};
  const std::string text = all.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64,
                static_cast<uint64_t>(XXH64(text.data(), text.size(), 0)));
  return hex;
}

Result<ShardSubmit> JobStore::submit_shard(const NewJob& job, const std::string& shard) {
  const std::string digest = job_digest(job);
  NJ_ASSIGN_OR_RETURN(auto txn, sql::Transaction::begin(*db_, sql::Sync::kFull));
  NJ_ASSIGN_OR_RETURN(sql::Stmt s, db_->prepare("SELECT id, shard, submission FROM jobs WHERE "
                                                "name = ? AND shard IS NOT NULL ORDER BY id"));
  s.bind(1, job.name);
  NJ_ASSIGN_OR_RETURN(bool row, s.step());
  if (row) {
    const int64_t id = s.int64(0);
    const std::string held = s.text(1), held_digest = s.text(2);
    if (held == shard && held_digest == digest) return ShardSubmit{id, false};
    const std::string where = db_->path() + ": job " + std::to_string(id) + " '" + job.name + "'";
    if (held != shard)
      return failed_precondition(where + " is shard " + held + " of its array, not " + shard +
                                 " (another --tasks count?); give each array its own directory");
    return failed_precondition(where + " (shard " + shard + ") was queued from other items or " +
                               "settings (digest " + held_digest + ", now " + digest +
                               "): the spec changed since; give the changed job a new directory");
  }
  NJ_ASSIGN_OR_RETURN(int64_t id, insert_job(job, clock_(), &shard, &digest));
  NJ_RETURN_IF_ERROR(txn->commit());
  return ShardSubmit{id, true};
}

}  // namespace nj::runner
