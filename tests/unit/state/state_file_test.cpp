// State checkpoints on a generated model with every mechanism (the `tiny` preset: KDA,
// MLA, dense layer 0, MXFP4 MoE, attention-residual blocks): round trip bit for bit,
// continuation equal to the uninterrupted run, appends that cost only the new positions,
// new generations and their cleanup.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/ops/numerics.h"
#include "engine/state/state_file.h"
#include "engine/state/state_format.h"
#include "tests/unit/state/fault_env.h"
#include "tests/unit/state/state_test_util.h"

namespace nj::state_testing {
namespace {

const std::vector<int32_t> kPrompt = {3, 7, 11};
const SamplingParams kGreedy{};
const SamplingParams kSampled{0.8f, 0, 0.9f, 42};

StateCheckpoint load_ok(const std::string& path, const Model& model) {
  auto cp = load_state_file(*Env::posix(), path, model);
  INFO(cp.status().to_string());
  REQUIRE(cp.ok());
  return std::move(cp).value();
}

void save_ok(StateFileWriter& w, const Model& model, const StateCheckpoint& cp) {
  Status s = w.save(model, cp.state, cp.sampler);
  INFO(s.to_string());
  REQUIRE(s.ok());
}

size_t segment_count(const TempDir& dir) {
  size_t n = 0;
  for (const auto& name : dir.names()) n += state_format::is_segment_name_of(name, "state") ? 1 : 0;
  return n;
}

TEST_CASE("a saved state loads back bit for bit", "[state]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  for (const SamplingParams& params : {kGreedy, kSampled}) {
    Generation g(*model, kPrompt, params);
    g.step(6);
    StateFileWriter w(*Env::posix(), dir.file("state"));
    save_ok(w, *model, g.checkpoint());
    CHECK(w.last_save().full);
    CHECK(checkpoint_difference(load_ok(dir.file("state"), *model), g.checkpoint()) == "");
  }
}

TEST_CASE("an empty state (position 0, no logits yet) round-trips", "[state]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  Session session(*model);
  const StateCheckpoint cp{session.state(), {kSampled, RngState{kSampled.seed}}};
  StateFileWriter w(*Env::posix(), dir.file("state"));
  save_ok(w, *model, cp);
  StateCheckpoint got = load_ok(dir.file("state"), *model);
  CHECK(checkpoint_difference(got, cp) == "");
  CHECK(got.state.position == 0);
  CHECK(got.state.last_logits.empty());
}

TEST_CASE("restoring at every cut point continues exactly like the uninterrupted run",
          "[state][resume]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  constexpr int kTokens = 32;
  for (const SamplingParams& params : {kGreedy, kSampled}) {
    Generation whole(*model, kPrompt, params);
    const std::vector<int32_t> expected = whole.step(kTokens);
    for (int k = 0; k <= kTokens; ++k) {
      Generation first(*model, kPrompt, params);
      std::vector<int32_t> got = first.step(k);
      StateFileWriter w(*Env::posix(), dir.file("state"));
      save_ok(w, *model, first.checkpoint());
      StateCheckpoint cp = load_ok(dir.file("state"), *model);
      Session session(*model);
      session.set_state(std::move(cp.state));
      Sampler sampler(cp.sampler.params);
      sampler.set_rng(cp.sampler.rng);
      for (int i = k; i < kTokens; ++i) {
        got.push_back(sampler.sample(session.last_logits()));
        REQUIRE(session.feed(std::span<const int32_t>(&got.back(), 1)).ok());
      }
      INFO("temperature " << params.temperature << ", cut after " << k << " tokens");
      CHECK(got == expected);
    }
  }
}

TEST_CASE("a later save by the same writer appends only the new positions", "[state][append]") {
  auto model = open_test_model(generated_model("tiny"));
  const uint64_t per_position = state_format::shape_of(model->config()).position_bytes();
  TempDir dir;
  FaultEnv env;  // counts the bytes written
  StateFileWriter w(env, dir.file("state"));
  Generation g(*model, kPrompt, kSampled);
  g.step(2);
  save_ok(w, *model, g.checkpoint());
  const uint64_t head_bytes = w.last_save().head_bytes;
  CHECK(w.last_save().full);
  // The bytes a save writes do not depend on how long the context already is.
  for (int context : {5, 40, 120}) {
    g.step(context - static_cast<int>(g.session.position()) + static_cast<int>(kPrompt.size()));
    save_ok(w, *model, g.checkpoint());
    g.step(3);
    env.reset();
    save_ok(w, *model, g.checkpoint());
    INFO("context " << context);
    CHECK_FALSE(w.last_save().full);
    CHECK(w.last_save().segment_bytes == state_format::kRecordHeaderBytes + 3 * per_position);
    CHECK(w.last_save().head_bytes == head_bytes);
    CHECK(env.appended_bytes() == head_bytes + w.last_save().segment_bytes);
    CHECK(checkpoint_difference(load_ok(dir.file("state"), *model), g.checkpoint()) == "");
  }
  // A save with no new position rewrites only the head.
  env.reset();
  save_ok(w, *model, g.checkpoint());
  CHECK(env.appended_bytes() == head_bytes);
  CHECK(checkpoint_difference(load_ok(dir.file("state"), *model), g.checkpoint()) == "");
  CHECK(segment_count(dir) == 1);
}

TEST_CASE(
    "a state that does not extend the last save starts a new generation and removes the old one",
    "[state][append]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  StateFileWriter w(*Env::posix(), dir.file("state"));
  Generation a(*model, kPrompt, kGreedy);
  a.step(8);
  save_ok(w, *model, a.checkpoint());
  // Another branch from the same prompt: shorter, then with different tokens.
  Generation b(*model, kPrompt, kSampled);
  b.step(4);
  save_ok(w, *model, b.checkpoint());
  CHECK(w.last_save().full);
  CHECK(checkpoint_difference(load_ok(dir.file("state"), *model), b.checkpoint()) == "");
  Generation c(*model, {3, 7, 12}, kSampled);
  c.step(9);
  save_ok(w, *model, c.checkpoint());
  CHECK(w.last_save().full);
  CHECK(checkpoint_difference(load_ok(dir.file("state"), *model), c.checkpoint()) == "");
  CHECK(segment_count(dir) == 1);
  CHECK(dir.names().size() == 2);  // the head and its segment
}

TEST_CASE("a changed MLA row already saved forces a new generation", "[state][append]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  StateFileWriter w(*Env::posix(), dir.file("state"));
  Generation g(*model, kPrompt, kGreedy);
  g.step(4);
  save_ok(w, *model, g.checkpoint());
  g.step(2);
  StateCheckpoint cp = g.checkpoint();
  const int mla = state_format::shape_of(model->config()).mla_layers.front();
  const size_t kvl = static_cast<size_t>(model->config().kv_lora_rank);
  cp.state.layers[static_cast<size_t>(mla)].latent[(kPrompt.size() + 4 - 1) * kvl] +=
      1.0f;  // last saved row
  save_ok(w, *model, cp);
  CHECK(w.last_save().full);
  CHECK(checkpoint_difference(load_ok(dir.file("state"), *model), cp) == "");
}

TEST_CASE("after max_records_per_segment appends the writer rewrites the segment",
          "[state][append]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  StateFileWriter w(*Env::posix(), dir.file("state"), StateFileWriterOptions{3});
  Generation g(*model, kPrompt, kGreedy);
  std::vector<bool> full;
  for (int i = 0; i < 9; ++i) {
    g.step(1);
    save_ok(w, *model, g.checkpoint());
    full.push_back(w.last_save().full);
  }
  // The first save writes record 1, two appends fill the segment to 3 records.
  CHECK(full == std::vector<bool>{true, false, false, true, false, false, true, false, false});
  CHECK(checkpoint_difference(load_ok(dir.file("state"), *model), g.checkpoint()) == "");
  CHECK(segment_count(dir) == 1);
}

TEST_CASE("a new generation removes stale segments of the same checkpoint only", "[state]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  const std::vector<std::string> keep = {"other.seg-0123456789abcdef", "state.seg-0123",
                                         "state.segment", "state.seg-0123456789abcdeg"};
  for (const auto& n : keep) write_bytes(dir.file(n), "x");
  write_bytes(dir.file("state.seg-0123456789abcdef"), "stale");
  write_bytes(dir.file("state.seg-fedcba9876543210.tmp"), "stale temp");
  Generation g(*model, kPrompt, kGreedy);
  g.step(2);
  StateFileWriter w(*Env::posix(), dir.file("state"));
  save_ok(w, *model, g.checkpoint());
  for (const auto& n : keep) CHECK(std::filesystem::exists(dir.file(n)));
  CHECK_FALSE(std::filesystem::exists(dir.file("state.seg-0123456789abcdef")));
  CHECK_FALSE(std::filesystem::exists(dir.file("state.seg-fedcba9876543210.tmp")));
  CHECK(segment_count(dir) == 1);
}

