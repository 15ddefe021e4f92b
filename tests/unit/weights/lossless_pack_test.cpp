// The lossless pack (engine/weights/pack.h) in the engine: the same tokens and logits, bit for
// bit, as the raw pack and the shards under every budget and SIMD level, whether units are
// streamed, held compressed in RAM or pinned; a flipped byte stops the run naming its
// block; a damaged manifest is refused with its reason.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/runtime/model.h"
#include "engine/ops/cpu.h"
#include "engine/weights/pack.h"
#include "engine/weights/stored_unit.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "tests/unit/model/test_models.h"

namespace nj {
namespace {

using testing::TempDir;

struct Run {
  Status status;
  std::vector<float> logits;    // every position of prompt + continuation
  std::vector<int32_t> greedy;  // decoded one token at a time
  WeightStats stats;
  ResidencyPlan plan;
};

struct Variant {
  std::string name;
  std::string pack_dir;  // "" with use_pack = false: the shards
  PinCompressed pin = PinCompressed::kAuto;
};

ModelOptions options_for(const Variant& v, uint64_t budget, int context) {
  ModelOptions o;
  o.memory_bytes = budget;
  o.use_pack = !v.pack_dir.empty();
  o.pack_dir = v.pack_dir;
  o.plan.prefill_chunk = 16;
  o.plan.max_context = context;
  o.plan.all_logits = true;
  o.plan.pin_compressed = v.pin;
  o.streaming.io_threads = 3;
  o.streaming.chunk_bytes = 64u << 10;
  return o;
}

// The prompt, then `steps` greedy tokens one at a time, on an open model.
Run run_on(Model& model, const std::vector<int32_t>& prompt, int steps) {
  Run r;
  r.plan = model.plan();
  {
    Session s(model, SessionOptions{16});
    r.status = s.feed(prompt, &r.logits);
    for (int i = 0; i < steps && r.status.ok(); ++i) {
      const int32_t next[1] = {argmax(s.last_logits())};
      r.greedy.push_back(next[0]);
      std::vector<float> row;
      r.status = s.feed(next, &row);
      r.logits.insert(r.logits.end(), row.begin(), row.end());
    }
  }
  r.stats = model.weights().stats();
  return r;
}

Run run(const std::string& dir, const ModelOptions& o, const std::vector<int32_t>& prompt,
        int steps) {
  auto model = Model::open(dir, o);
  if (!model.ok()) {
    Run r;
    r.status = model.status();
    return r;
  }
  return run_on(**model, prompt, steps);
}

// The bytes every lossless unit of the pack in `pack_dir` takes held compressed.
uint64_t held_sum(const std::string& model_dir, const std::string& pack_dir) {
  std::string warning;
  auto headers = open_model_headers(model_dir, true, &warning, pack_dir);
  REQUIRE(headers.ok());
  uint64_t n = 0;
  for (int l = 0; l <= headers->config.layers; ++l) {
    const UnitLayout& u =
        l == headers->config.layers ? headers->layout->head().unit : headers->layout->layer(l).unit;
    n += u.extents.at(0).length;
  }
  return n;
}

uint64_t minimum(const std::string& dir, const Variant& v, const ModelOptions& o) {
  std::string warning;
  auto headers = open_model_headers(dir, !v.pack_dir.empty(), &warning, v.pack_dir);
  REQUIRE(headers.ok());
  REQUIRE(warning.empty());
  PlanOptions po = o.plan;
  po.io_threads = o.streaming.io_threads;
  auto plan = plan_residency(*headers->layout, 0, po);
  REQUIRE(plan.ok());
  return plan->min_memory_bytes;
}

Status pack_into(const std::string& model_dir, const std::string& out, const PackOptions& options) {
  std::filesystem::create_directories(out);
  NJ_ASSIGN_OR_RETURN(ModelConfig c, load_model_config(model_dir));
  NJ_ASSIGN_OR_RETURN(TensorIndex index, TensorIndex::open(model_dir));
  NJ_ASSIGN_OR_RETURN(ModelLayout layout, ModelLayout::build(c, index));
  return write_trunk_pack(*Env::posix(), index, layout, out, options).status();
}

// Every level this CPU runs, or only the detected one.
std::vector<SimdLevel> levels(bool every_level) {
  if (!every_level) return {detect_simd_level()};
  std::vector<SimdLevel> v;
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512})
    if (l <= detect_simd_level()) v.push_back(l);
  return v;
}

