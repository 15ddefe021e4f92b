// Lossless block decode speed on one core, as a ratio to a memcpy probe in the same run.
//   codec_bench --pack DIR [--mb N (default 256)] [--rounds N (default 9)]
// Loads the first N MiB (decoded) of a lossless pack's blocks into memory, then for each SIMD
// level alternates rounds of one memcpy of N MiB (buffer to buffer, both far larger than
// the caches) and one decode of every loaded block into a buffer of N MiB, on one thread.
// Speeds are output bytes per second: for memcpy the bytes copied, for decoding the bytes
// decoded. Each round gives a ratio; the median ratio is reported with the median rates,
// by wall time and by the thread's CPU time (this host is shared: a preempted thread loses
// wall time, not CPU time). Prints one JSON object.
#include <time.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/codec/block_decoder.h"
#include "engine/io/file.h"
#include "engine/weights/pack.h"
#include "tests/bench/bench_util.h"

using namespace nj;

namespace {

double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Block {
  std::vector<uint8_t> stored;
  size_t raw_offset = 0, raw_bytes = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  size_t mb = 256;
  int rounds = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--pack")
      dir = argv[i + 1];
    else if (flag == "--mb")
      mb = static_cast<size_t>(std::atol(argv[i + 1]));
    else if (flag == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "codec_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: codec_bench --pack DIR [--mb N] [--rounds N]\n");
    return 2;
  }
  auto text = read_small_file(dir + "/" + kPackManifest, 1u << 30);
  if (!text.ok()) {
    std::fprintf(stderr, "%s\n", text.status().to_string().c_str());
    return 1;
  }
  const nlohmann::json m = nlohmann::json::parse(*text);
  if (m.value("codec", "") != "lossless") {
    std::fprintf(stderr, "codec_bench: %s is not a lossless pack\n", dir.c_str());
    return 1;
  }
  auto file =
      open_random_access(dir + "/" + m.at("pack_file").get<std::string>(), IoMode::kBuffered);
  if (!file.ok()) return 1;
  // Blocks in pack order until N MiB decoded.
  std::vector<Block> blocks;
  size_t raw = 0, stored = 0;
  const size_t want = mb << 20;
  for (const auto& u : m.at("units")) {
    for (const auto& b : u.at("blocks")) {
      if (raw >= want) break;
      Block blk;
      blk.stored.resize(b[1].get<size_t>());
      if (!(*file)
               ->read_at(u.at("offset").get<uint64_t>() + b[0].get<uint64_t>(), blk.stored.data(),
                         blk.stored.size())
               .ok())
        return 1;
      blk.raw_offset = raw;
      blk.raw_bytes = b[2].get<size_t>();
      raw += blk.raw_bytes;
      stored += blk.stored.size();
      blocks.push_back(std::move(blk));
    }
  }
  AlignedBuffer src(raw), dst(raw);
  std::memset(src.data(), 1, raw);
  std::memset(dst.data(), 2, raw);
  nlohmann::json out;
  out["pack"] = dir;
  out["decoded_bytes"] = raw;
  out["stored_bytes"] = stored;
  out["blocks"] = blocks.size();
  out["rounds"] = rounds;
  for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > detect_simd_level()) continue;
    std::vector<double> probe_wall, probe_cpu, dec_wall, dec_cpu, ratio_wall, ratio_cpu;
    for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms up
      double w0 = bench::now_s(), c0 = cpu_s();
      std::memcpy(dst.data(), src.data(), raw);
      const double pw = bench::now_s() - w0, pc = cpu_s() - c0;
      w0 = bench::now_s();
      c0 = cpu_s();
      for (const Block& b : blocks) {
        const Status s = decode_block(
            b.stored, std::span<uint8_t>(dst.data() + b.raw_offset, b.raw_bytes), level);
        if (!s.ok()) {
          std::fprintf(stderr, "%s\n", s.to_string().c_str());
          return 1;
        }
      }
      const double dw = bench::now_s() - w0, dc = cpu_s() - c0;
      if (r == 0) continue;
      probe_wall.push_back(raw / pw / 1e9);
      probe_cpu.push_back(raw / pc / 1e9);
      dec_wall.push_back(raw / dw / 1e9);
      dec_cpu.push_back(raw / dc / 1e9);
      ratio_wall.push_back(pw / dw);
      ratio_cpu.push_back(pc / dc);
    }
    out[simd_level_name(level)] = {
        {"decode_gbps_wall", bench::median(dec_wall)},
        {"memcpy_gbps_wall", bench::median(probe_wall)},
        {"ratio_wall", bench::median(ratio_wall)},
        {"decode_gbps_cpu", bench::median(dec_cpu)},
        {"memcpy_gbps_cpu", bench::median(probe_cpu)},
        {"ratio_cpu", bench::median(ratio_cpu)},
        {"ratio_wall_min", *std::min_element(ratio_wall.begin(), ratio_wall.end())},
        {"ratio_wall_max", *std::max_element(ratio_wall.begin(), ratio_wall.end())}};
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
