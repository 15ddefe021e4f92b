// The job store: migrations, integrity checks on open, submit atomicity, queries, cancel
// and retry.
#include "runner/store/job_store.h"

#include <catch2/catch.hpp>
#include <fstream>

#include "runner/store/migrations.h"
#include "runner/store/sqlite.h"
#include "tests/unit/runner/store/store_test_util.h"

namespace nj::runner {
namespace {

TEST_CASE("a new store applies every migration and records the schema version", "[runner][store]") {
  TempDir dir;
  auto store = JobStore::open(dir.file("s.db"), true);
  REQUIRE(store.ok());
  REQUIRE(!store_migrations().empty());
  CHECK((*store)->schema_version() == store_migrations().back().version);
  auto db = sql::Db::open(dir.file("s.db"), false, 1000);
  REQUIRE(db.ok());
  auto s = (*db)->prepare("SELECT version FROM schema_version");
  REQUIRE(s.ok());
  REQUIRE(*s->step());
  CHECK(s->int64(0) == store_migrations().back().version);
  auto mode = (*db)->prepare("PRAGMA journal_mode");
  REQUIRE(*mode->step());
  CHECK(mode->text(0) == "wal");
}

TEST_CASE("reopening a store keeps its jobs and does not migrate again", "[runner][store]") {
  TempDir dir;
  {
    auto store = JobStore::open(dir.file("s.db"), true);
    REQUIRE(store.ok());
    REQUIRE((*store)->submit(test_job("a", 2)).ok());
  }
  auto store = JobStore::open(dir.file("s.db"), false);
  REQUIRE(store.ok());
  auto jobs = (*store)->list_jobs();
  REQUIRE(jobs.ok());
  REQUIRE(jobs->size() == 1);
  CHECK((*jobs)[0].queued == 2);
}

TEST_CASE("a store written at schema version 1 opens and reads", "[runner][store]") {
  // The file as nightjar 0.1 (migration 1) writes it, built from the migration's own SQL
  // with rows inserted by hand: the format is what the SQL says, not what this build does.
  TempDir dir;
  {
    auto db = sql::Db::open(dir.file("v1.db"), true, 1000);
    REQUIRE(db.ok());
    REQUIRE((*db)->exec(store_migrations()[0].sql).ok());
    REQUIRE((*db)
                ->exec("UPDATE schema_version SET version = 1;"
                       "INSERT INTO jobs VALUES (7, 'old', 'generate', '/m', NULL, 3, 0, "
                       "'/s.yaml', '{}', 1.0);"
                       "INSERT INTO items (id, job_id, seq, custom_id, prompt_ids, params, state, "
                       "tokens_done) "
                       "VALUES (1, 7, 0, 'x', x'03000000', '{\"max_tokens\": 4}', 'queued', 1);"
                       "INSERT INTO tokens VALUES (1, 0, 42);")
                .ok());
  }
  auto store = JobStore::open(dir.file("v1.db"), false);
  REQUIRE(store.ok());
  auto job = (*store)->find_job("old");
  REQUIRE(job.ok());
  CHECK(job->id == 7);
  auto items = (*store)->items(7);
  REQUIRE(items.ok());
  REQUIRE(items->size() == 1);
  CHECK((*items)[0].prompt_ids == std::vector<int32_t>{3});
  CHECK((*items)[0].max_tokens == 4);
  CHECK(*(*store)->tokens(1) == std::vector<int32_t>{42});
  // Migration 3 added per-token log-probabilities; tokens written before have none.
  CHECK((*store)->token_logprobs(1).status().code() == StatusCode::kCorruption);
  // Migrations 5-7's columns start empty: no outputs written, no retry wait, and the
  // numerics of the stored token unrecorded (it is replayed before it is trusted).
  CHECK_FALSE(job->outputs_state.has_value());
  CHECK_FALSE((*items)[0].retry_at.has_value());
  CHECK_FALSE((*items)[0].numerics_version.has_value());
}

TEST_CASE("a store from a newer nightjar is refused, and so is a foreign SQLite file",
          "[runner][store]") {
  TempDir dir;
  {
    auto store = JobStore::open(dir.file("s.db"), true);
    REQUIRE(store.ok());
    auto db = sql::Db::open(dir.file("s.db"), false, 1000);
    REQUIRE((*db)->exec("UPDATE schema_version SET version = 999").ok());
  }
  auto newer = JobStore::open(dir.file("s.db"), false);
  REQUIRE_FALSE(newer.ok());
  CHECK(newer.status().code() == StatusCode::kFailedPrecondition);
  CHECK(newer.status().message().find("schema version 999") != std::string::npos);

  {
    auto db = sql::Db::open(dir.file("other.db"), true, 1000);
    REQUIRE((*db)->exec("CREATE TABLE t (x)").ok());
  }
  auto foreign = JobStore::open(dir.file("other.db"), true);
  REQUIRE_FALSE(foreign.ok());
  CHECK(foreign.status().code() == StatusCode::kCorruption);
  CHECK(foreign.status().message().find("not a nightjar job store") != std::string::npos);
}

TEST_CASE("opening a damaged store fails with the file named", "[runner][store]") {
  TempDir dir;
  const std::string path = dir.file("s.db");
  {
    auto store = JobStore::open(path, true);
    REQUIRE(store.ok());
    for (int k = 0; k < 20; ++k)
      REQUIRE((*store)->submit(test_job("j" + std::to_string(k), 20)).ok());
    auto db = sql::Db::open(path, false, 1000);
    REQUIRE((*db)->exec("PRAGMA wal_checkpoint(TRUNCATE)").ok());
  }
  std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() > 8192);
  for (size_t i = 4096 + 100; i < bytes.size(); i += 4096)
    bytes[i] ^= 0x5a;  // every page past the first
  write_bytes(path, bytes);
  auto store = JobStore::open(path, false);
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().code() == StatusCode::kCorruption);
  CHECK(store.status().message().find(path) != std::string::npos);
}