// Runs the model with no pack, a raw pack and a lossless pack (streamed, and held in RAM
// where they fit) at each multiple of each variant's minimum, on every SIMD level (or the
// detected one), and checks every run against the all-resident run from the shards.
void check_identical(const std::string& model_dir, size_t block_raw_bytes,
                     const std::vector<int32_t>& prompt, int steps,
                     const std::vector<double>& multiples, bool every_level = true) {
  TempDir packs;
  const std::string raw_dir = packs.file("raw"), lossless_dir = packs.file("lossless");
  REQUIRE(pack_into(model_dir, raw_dir, {PackCodec::kRaw}).ok());
  REQUIRE(pack_into(model_dir, lossless_dir, {PackCodec::kLossless, block_raw_bytes}).ok());
  const int context = static_cast<int>(prompt.size()) + steps;
  const Variant shards{"no pack", ""};
  const Run reference = run(model_dir, options_for(shards, 0, context), prompt, steps);
  REQUIRE(reference.status.ok());
  const std::vector<Variant> variants = {
      shards,
      {"raw pack", raw_dir},
      {"lossless pack", lossless_dir, PinCompressed::kNever},
      {"lossless pack, held where it fits", lossless_dir, PinCompressed::kAlways},
      {"lossless pack, planner's choice", lossless_dir, PinCompressed::kAuto}};
  const SimdLevel best = detect_simd_level();
  bool held_somewhere = false, streamed_lossless = false;
  for (SimdLevel level : levels(every_level)) {
    REQUIRE(force_simd_level(level).ok());
    for (const Variant& v : variants) {
      const uint64_t min = minimum(model_dir, v, options_for(v, 0, context));
      std::vector<uint64_t> budgets;
      for (double m : multiples)
        budgets.push_back(static_cast<uint64_t>(static_cast<double>(min) * m));
      // Room to hold every unit compressed, not to pin them all.
      if (v.pin == PinCompressed::kAlways)
        budgets.push_back(min + held_sum(model_dir, lossless_dir));
      for (uint64_t budget : budgets) {
        const double m = static_cast<double>(budget) / static_cast<double>(min);
        INFO(v.name << ", level " << simd_level_name(level) << ", budget " << budget << " (" << m
                    << " x " << min << ")");
        const Run r = run(model_dir, options_for(v, budget, context), prompt, steps);
        INFO(r.status.to_string());
        REQUIRE(r.status.ok());
        CHECK(r.greedy == reference.greedy);
        REQUIRE(r.logits.size() == reference.logits.size());
        CHECK(std::memcmp(r.logits.data(), reference.logits.data(),
                          reference.logits.size() * sizeof(float)) == 0);
        if (v.pack_dir == lossless_dir) {
          streamed_lossless =
              streamed_lossless || r.stats.trunk_bytes_read < r.stats.trunk_raw_bytes;
          held_somewhere = held_somewhere || r.plan.held_bytes > 0;
          CHECK(r.stats.decoded_bytes > 0);
        }
      }
    }
  }
  REQUIRE(force_simd_level(best).ok());
  CHECK(streamed_lossless);  // the runs did read compressed units from disk
  CHECK(held_somewhere);     // and some held units compressed in RAM
}

TEST_CASE(
    "tokens and logits are identical with no pack, a raw and a lossless pack, at 1x, 2x and 6x the "
    "minimum, on every SIMD level (golden fixtures)",
    "[engine][pack][lossless]") {
  const std::vector<int32_t> prompt = {3, 7, 11, 5, 9, 100, 200, 42};
  for (const char* name : {"tiny-mxfp4", "tiny-sharded", "tiny-bf16-flat"}) {
    INFO("fixture " << name);
    check_identical(testing::golden_dir(name), 8u << 10, prompt, 6, {1.0, 2.0, 6.0});
  }
}