TEST_CASE("a checkpoint records the engine numerics version, and another version is refused",
          "[state][numerics]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  Generation g(*model, kPrompt, kSampled);
  g.step(4);
  StateFileWriter w(*Env::posix(), dir.file("state"));
  save_ok(w, *model, g.checkpoint());
  std::string head = read_bytes(dir.file("state"));
  CHECK(state_format::get_u32(head.data() + 8) == state_format::kVersion);
  CHECK(state_format::get_u32(head.data() + 44) == kNumericsVersion);
  CHECK(load_ok(dir.file("state"), *model).numerics_version == kNumericsVersion);
  // The same file as a binary of the next arithmetic would have written it.
  const uint32_t other = kNumericsVersion + 1;
  std::memcpy(head.data() + 44, &other, 4);
  const uint64_t hash = state_format::hash64(head.data(), 48);
  std::memcpy(head.data() + 48, &hash, 8);
  write_bytes(dir.file("state"), head);
  auto r = load_state_file(*Env::posix(), dir.file("state"), *model);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kFailedPrecondition);
  CHECK(r.status().message().find("numerics version " + std::to_string(other)) !=
        std::string::npos);
  CHECK(r.status().message().find("this binary computes with version " +
                                  std::to_string(kNumericsVersion)) != std::string::npos);
  auto any = load_state_file(*Env::posix(), dir.file("state"), model->config(),
                             model->fingerprint(), StateNumerics::kAny);
  REQUIRE(any.ok());
  CHECK(any->numerics_version == other);
  CHECK(any->state.tokens == g.checkpoint().state.tokens);
}

