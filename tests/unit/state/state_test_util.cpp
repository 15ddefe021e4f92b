// Test helpers for state checkpoints (see state_test_util.h).
#include "engine/runtime/model.h"
#include "tests/unit/state/state_test_util.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace nj::state_testing {

namespace fs = std::filesystem;

std::string generated_model(const std::string& preset, int seed, int vocab) {
  const std::string dir = std::string(NJ_TEST_WORK_DIR) + "/models/" + preset + "-seed" +
                          std::to_string(seed) + (vocab > 0 ? "-vocab" + std::to_string(vocab) : "");
  if (fs::exists(dir + "/config.json")) return dir;
  fs::create_directories(std::string(NJ_TEST_WORK_DIR) + "/models");
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
  const std::string log = tmp + ".log";
  const std::string cmd = std::string(NJ_SYSTEM_PYTHON) + " " + NJ_SOURCE_DIR +
                          "/tests/reference/make_model.py --out '" + tmp + "' --preset " + preset +
                          " --seed " + std::to_string(seed) +
                          (vocab > 0 ? " --vocab " + std::to_string(vocab) : "") + " --force > '" + log +
                          "' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream in(log);
    std::ostringstream text;
    text << in.rdbuf();
    FAIL(cmd << "\n" << text.str());
  }
  fs::remove(log);
  std::error_code ec;
  fs::rename(tmp, dir, ec);  // fails when another process got there first: use theirs
  if (ec) fs::remove_all(tmp);
  REQUIRE(fs::exists(dir + "/config.json"));
  return dir;
}

std::unique_ptr<Model> open_test_model(const std::string& dir) {
  auto m = Model::open(dir);
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  return std::move(m).value();
}

TempDir::TempDir() {
  const std::string root = std::string(NJ_TEST_WORK_DIR) + "/tmp";
  fs::create_directories(root);
  std::string templ = root + "/state-XXXXXX";
  REQUIRE(::mkdtemp(templ.data()) != nullptr);
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::vector<std::string> TempDir::names() const {
  std::vector<std::string> n;
  for (const auto& e : fs::directory_iterator(path_)) n.push_back(e.path().filename().string());
  std::sort(n.begin(), n.end());
  return n;
}

Generation::Generation(Model& model, const std::vector<int32_t>& prompt, SamplingParams params)
    : session(model), sampler(params) {
  REQUIRE(session.feed(prompt).ok());
}

std::vector<int32_t> Generation::step(int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t id = sampler.sample(session.last_logits());
    out.push_back(id);
    const int32_t one[1] = {id};
    REQUIRE(session.feed(one).ok());
  }
  return out;
}

namespace {

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace

std::string checkpoint_difference(const StateCheckpoint& a, const StateCheckpoint& b) {
  const SequenceState &x = a.state, &y = b.state;
  if (x.position != y.position)
    return "position " + std::to_string(x.position) + " vs " + std::to_string(y.position);
  if (x.tokens != y.tokens) return "tokens";
  if (!same_bits(x.last_logits, y.last_logits)) return "last_logits";
  if (x.layers.size() != y.layers.size()) return "layer count";
  for (size_t l = 0; l < x.layers.size(); ++l) {
    const LayerState &p = x.layers[l], &q = y.layers[l];
    const std::string at = " of layer " + std::to_string(l);
    if (!same_bits(p.S, q.S)) return "S" + at;
    if (!same_bits(p.conv, q.conv)) return "conv" + at;
    if (!same_bits(p.latent, q.latent)) return "latent" + at;
    if (!same_bits(p.rope, q.rope)) return "rope" + at;
  }
  const SamplingParams &s = a.sampler.params, &t = b.sampler.params;
  if (std::memcmp(&s.temperature, &t.temperature, 4) || s.top_k != t.top_k ||
      std::memcmp(&s.top_p, &t.top_p, 4) || s.seed != t.seed)
    return "sampling params";
  if (a.sampler.rng.s != b.sampler.rng.s) return "rng";
  return "";
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  REQUIRE(out.good());
  out << bytes;
}

}  // namespace nj::state_testing
