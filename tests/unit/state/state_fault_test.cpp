// State checkpoint saves under injected faults: a failed write, fsync, rename or directory
// sync at any step reports the error and leaves the previous checkpoint loadable; a crash
// at any step (with or without losing unsynced data) leaves exactly the previous or the
// new checkpoint; a disk that fills up mid-append is survived; the next save recovers.
#include <catch2/catch.hpp>
#include <filesystem>

#include "engine/state/state_file.h"
#include "engine/state/state_format.h"
#include "tests/unit/state/fault_env.h"
#include "tests/unit/state/state_test_util.h"

namespace nj::state_testing {
namespace {

const std::vector<int32_t> kPrompt = {3, 7, 11};
const SamplingParams kSampled{0.8f, 0, 0.9f, 42};

enum class Scenario {
  kFirstSave,      // no checkpoint yet
  kAppend,         // the writer that saved A appends B's new positions
  kNewGeneration,  // another writer (a new process) replaces A with a new generation
};
const char* scenario_name(Scenario s) {
  switch (s) {
    case Scenario::kFirstSave:
      return "first save";
    case Scenario::kAppend:
      return "append";
    case Scenario::kNewGeneration:
      return "new generation";
  }
  return "?";
}

// A directory holding checkpoint A (unless kFirstSave) and a writer about to save B,
// both writers using `env`.
struct Setup {
  Setup(Model& model, Scenario scenario) : gen(model, kPrompt, kSampled) {
    gen.step(4);
    a = gen.checkpoint();
    writer = std::make_unique<StateFileWriter>(env, path());
    if (scenario != Scenario::kFirstSave) REQUIRE(writer->save(model, a.state, a.sampler).ok());
    if (scenario == Scenario::kNewGeneration)
      writer = std::make_unique<StateFileWriter>(env, path());
    gen.step(5);
    b = gen.checkpoint();
    env.reset();
  }
  std::string path() const { return dir.file("state"); }