// The 230 MB model: the default suite runs the detected SIMD level at 1x and 6x the
// minimum; `-L large` every level at 1x, 2x and 6x.
TEST_CASE(
    "tokens and logits are identical with no pack, a raw and a lossless pack, at 1x and 6x the "
    "minimum (a 230 MB model)",
    "[engine][pack][lossless][model-small]") {
  const std::string dir =
      std::string(NJ_TEST_MODELS_DIR) + "/small";  // ctest fixture make_model_small
  REQUIRE(std::filesystem::exists(dir + "/config.json"));
  const std::vector<int32_t> prompt = {1, 2, 3, 500, 1000, 4000, 7, 9, 11, 13, 4095, 17};
  check_identical(dir, PackOptions{}.block_raw_bytes, prompt, 4, {1.0, 6.0},
                  /*every_level=*/false);
}

TEST_CASE(
    "tokens and logits are identical with no pack, a raw and a lossless pack, at 1x, 2x and 6x the "
    "minimum, on every SIMD level (a 230 MB model)",
    "[engine][pack][lossless][model-small-large]") {
  const std::string dir =
      std::string(NJ_TEST_MODELS_DIR) + "/small";  // ctest fixture make_model_small
  REQUIRE(std::filesystem::exists(dir + "/config.json"));
  const std::vector<int32_t> prompt = {1, 2, 3, 500, 1000, 4000, 7, 9, 11, 13, 4095, 17};
  check_identical(dir, PackOptions{}.block_raw_bytes, prompt, 4, {1.0, 2.0, 6.0});
}

// A lossless pack of tiny-mxfp4 in a temporary directory, with its manifest.
struct LosslessPack {
  TempDir dir;
  std::string model, pack;
  nlohmann::json manifest;
  LosslessPack() {
    model = dir.file("model");
    pack = dir.file("pack");
    std::filesystem::create_directories(model);
    testing::copy_golden("tiny-mxfp4", model);
    REQUIRE(pack_into(model, pack, {PackCodec::kLossless, 8u << 10}).ok());
    manifest = nlohmann::json::parse(testing::read_all(pack + "/" + kPackManifest));
  }
  void write_manifest(const nlohmann::json& m) {
    testing::write_all(pack + "/" + kPackManifest, m.dump());
  }
  std::string reason() {
    auto config = load_model_config(model);
    auto index = TensorIndex::open(model);
    REQUIRE(index.ok());
    auto layout = ModelLayout::build(*config, *index);
    REQUIRE(layout.ok());
    std::string why;
    auto used = use_trunk_pack(*Env::posix(), pack, *index, &*layout,
                               static_cast<uint32_t>(index->files().size()), &why);
    REQUIRE(used.ok());
    CHECK_FALSE(*used);
    return why;
  }
};

TEST_CASE(
    "a flipped byte in a lossless block stops the run naming the pack, the unit and the block",
    "[engine][pack][lossless][errors]") {
  LosslessPack p;
  const auto& unit = p.manifest["units"][1];
  REQUIRE(unit["blocks"].size() >= 3);
  const auto& block = unit["blocks"][2];
  const uint64_t at =
      unit["offset"].get<uint64_t>() + block[0].get<uint64_t>() + block[1].get<uint64_t>() / 2;
  std::string bytes = testing::read_all(p.pack + "/" + kPackFile);
  bytes[at] ^= 0x08;
  testing::write_all(p.pack + "/" + kPackFile, bytes);
  const std::vector<int32_t> prompt = {3, 7, 11, 5};
  const Variant held{"held", p.pack, PinCompressed::kAlways},
      streamed{"streamed", p.pack, PinCompressed::kNever};
  const ModelOptions o = options_for(streamed, 0, 8);
  const uint64_t min = minimum(p.model, streamed, o);
  for (const auto& [name, options] : std::vector<std::pair<std::string, ModelOptions>>{
           {"all resident", options_for(streamed, 0, 8)},
           {"streamed at the minimum", options_for(streamed, min, 8)},
           {"held compressed in RAM", options_for(held, 20 * min, 8)}}) {
    INFO(name);
    const Run r = run(p.model, options, prompt, 2);
    INFO(r.status.to_string());
    REQUIRE_FALSE(r.status.ok());
    CHECK(r.status.code() == StatusCode::kCorruption);
    CHECK(r.status.message().find(kPackFile) != std::string::npos);
    CHECK(r.status.message().find("unit 1, block 2 of") != std::string::npos);
    CHECK(r.status.message().find("checksum") != std::string::npos);
  }
}