TEST_CASE("submit is one transaction: a duplicate custom_id writes nothing", "[runner][store]") {
  TempDir dir;
  auto store = JobStore::open(dir.file("s.db"), true);
  REQUIRE(store.ok());
  NewJob job = test_job("dup", 3);
  job.items[2].custom_id = job.items[0].custom_id;
  auto id = (*store)->submit(job);
  REQUIRE_FALSE(id.ok());
  CHECK(id.status().message().find("item-0") != std::string::npos);
  CHECK((*store)->list_jobs()->empty());
  CHECK((*store)->events(std::nullopt, std::nullopt)->empty());
  REQUIRE((*store)->submit(test_job("ok", 3)).ok());
  CHECK((*store)->list_jobs()->size() == 1);
}

TEST_CASE("jobs are found by id or unique name", "[runner][store]") {
  TempDir dir;
  auto store = JobStore::open(dir.file("s.db"), true);
  REQUIRE(store.ok());
  REQUIRE((*store)->submit(test_job("a", 1)).ok());
  REQUIRE((*store)->submit(test_job("b", 1)).ok());
  REQUIRE((*store)->submit(test_job("b", 1)).ok());
  CHECK((*store)->find_job("1")->name == "a");
  CHECK((*store)->find_job("a")->id == 1);
  auto ambiguous = (*store)->find_job("b");
  REQUIRE_FALSE(ambiguous.ok());
  CHECK(ambiguous.status().message().find("jobs 2, 3") != std::string::npos);
  CHECK((*store)->find_job("9").status().code() == StatusCode::kNotFound);
}

TEST_CASE("cancel takes queued and running items, retry requeues failed and cancelled ones",
          "[runner][store]") {
  TempDir dir;
  double now = 1000;
  auto store = open_with_clock(dir.file("s.db"), now);
  JobStore& s = *store;
  const int64_t job = *s.submit(test_job("c", 3, /*max_attempts=*/1));
  auto running = s.claim_next("me", 60, alive_all);
  REQUIRE(running.ok());
  REQUIRE(*running);
  auto failing = s.claim_next("other", 60, alive_all);
  REQUIRE(*failing);
  REQUIRE(s.fail_attempt((*failing)->item.id, "other", Progress{}, "boom")->value() ==
          ItemState::kFailed);

  CHECK(*s.cancel_job(job) == 2);  // the running item and the queued one
  auto items = *s.items(job);
  CHECK(items[0].state == ItemState::kCancelled);
  CHECK(items[1].state == ItemState::kFailed);
  CHECK(items[2].state == ItemState::kCancelled);
  CHECK_FALSE(
      *s.append_tokens((*running)->item.id, "me", Progress{0, std::vector<int32_t>{5}, 0, 0}));
  CHECK(s.tokens((*running)->item.id)->empty());

  CHECK(*s.retry_job(job) == 3);
  const auto requeued = *s.items(job);  // a copy: range-for would not extend the Result's life
  for (const auto& item : requeued) {
    CHECK(item.state == ItemState::kQueued);
    CHECK(item.attempts == 0);
    CHECK(!item.last_error);
  }
  auto summary = s.job_summary(job);
  CHECK(summary->queued == 3);
  CHECK(summary->tokens_planned == 3 * 10);
}

TEST_CASE("token ids round-trip through their blob form", "[runner][store]") {
  const std::vector<int32_t> ids = {0, 1, -1, 163839, INT32_MAX, INT32_MIN};
  const auto blob = ids_to_blob(ids);
  CHECK(blob.size() == ids.size() * 4);
  CHECK(blob[0] == 0);
  CHECK(blob[4] == 1);  // little-endian
  CHECK(blob_to_ids(blob) == ids);
}

}  // namespace
}  // namespace nj::runner
