// The store's work queue: claim order, exclusive claims across connections, stale leases,
// lease-guarded writes, and the transitions an item run makes.
#include <catch2/catch.hpp>
#include <cmath>
#include <mutex>
#include <set>
#include <thread>

#include "runner/store/job_store.h"
#include "tests/unit/runner/store/store_test_util.h"

namespace nj::runner {
namespace {

std::vector<int32_t> ids(std::initializer_list<int32_t> l) {
  return l;
}

TEST_CASE("claims follow job priority, then job order, then spec order", "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("first", 2)).ok());
  REQUIRE(s->submit(test_job("urgent", 2, 3, /*priority=*/5)).ok());
  REQUIRE(s->submit(test_job("second", 1)).ok());
  std::vector<std::string> order;
  for (;;) {
    auto c = s->claim_next("me", 60, alive_all);
    REQUIRE(c.ok());
    if (!*c) break;
    order.push_back((*c)->job.name + "/" + (*c)->item.custom_id);
    REQUIRE(*s->finish_item((*c)->item.id, "me", Progress{}, NewResult{"length", 2, std::nullopt}));
  }
  CHECK(order == std::vector<std::string>{"urgent/item-0", "urgent/item-1", "first/item-0",
                                          "first/item-1", "second/item-0"});
}

TEST_CASE("two connections claiming at once never take the same item", "[runner][queue]") {
  TempDir dir;
  {
    auto s = JobStore::open(dir.file("s.db"), true);
    REQUIRE(s.ok());
    REQUIRE((*s)->submit(test_job("many", 60)).ok());
  }
  std::mutex mu;
  std::vector<int64_t> taken;
  auto worker = [&](std::string owner) {
    auto s = JobStore::open(dir.file("s.db"), false);
    REQUIRE(s.ok());
    for (;;) {
      auto c = (*s)->claim_next(owner, 60, alive_all);
      REQUIRE(c.ok());
      if (!*c) return;
      {
        std::lock_guard<std::mutex> lock(mu);
        taken.push_back((*c)->item.id);
      }
      REQUIRE(*(*s)->finish_item((*c)->item.id, owner, Progress{0, ids({7}), 0, 0},
                                 NewResult{"length", 2, {}}));
    }
  };
  std::thread a(worker, "host/1/1"), b(worker, "host/2/2");
  a.join();
  b.join();
  CHECK(taken.size() == 60);
  CHECK(std::set<int64_t>(taken.begin(), taken.end()).size() == 60);
}

TEST_CASE("a lease held by a dead process is reclaimed at once with attempts + 1",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1, /*max_attempts=*/2)).ok());
  auto first = s->claim_next("host/100/5", 600, alive_all);
  REQUIRE(*first);
  REQUIRE(*s->append_tokens((*first)->item.id, "host/100/5", Progress{0, ids({4, 5}), 0.5, 0.25}));

  // While the owner lives and the lease holds, nobody else gets the item.
  CHECK_FALSE(*s->claim_next("host/200/6", 600, alive_all));
  // The owner is gone: reclaimed now, tokens kept, attempts counted.
  auto second = s->claim_next("host/200/6", 600, alive_none);
  REQUIRE(*second);
  CHECK((*second)->item.id == (*first)->item.id);
  CHECK((*second)->item.attempts == 1);
  CHECK((*second)->item.claims == 2);
  CHECK((*second)->tokens == ids({4, 5}));
  CHECK((*second)->item.last_error->find("host/100/5 died") != std::string::npos);
  // The dead owner's writes are refused and change nothing.
  CHECK_FALSE(*s->append_tokens((*first)->item.id, "host/100/5", Progress{2, ids({9}), 0, 0}));
  CHECK(*s->tokens((*first)->item.id) == ids({4, 5}));

  // Dying again reaches max_attempts: the item fails with the error kept, no more claims.
  CHECK_FALSE(*s->claim_next("host/300/7", 600, alive_none));
  auto items = *s->items((*first)->job.id);
  CHECK(items[0].state == ItemState::kFailed);
  CHECK(items[0].attempts == 2);
  CHECK(items[0].last_error->find("host/200/6 died") != std::string::npos);
  CHECK(s->events(std::nullopt, items[0].id)->back().kind == "failed");
}

