// nightjar_state_bench: what a state checkpoint costs. For a generated model at each
// context length: checkpoint size, time of a full save (a new generation), of a later save
// that appends 1 or 64 positions, and of a restore (page cache warm, and cold after
// dropping the files' pages). Then the real K3 shape: sizes by formula, times predicted
// from the durable-write and cold-read bandwidth measured in the same run, and with --k3
// measured on a synthetic K3-shaped state. Medians over --reps. Not a ctest.
//
// The state is synthetic by default (random values in the model's exact shapes: the
// format stores raw floats, so its cost does not depend on the values); --fill forward
// computes it with the model instead (practical for the tiny preset only).
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/io/durable.h"
#include "engine/runtime/model.h"
#include "engine/session/session.h"
#include "engine/state/state_file.h"
#include "engine/state/state_format.h"

namespace nj {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void die(const Status& s) {
  std::fprintf(stderr, "nightjar_state_bench: %s\n", s.to_string().c_str());
  std::exit(1);
}

// Drops a file's cached pages (they are clean after the fsyncs of a save).
void drop_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void drop_checkpoint_cache(const std::string& head) {
  drop_cache(head);
  const std::string base = base_name(head);
  for (const auto& e : std::filesystem::directory_iterator(dir_name(head)))
    if (state_format::is_segment_name_of(e.path().filename().string(), base))
      drop_cache(e.path().string());
}

uint64_t checkpoint_bytes(const std::string& head) {
  uint64_t n = std::filesystem::file_size(head);
  const std::string base = base_name(head);
  for (const auto& e : std::filesystem::directory_iterator(dir_name(head)))
    if (state_format::is_segment_name_of(e.path().filename().string(), base)) n += e.file_size();
  return n;
}

// Appends `n` synthetic positions (token + one MLA row per MLA layer) and refreshes the
// fixed-size parts, as a decode step would.
void grow_synthetic(const ModelConfig& c, SequenceState& s, int64_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab - 1);
  for (int64_t i = 0; i < n; ++i) s.tokens.push_back(tok(rng));
  for (int l = 0; l < c.layers; ++l) {
    LayerState& ls = s.layers[static_cast<size_t>(l)];
    if (c.attention[static_cast<size_t>(l)] == AttentionKind::kMla) {
      for (int64_t i = 0; i < n * c.kv_lora_rank; ++i) ls.latent.push_back(u(rng));
      for (int64_t i = 0; i < n * c.qk_rope; ++i) ls.rope.push_back(u(rng));
    } else {
      for (size_t i = 0; i < ls.S.size(); i += 97) ls.S[i] = u(rng);  // touched, like a decode step
      for (float& v : ls.conv) v = u(rng);
    }
  }
  s.last_logits.resize(static_cast<size_t>(c.vocab));
  for (float& v : s.last_logits) v = u(rng);
  s.position += n;
}

SequenceState synthetic_state(const ModelConfig& c, int64_t positions, std::mt19937_64& rng) {
  SequenceState s = SequenceState::empty(c);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (LayerState& ls : s.layers)
    for (float& v : ls.S) v = u(rng);
  grow_synthetic(c, s, positions, rng);
  return s;
}

struct Measured {
  uint64_t bytes = 0, head_bytes = 0;
  double full_s = 0, append1_s = 0, append64_s = 0, restore_warm_s = 0, restore_cold_s = 0;
  uint64_t append1_bytes = 0, append64_bytes = 0;
};

Measured measure(const ModelConfig& c, uint64_t fingerprint, SequenceState state,
                 const std::string& dir, int reps, std::mt19937_64& rng) {
  const std::string path = dir + "/state";
  const SamplerSnapshot smp{SamplingParams{0.8f, 0, 0.9f, 42}, RngState{42}};
  Measured m;
  std::vector<double> full, a1, a64, warm, cold;
  for (int r = 0; r < reps; ++r) {
    StateFileWriter w(*Env::posix(), path);  // a new writer: the first save is a full one
    auto t = Clock::now();
    if (Status s = w.save(c, fingerprint, state, smp); !s.ok()) die(s);
    full.push_back(since(t));
    if (!w.last_save().full) die(internal_error("expected a full save"));
    m.bytes = checkpoint_bytes(path);
    m.head_bytes = w.last_save().head_bytes;

    SequenceState grown = state;
    for (int64_t d : {int64_t{1}, int64_t{64}}) {
      grow_synthetic(c, grown, d, rng);
      t = Clock::now();
      if (Status s = w.save(c, fingerprint, grown, smp); !s.ok()) die(s);
      (d == 1 ? a1 : a64).push_back(since(t));
      if (w.last_save().full) die(internal_error("expected an append"));
      (d == 1 ? m.append1_bytes : m.append64_bytes) =
          w.last_save().head_bytes + w.last_save().segment_bytes;
    }
    // Restore the last checkpoint (the grown state, three segment records). The first load
    // in the process also pays first-touch page faults for the state's memory; that cost
    // is reported separately (first_touch_gbps), so it is kept out of these figures.
    if (r == 0)
      if (auto cp = load_state_file(*Env::posix(), path, c, fingerprint); !cp.ok())
        die(cp.status());
    drop_checkpoint_cache(path);
    t = Clock::now();
    if (auto cp = load_state_file(*Env::posix(), path, c, fingerprint); !cp.ok()) die(cp.status());
    cold.push_back(since(t));
    t = Clock::now();
    if (auto cp = load_state_file(*Env::posix(), path, c, fingerprint); !cp.ok()) die(cp.status());
    warm.push_back(since(t));
  }
  m.full_s = median(full);
  m.append1_s = median(a1);
  m.append64_s = median(a64);
  m.restore_warm_s = median(warm);
  m.restore_cold_s = median(cold);
  return m;
}