TEST_CASE("a damaged lossless manifest is refused with its reason",
          "[engine][pack][lossless][errors]") {
  LosslessPack p;
  nlohmann::json m = p.manifest;
  std::string says;
  SECTION("a block that is not 4096-aligned") {
    m["units"][0]["blocks"][1][0] = m["units"][0]["blocks"][1][0].get<uint64_t>() + 8;
    says = "not 4096-aligned";
  }
  SECTION("blocks that do not cover the unit") {
    m["units"][2]["raw_length"] = m["units"][2]["raw_length"].get<uint64_t>() + 2;
    says = "its blocks decode to";
  }
  SECTION("a block's hash that is not the unit's") {
    m["units"][3]["blocks"][0][3] = "0123456789abcdef";
    says = "not its blocks' hash";
  }
  SECTION("a block larger than any block can be") {
    m["units"][0]["blocks"][0][2] = uint64_t{1} << 40;
    says = "impossible sizes";
  }
  SECTION("an unknown codec") {
    m["codec"] = "zstd";
    says = "unknown pack codec";
  }
  SECTION("a newer version") {
    m["version"] = 3;
    says = "version 3";
  }
  p.write_manifest(m);
  const std::string why = p.reason();
  INFO(why);
  CHECK(why.find(says) != std::string::npos);
}

TEST_CASE("a version 1 manifest is still read, as a raw pack", "[engine][pack]") {
  TempDir d;
  testing::copy_golden("tiny-mxfp4", d.path());
  const Variant shards{"no pack", ""}, packed{"pack", d.path()};
  const std::vector<int32_t> prompt = {3, 7, 11, 5};
  const Run reference = run(d.path(), options_for(shards, 0, 8), prompt, 2);
  REQUIRE(reference.status.ok());
  REQUIRE(pack_into(d.path(), d.path(), {PackCodec::kRaw}).ok());
  nlohmann::json m = nlohmann::json::parse(testing::read_all(d.file(kPackManifest)));
  m["version"] = 1;  // what the writer before lossless packs wrote
  m.erase("codec");
  m.erase("raw_bytes");
  testing::write_all(d.file(kPackManifest), m.dump());
  auto model = Model::open(d.path(), options_for(packed, 0, 8));
  REQUIRE(model.ok());
  CHECK((*model)->uses_pack());
  const Run r = run(d.path(), options_for(packed, 0, 8), prompt, 2);
  REQUIRE(r.status.ok());
  CHECK(std::memcmp(r.logits.data(), reference.logits.data(),
                    reference.logits.size() * sizeof(float)) == 0);
}

