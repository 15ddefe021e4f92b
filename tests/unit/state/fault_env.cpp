// FaultEnv: operation counting, injected failures and crash simulation for Env users.
#include "tests/unit/state/fault_env.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace nj::state_testing {
namespace {

constexpr size_t kTornHalf = SIZE_MAX;  // partial_bytes meaning "half of the append"

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

const char* fs_op_name(FsOp op) {
  switch (op) {
    case FsOp::kCreate:
      return "create";
    case FsOp::kOpenAppend:
      return "open-append";
    case FsOp::kAppend:
      return "append";
    case FsOp::kSync:
      return "sync";
    case FsOp::kClose:
      return "close";
    case FsOp::kRename:
      return "rename";
    case FsOp::kSyncDir:
      return "sync-dir";
    case FsOp::kRemove:
      return "remove";
  }
  return "?";
}

// A WritableFile whose operations go through the FaultEnv's counter.
class FaultFile final : public WritableFile {
 public:
  FaultFile(FaultEnv& env, std::unique_ptr<WritableFile> inner)
      : env_(env), inner_(std::move(inner)) {}

  Status append(std::string_view data) override {
    if (auto f = env_.begin(FsOp::kAppend, path())) {
      const size_t part =
          f->partial_bytes == kTornHalf ? data.size() / 2 : std::min(f->partial_bytes, data.size());
      if (part > 0 && inner_->append(data.substr(0, part)).ok()) track().size += part;
      return Status(f->code,
                    path() + ": injected append failure after " + std::to_string(part) + " bytes");
    }
    NJ_RETURN_IF_ERROR(inner_->append(data));
    track().size += data.size();
    env_.appended_bytes_ += data.size();
    return Status();
  }
  Status sync() override {
    if (auto f = env_.begin(FsOp::kSync, path()))
      return Status(f->code, path() + ": injected fdatasync failure");
    if (env_.os_sync_) NJ_RETURN_IF_ERROR(inner_->sync());
    track().synced_size = track().size;
    return Status();
  }
  Status close() override {
    if (auto f = env_.begin(FsOp::kClose, path()))
      return Status(f->code, path() + ": injected close failure");
    return inner_->close();
  }
  const std::string& path() const override { return inner_->path(); }

 private:
  FaultEnv::FileTrack& track() { return env_.files_[path()]; }
  FaultEnv& env_;
  std::unique_ptr<WritableFile> inner_;
};

void FaultEnv::fail_op(uint64_t index, StatusCode code, size_t partial_bytes) {
  fail_at_[index] = {code, partial_bytes};
}
void FaultEnv::fail_every(FsOp op, StatusCode code) {
  fail_every_[op] = code;
}
void FaultEnv::crash_at(uint64_t index) {
  crash_at_ = index;
}

void FaultEnv::reset() {
  next_op_ = 0;
  fail_at_.clear();
  fail_every_.clear();
  crash_at_.reset();
  log_.clear();
  appended_bytes_ = 0;
}

std::optional<FaultEnv::Injected> FaultEnv::begin(FsOp op, const std::string& path) {
  const uint64_t i = next_op_++;
  log_.push_back(std::to_string(i) + " " + fs_op_name(op) + " " + path);
  if (crash_at_ && i >= *crash_at_) {
    // A crash in the middle of an append leaves half of it on disk.
    return Injected{StatusCode::kIOError, op == FsOp::kAppend && i == *crash_at_ ? kTornHalf : 0};
  }
  if (auto it = fail_at_.find(i); it != fail_at_.end()) return it->second;
  if (auto it = fail_every_.find(op); it != fail_every_.end()) return Injected{it->second, 0};
  return std::nullopt;
}

Result<std::unique_ptr<WritableFile>> FaultEnv::new_writable_file(const std::string& path) {
  if (auto f = begin(FsOp::kCreate, path))
    return Status(f->code, path + ": injected create failure");
  const bool existed = target()->exists(path);
  NJ_ASSIGN_OR_RETURN(auto file, target()->new_writable_file(path));
  files_[path] = FileTrack{};
  if (!existed) created_.push_back(path);
  return std::unique_ptr<WritableFile>(new FaultFile(*this, std::move(file)));
}

Result<std::unique_ptr<WritableFile>> FaultEnv::new_appendable_file(const std::string& path) {
  if (auto f = begin(FsOp::kOpenAppend, path))
    return Status(f->code, path + ": injected open failure");
  NJ_ASSIGN_OR_RETURN(auto file, target()->new_appendable_file(path));
  const uint64_t size = std::filesystem::file_size(path);
  if (!files_.count(path)) files_[path] = FileTrack{size, size};
  return std::unique_ptr<WritableFile>(new FaultFile(*this, std::move(file)));
}

Status FaultEnv::rename(const std::string& from, const std::string& to) {
  if (auto f = begin(FsOp::kRename, from))
    return Status(f->code, from + ": injected rename failure");
  PendingRename r{from, to, std::nullopt};
  if (target()->exists(to)) r.old_to = slurp(to);
  NJ_RETURN_IF_ERROR(target()->rename(from, to));
  if (auto it = files_.find(from); it != files_.end()) {
    files_[to] = it->second;
    files_.erase(it);
  }
  renames_.push_back(std::move(r));
  return Status();
}

Status FaultEnv::sync_dir(const std::string& dir) {
  if (auto f = begin(FsOp::kSyncDir, dir))
    return Status(f->code, dir + ": injected directory fsync failure");
  if (os_sync_) NJ_RETURN_IF_ERROR(target()->sync_dir(dir));
  std::erase_if(created_, [&](const std::string& p) { return dir_name(p) == dir; });
  std::erase_if(renames_, [&](const PendingRename& r) { return dir_name(r.to) == dir; });
  return Status();
}

Status FaultEnv::remove(const std::string& path) {
  if (auto f = begin(FsOp::kRemove, path))
    return Status(f->code, path + ": injected remove failure");
  files_.erase(path);
  return target()->remove(path);
}

void FaultEnv::lose_unsynced() {
  namespace fs = std::filesystem;
  for (auto it = renames_.rbegin(); it != renames_.rend(); ++it) {
    fs::rename(it->to, it->from);
    if (it->old_to) std::ofstream(it->to, std::ios::binary) << *it->old_to;
    if (auto f = files_.find(it->to); f != files_.end()) {
      files_[it->from] = f->second;
      files_.erase(f);
    }
  }
  for (const auto& [path, t] : files_)
    if (fs::exists(path) && fs::file_size(path) > t.synced_size)
      fs::resize_file(path, t.synced_size);
  for (const std::string& p : created_) fs::remove(p);
  renames_.clear();
  created_.clear();
}

}  // namespace nj::state_testing