double mb(uint64_t b) {
  return static_cast<double>(b) / 1e6;
}

void print_header() {
  std::printf("%-8s %11s %9s %10s %14s %15s %11s %11s\n", "context", "size_MB", "head_MB", "full_s",
              "append1_s", "append64_s", "restore_s", "cold_s");
}

void print_row(int64_t ctx, const Measured& m) {
  std::printf("%-8lld %11.2f %9.2f %10.4f %8.4f(%4.1fMB) %8.4f(%5.1fMB) %11.4f %11.4f\n",
              static_cast<long long>(ctx), mb(m.bytes), mb(m.head_bytes), m.full_s, m.append1_s,
              mb(m.append1_bytes), m.append64_s, mb(m.append64_bytes), m.restore_warm_s,
              m.restore_cold_s);
}

// The real K3 state shapes (docs/k3-model.md §1, §4, §5): 93 layers, MLA at one-based
// 4, 8, ..., 92 and 93 (24 layers), KDA 96 heads × 128, kernel 4, kv_lora 512, rope 64.
ModelConfig k3_config() {
  ModelConfig c;
  c.layers = 93;
  c.vocab = 163840;
  for (int l = 1; l <= 93; ++l)
    c.attention.push_back(l % 4 == 0 || l == 93 ? AttentionKind::kMla : AttentionKind::kKda);
  c.kda_heads = 96;
  c.kda_head_dim = 128;
  c.conv_kernel = 4;
  c.kv_lora_rank = 512;
  c.qk_rope = 64;
  return c;
}

// How fast fresh anonymous memory is first touched (page faults + zeroing), in GB/s: what
// a restore in a new process pays on top of the figures above for the state's buffers.
double first_touch_gbps() {
  const size_t n = size_t{256} << 20;
  auto t = Clock::now();
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 0;
  std::memset(p, 1, n);
  const double gbps = static_cast<double>(n) / since(t) / 1e9;
  ::munmap(p, n);
  return gbps;
}

// Sequential durable-write and cold-read bandwidth of `dir`, in GB/s.
std::pair<double, double> disk_bandwidth(const std::string& dir, size_t bytes) {
  const std::string path = dir + "/bandwidth.probe";
  std::string data(bytes, '\0');
  std::mt19937_64 rng(1);
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&data[i], &v, 8);
  }
  auto t = Clock::now();
  if (Status s = write_file_durably(*Env::posix(), path, data); !s.ok()) die(s);
  const double write_gbps = static_cast<double>(bytes) / since(t) / 1e9;
  drop_cache(path);
  auto f = Env::posix()->open_read(path);
  if (!f.ok()) die(f.status());
  t = Clock::now();
  if (Status s = (*f)->read_at(0, data.data(), bytes); !s.ok()) die(s);
  const double read_gbps = static_cast<double>(bytes) / since(t) / 1e9;
  std::filesystem::remove(path);
  return {write_gbps, read_gbps};
}

}  // namespace
}  // namespace nj

