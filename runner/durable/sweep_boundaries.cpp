// SweepBoundaries: a sweep's layer boundaries in the home (see sweep_boundaries.h).
#include "runner/durable/sweep_boundaries.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "engine/io/durable.h"
#include "engine/io/lock_file.h"
#include "engine/ops/numerics.h"
#include "engine/state/state_format.h"

namespace nj::runner {
namespace {

constexpr char kMagic[8] = {'N', 'J', 'S', 'W', 'E', 'E', 'P', '1'};
constexpr uint32_t kFormat = 1;
constexpr size_t kHeaderBytes = 48;
constexpr size_t kPiece = size_t{64} << 20;  // bytes hashed and written or read at once

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

using state_format::get_u32;
using state_format::get_u64;
using state_format::Hasher;
using state_format::put_u32;
using state_format::put_u64;

// Hashes a run of token ids, its length first.
void hash_ints(Hasher& h, std::span<const int32_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  h.update(&n, sizeof(n));
  h.update(v.data(), v.size() * sizeof(int32_t));
}

std::string hex(uint64_t v) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = d[v & 15];
  return s;
}

// The float runs of a boundary, in file order: h, then each bank entry.
template <class F>
Status each_run(const SweepBoundary& b, F&& f) {
  const size_t n = static_cast<size_t>(b.rows) * static_cast<size_t>(b.hidden);
  NJ_RETURN_IF_ERROR(f(b.h, n));
  for (int j = 0; j < b.banked; ++j) NJ_RETURN_IF_ERROR(f(b.blocks + static_cast<size_t>(j) * b.block_stride, n));
  return Status();
}

}  // namespace

SweepBoundaries::SweepBoundaries(Env& env, const SweepKeeping& keeping, int64_t job_id, uint64_t window_key)
    : env_(env), keeping_(keeping), path_(keeping.home_dir + "/" + path(job_id, window_key)), key_(window_key),
      last_save_(now_s()) {
  if (const char* k = std::getenv("NIGHTJAR_TEST_SWEEP_KILL_AT"); k && *k) kill_at_ = std::atoi(k);
}

uint64_t SweepBoundaries::window_key(std::span<const SweepSequence> window) {
  Hasher h;
  for (const SweepSequence& q : window) {
    const int64_t head[2] = {q.parent, q.start ? q.start->position : -1};
    h.update(head, sizeof(head));
    hash_ints(h, q.start ? std::span<const int32_t>(q.start->tokens) : std::span<const int32_t>());
    hash_ints(h, q.ids);
  }
  return h.digest();
}

std::string SweepBoundaries::path(int64_t job_id, uint64_t window_key) {
  return "checkpoints/sweep-j" + std::to_string(job_id) + "-" + hex(window_key);
}

Status SweepBoundaries::resume(SweepBoundary& b) {
  if (!env_.exists(path_)) return Status();
  const auto t0 = now_s();
  if (Status s = load(b); !s.ok()) {
    spdlog::warn("sweep: the boundary file {} is unusable ({}); the window starts at layer 0", path_,
                 s.message());
    b.layer = 0;
    b.banked = 0;
    return Status();
  }
  resumed_layer_ = b.layer;
  spdlog::info("sweep: the window resumes at layer {} from {} ({:.2f} s)", b.layer, path_, now_s() - t0);
  last_save_ = now_s();
  return Status();
}