  TempDir dir;
  FaultEnv env;
  Generation gen;
  StateCheckpoint a, b;
  std::unique_ptr<StateFileWriter> writer;
};

// Which checkpoint the directory holds: "A", "B", "none", or the load error.
std::string loaded(const std::string& path, const Model& model, const Setup& s) {
  auto r = load_state_file(*Env::posix(), path, model);
  if (!r.ok()) return r.status().code() == StatusCode::kNotFound ? "none" : r.status().to_string();
  if (checkpoint_difference(*r, s.a) == "") return "A";
  if (checkpoint_difference(*r, s.b) == "") return "B";
  return "another state";
}

// The operations of a clean save of B, and where in them the new head is renamed into
// place and made durable.
struct CleanSave {
  std::vector<std::string> log;
  uint64_t rename_op = 0, commit_op = 0;
};
CleanSave clean_save(Model& model, Scenario scenario) {
  Setup s(model, scenario);
  REQUIRE(s.writer->save(model, s.b.state, s.b.sampler).ok());
  CleanSave c;
  c.log = s.env.log();
  bool renamed = false;
  for (uint64_t i = 0; i < c.log.size(); ++i) {
    if (c.log[i].find(" rename " + s.path() + ".tmp") != std::string::npos) {
      c.rename_op = i;
      renamed = true;
    }
    if (renamed && c.log[i].find(" sync-dir ") != std::string::npos && c.commit_op == 0)
      c.commit_op = i;
  }
  REQUIRE(renamed);
  REQUIRE(c.commit_op > c.rename_op);
  return c;
}

std::string previous(Scenario s) {
  return s == Scenario::kFirstSave ? "none" : "A";
}

// After any failure, a save by a new writer succeeds and leaves only the head and its segment.
void check_next_save_recovers(Model& model, Setup& s) {
  FaultEnv env;  // no faults
  StateFileWriter w(env, s.path());
  REQUIRE(w.save(model, s.b.state, s.b.sampler).ok());
  CHECK(loaded(s.path(), model, s) == "B");
  const auto names = s.dir.names();
  CHECK(names.size() == 2);
  CHECK(names[0] == "state");
  CHECK(state_format::is_segment_name_of(names[1], "state"));
}

TEST_CASE("a save failing at any file operation reports it and keeps the previous checkpoint",
          "[state][fault]") {
  auto model = open_test_model(generated_model("tiny"));
  for (Scenario sc : {Scenario::kFirstSave, Scenario::kAppend, Scenario::kNewGeneration}) {
    const CleanSave clean = clean_save(*model, sc);
    for (uint64_t i = 0; i < clean.log.size(); ++i) {
      Setup s(*model, sc);
      s.env.fail_op(i, StatusCode::kIOError);
      Status st = s.writer->save(*model, s.b.state, s.b.sampler);
      INFO(scenario_name(sc) << ": failing operation " << clean.log[i] << "\n" << st.to_string());
      if (i > clean.commit_op) {
        // Only the removal of an older segment: best effort, the save stands.
        CHECK(clean.log[i].find(" remove ") != std::string::npos);
        CHECK(st.ok());
      } else {
        REQUIRE_FALSE(st.ok());
        CHECK(st.code() == StatusCode::kIOError);
        CHECK(st.message().find("injected") != std::string::npos);
        CHECK(st.message().find(s.dir.path()) != std::string::npos);
      }
      // A failed directory fsync after the head's rename leaves the new (complete) head.
      CHECK(loaded(s.path(), *model, s) == (i >= clean.commit_op ? "B" : previous(sc)));
      // The same writer's retry succeeds (and starts a new generation after a failure).
      Status retry = s.writer->save(*model, s.b.state, s.b.sampler);
      INFO(retry.to_string());
      REQUIRE(retry.ok());
      CHECK(loaded(s.path(), *model, s) == "B");
      check_next_save_recovers(*model, s);
    }
  }
}

TEST_CASE("a crash at any instant of a save leaves exactly the previous or the new checkpoint",
          "[state][fault][crash]") {
  auto model = open_test_model(generated_model("tiny"));
  for (Scenario sc : {Scenario::kFirstSave, Scenario::kAppend, Scenario::kNewGeneration}) {
    const CleanSave clean = clean_save(*model, sc);
    for (bool power_loss : {false, true}) {
      for (uint64_t i = 0; i <= clean.log.size(); ++i) {
        Setup s(*model, sc);
        s.env.crash_at(i);
        Status st = s.writer->save(*model, s.b.state, s.b.sampler);
        if (power_loss) s.env.lose_unsynced();
        INFO(scenario_name(sc) << ": crash at operation "
                               << (i < clean.log.size() ? clean.log[i] : std::string("(none)"))
                               << (power_loss ? ", then power loss" : "") << "\n"
                               << st.to_string());
        CHECK(st.ok() == (i > clean.commit_op));
        // The new checkpoint exists once the head is renamed, and survives a power loss
        // once its directory is synced.
        const uint64_t visible_after = power_loss ? clean.commit_op : clean.rename_op;
        CHECK(loaded(s.path(), *model, s) == (i > visible_after ? "B" : previous(sc)));
        check_next_save_recovers(*model, s);
      }
    }
  }
}

TEST_CASE("a disk that fills up in the middle of an append keeps the previous checkpoint",
          "[state][fault]") {
  auto model = open_test_model(generated_model("tiny"));
  Setup s(*model, Scenario::kAppend);
  // The B save starts by appending the record to the segment: header, tokens, MLA rows.
  s.env.fail_op(2, StatusCode::kResourceExhausted, 100);
  Status st = s.writer->save(*model, s.b.state, s.b.sampler);
  INFO(st.to_string() << "\n" << s.env.log()[2]);
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(s.env.log()[2].find(" append " + s.path() + ".seg-") != std::string::npos);
  CHECK(st.message().find("appending to " + s.path() + ".seg-") != std::string::npos);
  CHECK(loaded(s.path(), *model, s) == "A");  // the torn record lies past the committed length
  // The writer does not append after a tear: its next save writes a new generation.
  REQUIRE(s.writer->save(*model, s.b.state, s.b.sampler).ok());
  CHECK(s.writer->last_save().full);
  CHECK(loaded(s.path(), *model, s) == "B");
  CHECK(s.dir.names().size() == 2);
}

TEST_CASE("failing fsyncs fail the save and keep the previous checkpoint", "[state][fault]") {
  auto model = open_test_model(generated_model("tiny"));
  for (Scenario sc : {Scenario::kFirstSave, Scenario::kAppend, Scenario::kNewGeneration}) {
    INFO(scenario_name(sc));
    for (FsOp op : {FsOp::kSync, FsOp::kSyncDir}) {
      Setup s(*model, sc);
      s.env.fail_every(op);
      Status st = s.writer->save(*model, s.b.state, s.b.sampler);
      INFO(st.to_string());
      CHECK(st.code() == StatusCode::kIOError);
      CHECK(st.message().find(op == FsOp::kSync ? "fdatasync" : "directory fsync") !=
            std::string::npos);
      // An append syncs no directory before the head's rename: its failing directory
      // fsync is the one after it, which leaves the new head in place.
      const bool after_rename = op == FsOp::kSyncDir && sc == Scenario::kAppend;
      CHECK(loaded(s.path(), *model, s) == (after_rename ? "B" : previous(sc)));
    }
  }
}

}  // namespace
}  // namespace nj::state_testing