int main(int argc, char** argv) {
  using namespace nj;
  std::string model_dir, work = ".", fill = "synthetic";
  std::vector<int64_t> contexts = {1024, 8192};
  int reps = 5;
  bool k3 = false;
  CLI::App app{"State checkpoint benchmark: size, save and restore time (medians)"};
  app.add_option("--model", model_dir,
                 "A generated model directory (tests/reference/make_model.py)")
      ->required();
  app.add_option("--dir", work, "Where to write checkpoints (default: .); the disk under test");
  app.add_option("--contexts", contexts, "Context lengths (default 1024 8192)")->delimiter(',');
  app.add_option("--reps", reps, "Repetitions per figure (default 5)")->check(CLI::PositiveNumber);
  app.add_option("--fill", fill,
                 "synthetic (default) or forward (compute the state with the model)")
      ->check(CLI::IsMember({"synthetic", "forward"}));
  app.add_flag("--k3", k3, "Also measure a synthetic K3-shaped state (~0.5-1 GB per checkpoint)");
  CLI11_PARSE(app, argc, argv);

  // Keep freed memory in the heap (buffers up to 32 MB, never trimmed) so that repeated
  // loads reuse pages: the restore figures then measure reading and verifying, and the
  // first-touch cost of a fresh process is reported on its own.
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, INT32_MAX);
  auto model = Model::open(model_dir);
  if (!model.ok()) die(model.status());
  const ModelConfig& c = (*model)->config();
  const std::string dir = work + "/nightjar-state-bench";
  std::filesystem::create_directories(dir);
  std::mt19937_64 rng(7);

  const auto shape = state_format::shape_of(c);
  std::printf(
      "model %s: %d layers (%zu KDA, %zu MLA), KDA state %.2f MB, %llu bytes per position; fill "
      "%s; "
      "median of %d\n",
      model_dir.c_str(), c.layers, shape.kda_layers.size(), shape.mla_layers.size(),
      mb(shape.kda_layers.size() * (shape.s_floats + shape.conv_floats) * 4),
      static_cast<unsigned long long>(shape.position_bytes()), fill.c_str(), reps);
  const double touch_gbps = first_touch_gbps();
  std::printf(
      "full = first save (new generation); appendN = a later save after N more tokens (bytes "
      "written); restore = load with the files in the page cache; cold = after dropping their "
      "pages.\n"
      "A restore in a fresh process also touches the state's memory for the first time: %.2f GB/s "
      "here.\n",
      touch_gbps);
  print_header();
  for (int64_t ctx : contexts) {
    SequenceState s;
    if (fill == "forward") {
      Session session(**model);
      std::vector<int32_t> ids(static_cast<size_t>(ctx));
      for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.vocab));
      if (Status st = session.feed(ids); !st.ok()) die(st);
      s = session.state();
    } else {
      s = synthetic_state(c, ctx, rng);
    }
    print_row(ctx, measure(c, (*model)->fingerprint(), std::move(s), dir, reps, rng));
  }

  const auto [write_gbps, read_gbps] = disk_bandwidth(dir, size_t{256} << 20);
  const ModelConfig k = k3_config();
  const auto ks = state_format::shape_of(k);
  const uint64_t kda_s = ks.kda_layers.size() * ks.s_floats * 4;
  const uint64_t kda_all = ks.kda_layers.size() * (ks.s_floats + ks.conv_floats) * 4;
  const uint64_t head = state_format::kHeadHeaderBytes +
                        (3 + ks.kda_layers.size()) * state_format::kSectionHeaderBytes +
                        state_format::kSamplerBytes + ks.vocab * 4 + kda_all +
                        state_format::kSegmentRefFixedBytes +
                        state_format::segment_name("state", 0).size();
  std::printf(
      "\nK3 by formula (times = bytes / the bandwidths measured here): KDA S %.1f MB + conv %.1f "
      "MB, head %.1f MB (with the last logits), %.1f KB per "
      "position; disk here: durable write %.2f GB/s, cold read %.2f GB/s (256 MB probe)\n",
      mb(kda_s), mb(kda_all - kda_s), mb(head), static_cast<double>(ks.position_bytes()) / 1e3,
      write_gbps, read_gbps);
  std::printf("%-8s %11s %14s %14s %14s %16s\n", "context", "size_MB", "full_s", "append64_s",
              "cold_read_s", "first_touch_s");
  for (int64_t ctx : contexts) {
    const uint64_t seg = state_format::kSegmentHeaderBytes + state_format::kRecordHeaderBytes +
                         static_cast<uint64_t>(ctx) * ks.position_bytes();
    const double total = static_cast<double>(head + seg);
    const double app64 =
        static_cast<double>(head + state_format::kRecordHeaderBytes + 64 * ks.position_bytes());
    std::printf("%-8lld %11.1f %14.3f %14.3f %14.3f %16.3f\n", static_cast<long long>(ctx),
                total / 1e6, total / (write_gbps * 1e9), app64 / (write_gbps * 1e9),
                total / (read_gbps * 1e9), total / (touch_gbps * 1e9));
  }
  if (k3) {
    std::printf("\nK3 measured (synthetic K3-shaped state, fingerprint 0)\n");
    print_header();
    for (int64_t ctx : contexts)
      print_row(ctx, measure(k, 0, synthetic_state(k, ctx, rng), dir, reps, rng));
  }
  std::filesystem::remove_all(dir);
  return 0;
}