TEST_CASE("a reclaim reports the items it fails for good (issue 35, item 1)", "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1, /*max_attempts=*/1)).ok());
  auto first = s->claim_next("host/100/5", 600, alive_all);
  REQUIRE(*first);
  std::vector<Reclaimed> reclaimed;
  CHECK_FALSE(*s->claim_next("host/200/6", 600, alive_none, {}, &reclaimed));
  REQUIRE(reclaimed.size() == 1);
  CHECK(reclaimed[0].item_id == (*first)->item.id);
  CHECK(reclaimed[0].job_id == (*first)->job.id);
  CHECK(reclaimed[0].custom_id == "item-0");
  CHECK(reclaimed[0].state == ItemState::kFailed);
  CHECK(reclaimed[0].charged);
  CHECK(reclaimed[0].error.find("host/100/5 died") != std::string::npos);
}

TEST_CASE(
    "a process death charges no item of its batch, twice, they run alone, where a death "
    "is charged (issue 35, item 2)",
    "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 3, /*max_attempts=*/1)).ok());
  auto die_in_a_batch = [&](const std::string& owner) {
    ClaimFilter held;
    for (int k = 0; k < 3; ++k) {
      auto c = s->claim_next(owner, 600, alive_all, held);
      REQUIRE(*c);
      held.held.insert((*c)->item.id);
    }
  };
  // Two deaths of a batch of three, each taken over by the next process: nobody charged.
  die_in_a_batch("host/100/1");
  std::vector<Reclaimed> reclaimed;
  auto next = s->claim_next("host/200/2", 600, alive_none, {}, &reclaimed);
  REQUIRE(*next);
  REQUIRE(reclaimed.size() == 3);
  for (const Reclaimed& r : reclaimed) {
    CHECK(r.state == ItemState::kQueued);
    CHECK_FALSE(r.charged);
    CHECK(r.error.find("no attempt is charged") != std::string::npos);
  }
  CHECK((*next)->item.attempts == 0);
  CHECK((*next)->item.batch_deaths == 1);
  CHECK_FALSE((*next)->alone());
  REQUIRE(*s->release_lease((*next)->item.id, "host/200/2", "test"));
  die_in_a_batch("host/300/3");
  auto alone = s->claim_next("host/400/4", 600, alive_none);
  REQUIRE(*alone);
  CHECK((*alone)->item.attempts == 0);
  CHECK((*alone)->item.batch_deaths == 2);
  CHECK((*alone)->alone());
  // Nothing joins a batch while it holds items: the other two run alone too.
  ClaimFilter held;
  held.held.insert((*alone)->item.id);
  CHECK_FALSE(*s->claim_next("host/400/4", 600, alive_all, held));
  // It dies alone: charged (max_attempts 1: failed); the others were never charged.
  reclaimed.clear();
  auto after = s->claim_next("host/500/5", 600, alive_none, {}, &reclaimed);
  REQUIRE(reclaimed.size() == 1);
  CHECK(reclaimed[0].item_id == (*alone)->item.id);
  CHECK(reclaimed[0].charged);
  CHECK(reclaimed[0].state == ItemState::kFailed);
  REQUIRE(*after);
  const std::vector<ItemRow> items = *s->items((*alone)->job.id);
  for (const ItemRow& i : items)
    if (i.id != (*alone)->item.id) CHECK(i.attempts == 0);
  // retry clears the deaths with the attempts.
  REQUIRE(*s->retry_job((*alone)->job.id) == 1);
  const std::vector<ItemRow> retried = *s->items((*alone)->job.id);
  for (const ItemRow& i : retried)
    if (i.id == (*alone)->item.id) CHECK(i.batch_deaths == 0);
}

