// Shard submits (JobStore::submit_shard): at most once per home, refused when the spec or
// the sharding changed; and the rollback journal a shard's home uses.
#include <catch2/catch.hpp>

#include "runner/store/job_store.h"
#include "runner/store/sqlite.h"
#include "tests/unit/runner/store/store_test_util.h"

namespace nj::runner {
namespace {

int64_t count_rows(const std::string& path, const std::string& sql) {
  auto db = sql::Db::open(path, false, 1000);
  REQUIRE(db.ok());
  auto s = (*db)->prepare(sql);
  REQUIRE(s.ok());
  REQUIRE(*s->step());
  return s->int64(0);
}

std::string journal_mode(const std::string& path) {
  auto db = sql::Db::open(path, false, 1000);
  REQUIRE(db.ok());
  auto s = (*db)->prepare("PRAGMA journal_mode");
  REQUIRE(s.ok());
  REQUIRE(*s->step());
  return s->text(0);
}

// The file format's read/write version bytes (offsets 18, 19): 1 = rollback journal, 2 = WAL.
int header_journal(const std::string& path) {
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() >= 100);
  CHECK(bytes[18] == bytes[19]);
  return bytes[18];
}

TEST_CASE("a shard submitted twice to one home is queued once", "[runner][store][shard]") {
  TempDir dir;
  auto store = JobStore::open(dir.file("s.db"), true);
  REQUIRE(store.ok());
  auto first = (*store)->submit_shard(test_job("night", 4), "1/3");
  REQUIRE(first.ok());
  CHECK(first->created);
  auto again = (*store)->submit_shard(test_job("night", 4), "1/3");
  REQUIRE(again.ok());
  CHECK_FALSE(again->created);
  CHECK(again->job_id == first->job_id);
  CHECK(count_rows(dir.file("s.db"), "SELECT count(*) FROM jobs") == 1);
  CHECK(count_rows(dir.file("s.db"), "SELECT count(*) FROM items") == 4);
  CHECK(count_rows(dir.file("s.db"), "SELECT count(*) FROM events WHERE kind = 'submitted'") == 1);
  CHECK(count_rows(dir.file("s.db"), "SELECT count(*) FROM jobs WHERE shard = '1/3'") == 1);
}

TEST_CASE("a re-submitted shard keeps its progress: nothing is reset", "[runner][store][shard]") {
  TempDir dir;
  double now = 1000;
  auto store = open_with_clock(dir.file("s.db"), now);
  auto first = store->submit_shard(test_job("night", 2), "0/2");
  REQUIRE(first.ok());
  auto claim = store->claim_next("me", 60, alive_all);
  REQUIRE(claim.ok());
  REQUIRE(claim->has_value());
  REQUIRE(*store->finish_item((*claim)->item.id, "me", Progress{}, NewResult{"length", 2, {}, {}}));
  REQUIRE(store->submit_shard(test_job("night", 2), "0/2").ok());
  auto items = store->items(first->job_id);
  REQUIRE(items.ok());
  CHECK((*items)[0].state == ItemState::kDone);
  CHECK((*items)[1].state == ItemState::kQueued);
}

TEST_CASE("a shard submit of a changed spec or another sharding is refused and writes nothing",
          "[runner][store][shard]") {
  TempDir dir;
  auto store = JobStore::open(dir.file("s.db"), true);
  REQUIRE(store.ok());
  REQUIRE((*store)->submit_shard(test_job("night", 3), "0/3").ok());

  NewJob changed = test_job("night", 3);
  changed.items[1].prompt_ids = {1, 2, 3};
  auto r = (*store)->submit_shard(changed, "0/3");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kFailedPrecondition);
  CHECK(r.status().message().find("'night'") != std::string::npos);
  CHECK(r.status().message().find("spec changed") != std::string::npos);

  auto other = (*store)->submit_shard(test_job("night", 3), "0/4");
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().message().find("shard 0/3") != std::string::npos);
  CHECK(count_rows(dir.file("s.db"), "SELECT count(*) FROM jobs") == 1);
  CHECK(count_rows(dir.file("s.db"), "SELECT count(*) FROM items") == 3);

  // Another job name is another job: queued.
  auto second = (*store)->submit_shard(test_job("other", 1), "0/3");
  REQUIRE(second.ok());
  CHECK(second->created);
}

TEST_CASE("the digest covers items and settings, not the spec's path", "[runner][store][shard]") {
  NewJob a = test_job("night", 2), b = test_job("night", 2);
  b.spec_path = "/elsewhere/night.yaml";
  CHECK(job_digest(a) == job_digest(b));
  CHECK(job_digest(a).size() == 16);
  b.items[0].params_json = R"({"max_tokens":11})";
  CHECK(job_digest(a) != job_digest(b));
  NewJob c = test_job("night", 2);
  c.items[1].custom_id = "renamed";
  CHECK(job_digest(a) != job_digest(c));
}

TEST_CASE("a store created with a rollback journal keeps it, a WAL store keeps WAL",
          "[runner][store][shard]") {
  TempDir dir;
  StoreOptions rollback;
  rollback.journal = sql::Journal::kRollback;
  {
    auto store = JobStore::open(dir.file("r.db"), true, rollback);
    REQUIRE(store.ok());
    REQUIRE((*store)->submit(test_job("a", 2)).ok());
  }
  CHECK(journal_mode(dir.file("r.db")) == "truncate");
  {
    auto store = JobStore::open(dir.file("r.db"), false);  // default options ask for WAL
    REQUIRE(store.ok());
    auto claim = (*store)->claim_next("me", 60, alive_all);  // a write in rollback mode
    REQUIRE(claim.ok());
    REQUIRE(claim->has_value());
  }
  CHECK(journal_mode(dir.file("r.db")) == "truncate");
  CHECK(header_journal(dir.file("r.db")) == 1);
  CHECK_FALSE(std::filesystem::exists(dir.file("r.db-wal")));
  {
    auto store = JobStore::open(dir.file("w.db"), true);
    REQUIRE(store.ok());
    REQUIRE((*store)->submit(test_job("a", 1)).ok());
  }
  {
    auto store = JobStore::open(dir.file("w.db"), false, rollback);
    REQUIRE(store.ok());
  }
  CHECK(journal_mode(dir.file("w.db")) == "wal");
  CHECK(header_journal(dir.file("w.db")) == 2);
}

}  // namespace
}  // namespace nj::runner