TEST_CASE("read_state_file_info reads position and fingerprint without a model", "[state]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  Generation g(*model, kPrompt, kSampled);
  g.step(5);
  StateFileWriter w(*Env::posix(), dir.file("state"));
  save_ok(w, *model, g.checkpoint());
  auto info = read_state_file_info(*Env::posix(), dir.file("state"));
  INFO(info.status().to_string());
  REQUIRE(info.ok());
  CHECK(info->position == static_cast<int64_t>(kPrompt.size()) + 5);
  CHECK(info->fingerprint == model->fingerprint());
  CHECK(read_state_file_info(*Env::posix(), dir.file("none")).status().code() ==
        StatusCode::kNotFound);
  write_bytes(dir.file("state"), "NJSTHEAD but not much more");
  CHECK(read_state_file_info(*Env::posix(), dir.file("state")).status().code() ==
        StatusCode::kCorruption);
}

TEST_CASE("the head may be renamed: it names its segment", "[state]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  Generation g(*model, kPrompt, kSampled);
  g.step(3);
  StateFileWriter w(*Env::posix(), dir.file("state"));
  save_ok(w, *model, g.checkpoint());
  std::filesystem::rename(dir.file("state"), dir.file("renamed"));
  CHECK(checkpoint_difference(load_ok(dir.file("renamed"), *model), g.checkpoint()) == "");
}