TEST_CASE("an expired lease is reclaimed, a heartbeat keeps it", "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("host/1/1", 60, alive_all);
  REQUIRE(*c);
  const int64_t id = (*c)->item.id;
  now += 50;
  CHECK(s->heartbeat({id}, "host/1/1", 60)->empty());  // now expires at 1110
  now += 50;
  CHECK_FALSE(*s->claim_next("host/2/2", 60, alive_all));
  now += 20;
  auto taken = s->claim_next("host/2/2", 60, alive_all);
  REQUIRE(*taken);
  CHECK((*taken)->item.attempts == 1);
  CHECK((*taken)->item.last_error->find("expired") != std::string::npos);
  CHECK(*s->heartbeat({id}, "host/1/1", 60) == std::vector<int64_t>{id});
}

TEST_CASE("tokens must continue the stored ones", "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  REQUIRE(*s->append_tokens(id, "me", Progress{0, ids({1, 2, 3}), 0, 0}));
  auto gap = s->append_tokens(id, "me", Progress{5, ids({6}), 0, 0});
  REQUIRE_FALSE(gap.ok());
  CHECK(gap.status().code() == StatusCode::kInternal);
  REQUIRE(*s->append_tokens(id, "me", Progress{3, ids({4}), 0, 0}));
  CHECK(*s->tokens(id) == ids({1, 2, 3, 4}));
}

TEST_CASE("log-probabilities are stored with their tokens and read back in order",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  const std::vector<TokenLogprobs> first = {{-0.5f, {{7, -0.5f}, {3, -1.25f}}},
                                            {-2.0f, {{1, -0.1f}, {8, -2.0f}}}};
  const std::vector<TokenLogprobs> second = {{-0.0f, {{9, -0.0f}, {2, -30.5f}}}};
  const std::vector<int32_t> first_ids = ids({7, 8}), second_ids = ids({9}), bad_ids = ids({1, 2});
  Progress p{0, first_ids, 0, 0};  // Progress holds spans: the vectors outlive it
  p.logprobs = first;
  REQUIRE(*s->append_tokens(id, "me", p));
  Progress q{2, second_ids, 0, 0};
  q.logprobs = second;
  REQUIRE(*s->finish_item(id, "me", q, NewResult{"length", 2, std::nullopt}));
  auto back = s->token_logprobs(id);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const TokenLogprobs& want = i < 2 ? first[i] : second[0];
    CHECK((*back)[i].logprob == want.logprob);
    CHECK((*back)[i].top == want.top);
  }
  // A count that does not match the tokens is a bug, refused before anything is written.
  REQUIRE(s->submit(test_job("k", 1)).ok());
  auto c2 = s->claim_next("me", 60, alive_all);
  Progress bad{0, bad_ids, 0, 0};
  bad.logprobs = std::span<const TokenLogprobs>(first).first(1);
  CHECK(s->append_tokens((*c2)->item.id, "me", bad).status().code() == StatusCode::kInternal);
  CHECK(s->tokens((*c2)->item.id)->empty());
}

TEST_CASE("tokens stored without log-probabilities say so when they are asked for",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  REQUIRE(*s->append_tokens(id, "me", Progress{0, ids({1, 2}), 0, 0}));
  auto lp = s->token_logprobs(id);
  REQUIRE_FALSE(lp.ok());
  CHECK(lp.status().code() == StatusCode::kCorruption);
  CHECK_THAT(lp.status().message(),
             Catch::Contains("item " + std::to_string(id) +
                             ", output token 0: no log-probabilities stored"));
}

TEST_CASE("log-probabilities round-trip through their blob form", "[runner][store]") {
  const TokenLogprobs lp{-1.5f, {{163839, -0.25f}, {0, -1.5f}, {-1, -INFINITY}}};
  const std::vector<uint8_t> blob = logprobs_to_blob(lp);
  CHECK(blob.size() == 4 + 3 * 8);
  auto back = blob_to_logprobs(blob);
  REQUIRE(back.has_value());
  CHECK(back->logprob == lp.logprob);
  CHECK(back->top == lp.top);
  CHECK(blob_to_logprobs(logprobs_to_blob(TokenLogprobs{-3.0f, {}}))->top.empty());
  CHECK_FALSE(blob_to_logprobs(std::vector<uint8_t>(7)).has_value());
  CHECK_FALSE(blob_to_logprobs(std::vector<uint8_t>()).has_value());
}