Status SweepBoundaries::load(SweepBoundary& b) {
  NJ_ASSIGN_OR_RETURN(auto file, env_.open_read(path_));
  if (file->size() < kHeaderBytes + 8) return corruption("it is shorter than its header");
  char head[kHeaderBytes];
  NJ_RETURN_IF_ERROR(file->read_at(0, head, kHeaderBytes));
  if (std::memcmp(head, kMagic, sizeof(kMagic)) != 0) return corruption("it is not a sweep boundary file");
  if (get_u32(head + 8) != kFormat) return corruption("format " + std::to_string(get_u32(head + 8)));
  if (get_u32(head + 12) != kNumericsVersion) return failed_precondition("another numerics version");
  if (get_u64(head + 16) != keeping_.model_fingerprint) return failed_precondition("another model");
  if (get_u64(head + 24) != key_) return failed_precondition("another window");
  const uint32_t layer = get_u32(head + 32), rows = get_u32(head + 36), hidden = get_u32(head + 40),
                 banked = get_u32(head + 44);
  if (rows != static_cast<uint32_t>(b.rows) || hidden != static_cast<uint32_t>(b.hidden))
    return corruption("its rows or width differ from the window's");
  SweepBoundary in = b;
  in.layer = static_cast<int>(layer);
  in.banked = static_cast<int>(banked);
  const uint64_t floats = static_cast<uint64_t>(rows) * hidden * (1 + static_cast<uint64_t>(banked));
  if (banked > 4096 || file->size() != kHeaderBytes + floats * 4 + 8)
    return corruption("its size does not match its header");
  Hasher sum;
  sum.update(head, kHeaderBytes);
  uint64_t at = kHeaderBytes;
  Status st = each_run(in, [&](float* dst, size_t n) -> Status {
    auto* p = reinterpret_cast<char*>(dst);
    for (size_t done = 0, bytes = n * sizeof(float); done < bytes;) {
      const size_t k = std::min(kPiece, bytes - done);
      NJ_RETURN_IF_ERROR(file->read_at(at, p + done, k));
      sum.update(p + done, k);
      done += k;
      at += k;
    }
    return Status();
  });
  NJ_RETURN_IF_ERROR(st);
  char tail[8];
  NJ_RETURN_IF_ERROR(file->read_at(at, tail, 8));
  if (get_u64(tail) != sum.digest()) return corruption("its checksum does not match");
  b.layer = in.layer;
  b.banked = in.banked;
  return Status();
}

bool SweepBoundaries::at_boundary(const SweepBoundary& b) {
  const bool stop = keeping_.stop && keeping_.stop();
  if (stop || now_s() - last_save_ >= keeping_.interval_s) {
    if (Status s = save(b); !s.ok())
      spdlog::warn("sweep: could not save the boundary before layer {} ({}); a crash redoes more",
                   b.layer, s.message());
    else if (kill_at_ == b.layer)
      std::raise(SIGKILL);  // the crash tests' instant: right after this boundary is durable
  }
  return stop;
}

Status SweepBoundaries::save(const SweepBoundary& b) {
  const auto t0 = now_s();
  NJ_RETURN_IF_ERROR(make_directory(keeping_.home_dir + "/checkpoints", "the checkpoint directory"));
  std::string head;
  head.append(kMagic, sizeof(kMagic));
  put_u32(head, kFormat);
  put_u32(head, kNumericsVersion);
  put_u64(head, keeping_.model_fingerprint);
  put_u64(head, key_);
  for (int v : {b.layer, b.rows, b.hidden, b.banked}) put_u32(head, static_cast<uint32_t>(v));
  uint64_t bytes = 0;
  NJ_RETURN_IF_ERROR(write_file_durably(env_, path_, [&](WritableFile& f) -> Status {
    Hasher sum;
    sum.update(head);
    Status st = f.append(head);
    if (st.ok())
      st = each_run(b, [&](const float* src, size_t n) -> Status {
        const char* p = reinterpret_cast<const char*>(src);
        for (size_t done = 0, total = n * sizeof(float); done < total;) {
          const size_t k = std::min(kPiece, total - done);
          sum.update(p + done, k);
          NJ_RETURN_IF_ERROR(f.append(std::string_view(p + done, k)));
          done += k;
        }
        return Status();
      });
    NJ_RETURN_IF_ERROR(st);
    std::string tail;
    put_u64(tail, sum.digest());
    bytes = head.size() + static_cast<uint64_t>(b.rows) * static_cast<uint64_t>(b.hidden) *
                              (1 + static_cast<uint64_t>(b.banked)) * 4 + tail.size();
    return f.append(tail);
  }));
  ++saves_;
  saved_bytes_ += bytes;
  last_save_ = now_s();
  save_s_ += last_save_ - t0;
  spdlog::debug("sweep: saved the boundary before layer {} ({} bytes, {:.2f} s)", b.layer, bytes, last_save_ - t0);
  return Status();
}

void SweepBoundaries::remove() {
  if (env_.exists(path_)) (void)env_.remove(path_);
}

void SweepBoundaries::remove_job(Env& env, const std::string& home_dir, int64_t job_id) {
  const std::string dir = home_dir + "/checkpoints";
  auto names = env.children(dir);
  if (!names.ok()) return;
  const std::string prefix = "sweep-j" + std::to_string(job_id) + "-";
  for (const std::string& name : *names)
    if (name.rfind(prefix, 0) == 0) (void)env.remove(dir + "/" + name);
}

}  // namespace nj::runner
