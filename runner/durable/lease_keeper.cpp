// The heartbeat thread.
#include "runner/durable/lease_keeper.h"

#include <chrono>
#include <system_error>

#include <spdlog/spdlog.h>

namespace nj::runner {

LeaseKeeper::LeaseKeeper(std::string db_path, std::string owner, double lease_s)
    : db_path_(std::move(db_path)), owner_(std::move(owner)), lease_s_(lease_s) {}

LeaseKeeper::~LeaseKeeper() {
  stop();
}

Status LeaseKeeper::add(int64_t item_id) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.insert(item_id);
  lost_.erase(item_id);
  if (!thread_.joinable()) {
    stopping_ = false;
    try {
      thread_ = std::thread([this] { loop(); });
    } catch (const std::system_error& e) {
      held_.erase(item_id);
      return resource_exhausted(std::string("cannot start the lease heartbeat thread: ") + e.what());
    }
  }
  return Status();
}

void LeaseKeeper::remove(int64_t item_id) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(item_id);
}

bool LeaseKeeper::lost(int64_t item_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_.count(item_id) > 0;
}

void LeaseKeeper::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LeaseKeeper::loop() {
  const auto period = std::chrono::duration<double>(lease_s_ / 4);
  for (;;) {
    std::vector<int64_t> items;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, period, [this] { return stopping_; })) return;
      items.assign(held_.begin(), held_.end());
    }
    if (items.empty()) continue;
    if (!store_) {
      StoreOptions options;
      options.quick_check = false;  // the main connection checked the file
      auto opened = JobStore::open(db_path_, false, options);
      if (!opened.ok()) {
        spdlog::warn("heartbeat: {}", opened.status().message());
        continue;
      }
      store_ = std::move(*opened);
    }
    auto gone = store_->heartbeat(items, owner_, lease_s_);
    if (!gone.ok()) {
      spdlog::warn("heartbeat: {}", gone.status().message());
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t id : *gone)
      if (held_.count(id)) lost_.insert(id);
  }
}

}  // namespace nj::runner