TEST_CASE("finish stores the result with the done state, once", "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  REQUIRE(*s->append_tokens(id, "me", Progress{0, ids({10, 11}), 1.0, 0.5}));
  REQUIRE(*s->add_checkpoint(id, "me", Progress{2, ids({12}), 0, 0.25},
                             NewCheckpoint{5, 3, "cp/a", 100}));
  CHECK(s->checkpoints(id)->size() == 1);
  REQUIRE(*s->add_checkpoint(id, "me", Progress{3, {}, 0, 0}, NewCheckpoint{6, 3, "cp/a", 120}));
  auto cps = *s->checkpoints(id);
  REQUIRE(cps.size() == 1);  // one checkpoint per item: the newest
  CHECK(cps[0].position == 6);

  REQUIRE(*s->finish_item(id, "me", Progress{3, ids({13}), 0, 0.25},
                          NewResult{"length", 2, std::nullopt}));
  auto r = *s->result(id);
  REQUIRE(r);
  CHECK(r->output_ids == ids({10, 11, 12, 13}));
  CHECK(r->output_tokens == 4);
  CHECK(r->prompt_tokens == 2);
  CHECK(r->prefill_s == Approx(1.0));
  CHECK(r->decode_s == Approx(1.0));
  CHECK(s->checkpoints(id)->empty());
  auto item = (*s->items((*c)->job.id))[0];
  CHECK(item.state == ItemState::kDone);
  CHECK(!item.lease_owner);
  // A second finish (say, a stale process) is refused: the lease is gone.
  CHECK_FALSE(
      *s->finish_item(id, "me", Progress{4, {}, 0, 0}, NewResult{"length", 2, std::nullopt}));
  CHECK_FALSE(*s->claim_next("me", 60, alive_all));
}

TEST_CASE("a graceful release keeps attempts, failed attempts count up to max_attempts",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1, /*max_attempts=*/2)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  REQUIRE(*s->release_item(id, "me", Progress{0, ids({1}), 0, 0}, R"({"reason":"SIGTERM"})"));
  c = s->claim_next("me", 60, alive_all);
  CHECK((*c)->item.attempts == 0);
  CHECK((*c)->tokens == ids({1}));
  CHECK(s->fail_attempt(id, "me", Progress{1, ids({2}), 0, 0}, "engine error")->value() ==
        ItemState::kQueued);
  c = s->claim_next("me", 60, alive_all);
  CHECK((*c)->item.attempts == 1);
  CHECK((*c)->item.last_error == std::optional<std::string>("engine error"));
  CHECK(s->fail_attempt(id, "me", Progress{2, {}, 0, 0}, "engine error again")->value() ==
        ItemState::kFailed);
  CHECK(*s->tokens(id) == ids({1, 2}));
  CHECK_FALSE(*s->claim_next("me", 60, alive_all));
}

TEST_CASE("a lease recorded in this process's own name is stale when it claims",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  REQUIRE(*c);
  auto again = s->claim_next("me", 60, alive_all);  // an attempt that never released
  REQUIRE(*again);
  CHECK((*again)->item.attempts == 1);
}

TEST_CASE("a failed attempt with a retry wait is not claimed before it has passed",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1, /*max_attempts=*/3)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  REQUIRE(s->fail_attempt(id, "me", Progress{}, "no model", false, 30.0)->value() ==
          ItemState::kQueued);
  CHECK(*s->next_retry_at() == std::optional<double>(1030));
  CHECK_FALSE(*s->claim_next("me", 60, alive_all));
  now = 1029.9;
  CHECK_FALSE(*s->claim_next("me", 60, alive_all));
  now = 1030;
  c = s->claim_next("me", 60, alive_all);
  REQUIRE(*c);
  CHECK((*c)->item.attempts == 1);
  CHECK_FALSE((*c)->item.retry_at.has_value());
  CHECK_FALSE(s->next_retry_at()->has_value());
  // A final error fails the item whatever attempts are left.
  CHECK(s->fail_attempt(id, "me", Progress{}, "non-finite logits at position 3", true)->value() ==
        ItemState::kFailed);
}