TEST_CASE("the writer refuses a state that does not fit the model and writes nothing", "[state]") {
  auto model = open_test_model(generated_model("tiny"));
  TempDir dir;
  Generation g(*model, kPrompt, kGreedy);
  g.step(2);
  StateFileWriter w(*Env::posix(), dir.file("state"));
  StateCheckpoint cp = g.checkpoint();
  cp.state.tokens.pop_back();
  Status s = w.save(*model, cp.state, cp.sampler);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("tokens") != std::string::npos);
  cp = g.checkpoint();
  cp.state.layers[1].S.resize(3);
  s = w.save(*model, cp.state, cp.sampler);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("KDA layer 1 S") != std::string::npos);
  CHECK(dir.names().empty());
}

TEST_CASE("a checkpoint written by format version 1 still reads, as unrecorded numerics",
          "[state][compat]") {
  // tests/unit/state/data/v1: written by the first version of the format (see made_by).
  const std::string dir = std::string(NJ_SOURCE_DIR) + "/tests/unit/state/data/v1";
  std::ifstream in(dir + "/expected.json");
  REQUIRE(in.good());
  const auto want = nlohmann::json::parse(in);
  auto model = open_test_model(generated_model(want["model"]["preset"], want["model"]["seed"]));
  // Format 1 recorded no numerics version: it is never continued as this binary's state...
  auto strict = load_state_file(*Env::posix(), dir + "/state.bin", *model);
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.status().code() == StatusCode::kFailedPrecondition);
  CHECK(strict.status().message().find("before numerics versions were recorded") !=
        std::string::npos);
  auto info = read_state_file_info(*Env::posix(), dir + "/state.bin");
  REQUIRE(info.ok());
  CHECK(info->numerics_version == 0);
  // ... but its bytes still read, every field where it belongs.
  auto any = load_state_file(*Env::posix(), dir + "/state.bin", model->config(),
                             model->fingerprint(), StateNumerics::kAny);
  INFO(any.status().to_string());
  REQUIRE(any.ok());
  StateCheckpoint cp = std::move(any).value();
  CHECK(cp.numerics_version == 0);
  CHECK(cp.state.position == want["position"].get<int64_t>());
  CHECK(cp.state.tokens == want["tokens"].get<std::vector<int32_t>>());
  CHECK(cp.sampler.params.temperature == want["temperature"].get<float>());
  CHECK(cp.sampler.params.top_k == want["top_k"].get<int>());
  CHECK(cp.sampler.params.top_p == want["top_p"].get<float>());
  CHECK(cp.sampler.params.seed == want["seed"].get<uint64_t>());
  CHECK(cp.sampler.rng.s == want["rng"].get<uint64_t>());
  // The saved logits are the ones the model computes after these tokens (to within the
  // tolerance the engine keeps against the reference, so kernel changes do not break it).
  Session fresh(*model);
  REQUIRE(fresh.feed(cp.state.tokens).ok());
  REQUIRE(cp.state.last_logits.size() == fresh.last_logits().size());
  double worst = 0;
  for (size_t i = 0; i < cp.state.last_logits.size(); ++i)
    worst = std::max(
        worst, static_cast<double>(std::fabs(cp.state.last_logits[i] - fresh.last_logits()[i])));
  CHECK(worst <= 1e-4);
  // And every carried tensor lands where it belongs.
  for (size_t l = 0; l < cp.state.layers.size(); ++l) {
    const LayerState &got = cp.state.layers[l], &ref = fresh.state().layers[l];
    auto close = [](const std::vector<float>& a, const std::vector<float>& b) {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (std::fabs(a[i] - b[i]) > 1e-4f) return false;
      return true;
    };
    INFO("layer " << l);
    CHECK(close(got.S, ref.S));
    CHECK(close(got.conv, ref.conv));
    CHECK(close(got.latent, ref.latent));
    CHECK(close(got.rope, ref.rope));
  }
}

}  // namespace
}  // namespace nj::state_testing
