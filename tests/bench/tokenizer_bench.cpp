// tokenizer_bench: encode throughput of the K3 tokenizer against npm tiktoken (the
// Rust core as WebAssembly) on the same English text and the same 160k vocabulary,
// measured in the same run. Not a test: it prints numbers, it asserts nothing about
// speed. It does check that both sides produce the same ids.
//
//   tokenizer_bench [--vocab DIR] [--text FILE] [--reps N] [--mb M] [--no-npm]
//
// Defaults: the vocabulary is <build>/tokenizer_bench/k3-160k, written on first use by
// tests/reference/k3_tokenizer_gen.py --bench (about a minute); the text is the
// bundled English sample repeated to M MB (4); N = 7 repetitions per side, medians
// reported. MB = 10^6 bytes. One thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string quote(const std::string& s) {
  return "'" + s + "'";
}

int run_shell(const std::string& cmd) {
  std::fflush(stdout);
  std::fprintf(stderr, "tokenizer_bench: %s\n", cmd.c_str());
  return std::system(cmd.c_str());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint32_t ids_hash(const std::vector<int32_t>& ids) {
  uint32_t h = 7;
  for (int32_t id : ids) h = h * 31u + static_cast<uint32_t>(id);
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path build = NJ_BINARY_DIR;
  const fs::path source = NJ_SOURCE_DIR;
  fs::path vocab = build / "tokenizer_bench" / "k3-160k";
  fs::path text_path;
  int reps = 7;
  double megabytes = 4;
  bool with_npm = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "tokenizer_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--vocab") {
      vocab = value();
    } else if (a == "--text") {
      text_path = value();
    } else if (a == "--reps") {
      reps = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--mb") {
      megabytes = std::atof(value().c_str());
    } else if (a == "--no-npm") {
      with_npm = false;
    } else {
      std::fputs(
          "usage: tokenizer_bench [--vocab DIR] [--text FILE] [--reps N] [--mb M] [--no-npm]\n",
          stderr);
      return 2;
    }
  }

  if (!nj::Tokenizer::exists_in(vocab.string())) {
    const std::string cmd = std::string(NJ_PYTHON) + " " +
                            quote((source / "tests/reference/k3_tokenizer_gen.py").string()) + " " +
                            quote(vocab.string()) + " --bench --vocab 160000";
    if (run_shell(cmd) != 0) return 1;
  }
  auto loaded = nj::Tokenizer::load(vocab.string());
  if (!loaded.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", loaded.status().message().c_str());
    return 1;
  }
  const nj::Tokenizer& tok = *loaded;

  if (text_path.empty()) {
    const std::string sample = read_file(source / "tests/reference/data/bpe_sample/en.txt");
    std::string text;
    while (text.size() < megabytes * 1e6) text += sample;
    text_path = build / "tokenizer_bench" / "english.txt";
    fs::create_directories(text_path.parent_path());
    std::ofstream(text_path, std::ios::binary) << text;
  }
  const std::string text = read_file(text_path);
  const double mb = static_cast<double>(text.size()) / 1e6;

  std::vector<double> seconds;
  std::vector<int32_t> ids;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ids = tok.encode(text);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double cpp_s = median(seconds);
  const double cpp_mbps = mb / cpp_s;

  std::printf("tokenizer_bench: vocabulary %s (%d ids), text %s (%.2f MB, %zu ids)\n",
              vocab.c_str(), tok.vocab_size(), text_path.c_str(), mb, ids.size());
  std::printf("  C++ encoder     %8.2f MB/s  (median of %d: %.3f s)\n", cpp_mbps, reps, cpp_s);
  if (!with_npm) return 0;

  // npm tiktoken, pinned to the version the parity test uses, under the build tree.
  const fs::path npm_prefix = build / "npm";
  const fs::path pkg = npm_prefix / "node_modules/tiktoken/package.json";
  bool have = fs::exists(pkg) &&
              nlohmann::json::parse(read_file(pkg)).value("version", "") == NJ_TIKTOKEN_VERSION;
  if (!have && run_shell("npm install --prefix " + quote(npm_prefix.string()) +
                         " --no-audit --no-fund tiktoken@" NJ_TIKTOKEN_VERSION " >&2") != 0) {
    std::fprintf(stderr, "tokenizer_bench: cannot install npm tiktoken; run with --no-npm\n");
    return 1;
  }
  const fs::path out = build / "tokenizer_bench" / "tiktoken_result.json";
  const std::string cmd = "NJ_NPM_PREFIX=" + quote(npm_prefix.string()) + " node " +
                          quote((source / "tests/tokenizer/tiktoken_side.mjs").string()) +
                          " bench " + quote(vocab.string()) + " " + quote(text_path.string()) +
                          " " + std::to_string(reps) + " > " + quote(out.string());
  if (run_shell(cmd) != 0) return 1;
  const auto result = nlohmann::json::parse(read_file(out));
  const double js_s = result.at("median_s").get<double>();
  const double js_mbps = mb / js_s;
  const bool same = result.at("num_ids").get<size_t>() == ids.size() &&
                    result.at("ids_hash").get<uint32_t>() == ids_hash(ids);
  std::printf("  npm tiktoken %s %8.2f MB/s  (median of %d: %.3f s)\n",
              result.at("tiktoken_version").get<std::string>().c_str(), js_mbps, reps, js_s);
  std::printf("  ratio C++ / tiktoken: %.2fx; ids %s\n", cpp_mbps / js_mbps,
              same ? "identical" : "DIFFER");
  return same ? 0 : 1;
}