TEST_CASE("a run that fails releases its lease: queued, attempts unchanged, an event",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  REQUIRE(*s->append_tokens(id, "me", Progress{0, ids({4, 5}), 0, 0}));
  CHECK_FALSE(*s->release_lease(id, "someone else", "disk full"));
  REQUIRE(*s->release_lease(id, "me", "run failed: database or disk is full"));
  CHECK_FALSE(*s->release_lease(id, "me", "again"));  // no longer ours
  auto items = s->items((*c)->job.id);
  CHECK((*items)[0].state == ItemState::kQueued);
  CHECK((*items)[0].attempts == 0);
  CHECK_FALSE((*items)[0].lease_owner.has_value());
  auto events = s->events(std::nullopt, id);
  CHECK(events->back().kind == "released");
  c = s->claim_next("me", 60, alive_all);
  CHECK((*c)->tokens == ids({4, 5}));
  CHECK((*c)->item.attempts == 0);
}

TEST_CASE("the numerics version is recorded per item, and a restart drops the output",
          "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  REQUIRE(s->submit(test_job("j", 1)).ok());
  auto c = s->claim_next("me", 60, alive_all);
  const int64_t id = (*c)->item.id;
  CHECK_FALSE((*c)->item.numerics_version.has_value());
  REQUIRE(*s->set_numerics_version(id, "me", 7));
  REQUIRE(*s->add_checkpoint(id, "me", Progress{0, ids({1, 2, 3}), 0, 0},
                             NewCheckpoint{5, 3, "checkpoints/item-1/state", 100}));
  CHECK_FALSE(*s->set_numerics_version(id, "other", 8));
  CHECK_FALSE(*s->restart_output(id, "other", 8, "{}"));
  REQUIRE(*s->restart_output(id, "me", 8, R"({"dropped_tokens":3})"));
  CHECK(s->tokens(id)->empty());
  CHECK(s->checkpoints(id)->empty());
  auto items = s->items((*c)->job.id);
  CHECK((*items)[0].tokens_done == 0);
  CHECK((*items)[0].numerics_version == std::optional<int>(8));
  CHECK(s->events(std::nullopt, id)->back().kind == "numerics_restart");
  REQUIRE(*s->append_tokens(id, "me", Progress{0, ids({9}), 0, 0}));
  NewResult r{"length", 2, std::nullopt};
  r.numerics_version = 8;
  REQUIRE(*s->finish_item(id, "me", Progress{1, {}, 0, 0}, r));
  CHECK((*s->items((*c)->job.id))[0].numerics_version == std::optional<int>(8));
}

TEST_CASE("the outcome of a job's output writes is recorded with the job", "[runner][queue]") {
  TempDir dir;
  double now = 1000;
  auto s = open_with_clock(dir.file("s.db"), now);
  auto job = s->submit(test_job("j", 1));
  REQUIRE(job.ok());
  CHECK_FALSE(s->find_job("j")->outputs_state.has_value());
  REQUIRE(s->record_outputs(*job, {}, std::string("out/r.jsonl: is a directory")).ok());
  auto row = s->find_job("j");
  CHECK(row->outputs_state == std::optional<std::string>("failed"));
  CHECK(row->outputs_error == std::optional<std::string>("out/r.jsonl: is a directory"));
  CHECK(s->job_summary(*job)->job.outputs_state == std::optional<std::string>("failed"));
  now = 1005;
  REQUIRE(s->record_outputs(*job, {"/x/r.jsonl"}, std::nullopt).ok());
  row = s->find_job("j");
  CHECK(row->outputs_state == std::optional<std::string>("written"));
  CHECK_FALSE(row->outputs_error.has_value());
  CHECK(row->outputs_at == std::optional<double>(1005));
  CHECK(s->events(*job, std::nullopt)->back().kind == "outputs_written");
}

}  // namespace
}  // namespace nj::runner