// Aborts the test binary with `what` unless disarmed within `limit`: a pool whose threads wait
// on each other cannot be cleaned up, and a hang should fail the test, not the suite's clock.
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
        std::fprintf(stderr, "hung: %s (%s)\n", what_.c_str(), step_.c_str());
        std::abort();
      }
    });
  }
  void step(std::string what) {  // what the test is doing now, for the message
    std::lock_guard<std::mutex> lock(mu_);
    step_ = std::move(what);
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_, step_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// The trunk ring's read-ahead (a unit read into staging while the slot it will decode into is
// still in use, and decoded there once the slot is let go) ties staging buffers to decodes
// that only a later release starts. A pass abandoned anywhere (an error, a cancelled item)
// lets its layers go and may destroy the source at once, with reads queued, runs staged
// behind closed gates and decodes just let loose: that must neither hang nor leave a unit
// that the next pass would use with the wrong bytes. Here at the minimum budget (two ring
// slots) with one I/O thread (one staging buffer: read-ahead waits for its gate before it
// reads at all, kUngatedStaging) and three (it reads one run ahead).
TEST_CASE(
    "a pass abandoned at any layer, with units read ahead into staging, neither hangs nor changes "
    "the bits of the next pass, and the source can be destroyed at once",
    "[engine][pack][lossless][streaming]") {
  LosslessPack p;
  const Variant streamed{"streamed", p.pack, PinCompressed::kNever};
  const std::vector<int32_t> prompt = {3, 7, 11};
  for (int io : {1, 3}) {
    ModelOptions o = options_for(streamed, 0, 8);
    o.streaming.io_threads = io;
    o.memory_bytes = minimum(p.model, streamed, o);
    Watchdog dog(std::chrono::seconds(300), "lossless read-ahead with " + std::to_string(io) +
                                                " I/O threads: a pass abandoned, or a run");
    dog.step("the reference run");
    const Run reference = run(p.model, o, prompt, 2);
    REQUIRE(reference.status.ok());
    REQUIRE(reference.plan.ring_slots == 2);
    const int layers = static_cast<int>(reference.plan.pinned.size()) - 1;  // the head last
    REQUIRE(layers >= 3);
    for (int stop = 0; stop <= layers; ++stop) {
      for (bool continue_after : {false, true}) {
        const std::string step = "pass abandoned at unit " + std::to_string(stop) +
                                 (continue_after ? ", then a whole run" : ", then destroyed");
        INFO(io << " I/O threads, " << step);
        dog.step(step);
        auto model = Model::open(p.model, o);
        REQUIRE(model.ok());
        WeightSource& w = (*model)->weights();
        {
          // As a pass does: the next unit asked for while the last one is still held.
          std::shared_ptr<const void> held;
          for (int u = 0; u <= stop; ++u) {
            std::shared_ptr<const void> next;
            if (u < layers) {
              auto l = w.layer(u);
              REQUIRE(l.ok());
              next = *l;
            } else {
              auto h = w.head(0);
              REQUIRE(h.ok());
              next = *h;
            }
            held = std::move(next);  // lets the one before go
          }
        }  // abandoned: the last unit let go, its read-ahead's gate opened
        if (continue_after) {
          const Run r = run_on(**model, prompt, 2);
          REQUIRE(r.status.ok());
          CHECK(r.greedy == reference.greedy);
          REQUIRE(r.logits.size() == reference.logits.size());
          CHECK(std::memcmp(r.logits.data(), reference.logits.data(),
                            reference.logits.size() * sizeof(float)) == 0);
        }
        model->reset();  // at once: reads, staged runs and decodes may still be in flight
      }
    }
  }
}

TEST_CASE(
    "the minimum of a lossless pack holds one run of stored blocks per I/O thread, and held units "
    "replace reads",
    "[engine][pack][lossless][planner]") {
  LosslessPack p;
  uint64_t largest_run = 0;
  {
    std::string warning;
    auto headers = open_model_headers(p.model, true, &warning, p.pack);
    REQUIRE(headers.ok());
    for (int l = 0; l <= headers->config.layers; ++l) {
      const UnitLayout& u = l == headers->config.layers ? headers->layout->head().unit
                                                        : headers->layout->layer(l).unit;
      largest_run = std::max(largest_run, largest_block_run(u));
      if (l == 1) CHECK(block_runs(u).size() < u.blocks.size());  // 8 KiB blocks, read together
    }
  }
  const Variant never{"never", p.pack, PinCompressed::kNever},
      always{"always", p.pack, PinCompressed::kAlways};
  ModelOptions o = options_for(never, 0, 8);
  const uint64_t min3 = minimum(p.model, never, o);
  o.streaming.io_threads = 5;
  const uint64_t min5 = minimum(p.model, never, o);
  CHECK(min5 - min3 == 2 * staging_buffer_bytes(largest_run));

  // Room for every unit compressed, not decoded: held units replace reads.
  const uint64_t budget = min3 + held_sum(p.model, p.pack);
  const Run held = run(p.model, options_for(always, budget, 8), {3, 7, 11}, 2);
  REQUIRE(held.status.ok());
  CHECK(held.plan.held_bytes > 0);
  const Run pinned = run(p.model, options_for(never, budget, 8), {3, 7, 11}, 2);
  REQUIRE(pinned.status.ok());
  CHECK(pinned.plan.held_bytes == 0);
  CHECK(held.plan.predicted_trunk_bytes_per_step <= pinned.plan.predicted_trunk_bytes_per_step);
  CHECK(held.plan.predicted_decode_bytes_per_step > 0);
}

TEST_CASE(
    "the planner holds units compressed when decoding is cheaper than reading, and pins them when "
    "not",
    "[engine][planner]") {
  // Four units of 100 MB that store in 66 MB; memory beyond the fixed part: 300 MB.
  const std::vector<TrunkUnitCost> units(
      4, TrunkUnitCost{100'000'000, 66'000'000, 66'000'000, 100'000'000});
  auto total = [&](const std::vector<UnitResidency>& r) {
    uint64_t t = 0;
    for (size_t i = 0; i < r.size(); ++i)
      t += r[i] == UnitResidency::kPinned ? units[i].buffer_bytes
           : r[i] == UnitResidency::kHeld ? units[i].held_bytes
                                          : 0;
    return t;
  };
  auto count = [](const std::vector<UnitResidency>& r, UnitResidency x) {
    return std::count(r.begin(), r.end(), x);
  };
  // Fast decoding: holding all four (264 MB; then one pinned in what is left) beats
  // pinning three.
  const auto fast =
      choose_trunk_residency(units, {2.6, 50.0, PinCompressed::kAuto}, 300'000'000, total);
  CHECK(count(fast, UnitResidency::kStreamed) == 0);
  CHECK(count(fast, UnitResidency::kHeld) == 3);
  // Slow decoding (1 GB/s): a held unit costs more per token than it saves; pin instead.
  const auto slow =
      choose_trunk_residency(units, {2.6, 1.0, PinCompressed::kAuto}, 300'000'000, total);
  CHECK(count(slow, UnitResidency::kPinned) == 3);
  CHECK(count(slow, UnitResidency::kHeld) == 0);
  // "no" never holds; "yes" holds first.
  CHECK(count(choose_trunk_residency(units, {2.6, 50.0, PinCompressed::kNever}, 300'000'000, total),
              UnitResidency::kHeld) == 0);
  CHECK(count(choose_trunk_residency(units, {2.6, 1.0, PinCompressed::kAlways}, 300'000'000, total),
              UnitResidency::kHeld) == 4);
}

TEST_CASE(
    "a traced streamed run puts each lossless unit's submit, reads, decodes, wait and release on "
    "the timeline in order",
    "[engine][pack][lossless][streaming]") {
  LosslessPack p;
  const Variant streamed{"streamed", p.pack, PinCompressed::kNever};
  ModelOptions o = options_for(streamed, 0, 8);
  o.memory_bytes = minimum(p.model, streamed, o);
  auto timeline = std::make_shared<Timeline>();
  o.streaming.timeline = timeline;
  const Run traced = run(p.model, o, {3, 7, 11}, 2);
  REQUIRE(traced.status.ok());
  o.streaming.timeline.reset();
  const Run plain = run(p.model, o, {3, 7, 11}, 2);
  REQUIRE(plain.status.ok());
  CHECK(traced.greedy == plain.greedy);  // tracing changes nothing but the clock's reads

  const std::vector<TimelineEvent> events = timeline->events();
  std::map<int, std::vector<TimelineEvent>> by_unit;
  for (const TimelineEvent& e : events) by_unit[e.unit].push_back(e);
  int waited_units = 0;
  for (const auto& [unit, es] : by_unit) {
    if (unit < 0) continue;  // routed experts' reads
    INFO("unit " << unit);
    // Each use: submit, then the blocks' reads and decodes, then the pass's wait and release.
    double submitted = -1, waited = -1;
    std::map<int, double> read_started, read_ended, decode_started;
    int decoded = 0;
    for (const TimelineEvent& e : es) {
      switch (e.kind) {
        case TimelineKind::kSubmit:
          submitted = e.t_s;
          break;
        case TimelineKind::kReadStart:
          CHECK(submitted >= 0);
          CHECK(e.t_s >= submitted);
          read_started[e.block] = e.t_s;
          break;
        case TimelineKind::kReadEnd:
          REQUIRE(read_started.count(e.block));
          CHECK(e.t_s >= read_started[e.block]);
          read_ended[e.block] = e.t_s;
          break;
        case TimelineKind::kDecodeStart:
          REQUIRE(read_ended.count(e.block));
          CHECK(e.t_s >= read_ended[e.block]);
          decode_started[e.block] = e.t_s;
          break;
        case TimelineKind::kDecodeEnd:
          REQUIRE(decode_started.count(e.block));
          CHECK(e.t_s >= decode_started[e.block]);
          decoded++;
          break;
        case TimelineKind::kWaitBegin:
          waited = e.t_s;
          break;
        case TimelineKind::kWaitEnd:
          CHECK(waited >= 0);
          CHECK(e.t_s >= waited);
          waited_units++;
          break;
        case TimelineKind::kRelease:
          CHECK(waited >= 0);
          break;
      }
    }
    CHECK(decoded > 0);  // a lossless unit is decoded on the I/O side
  }
  CHECK(waited_units > 0);
}

}  // namespace
}  // namespace nj
