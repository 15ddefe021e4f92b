// The heartbeat thread.
#include "runner/lease_keeper.h"

#include <chrono>
#include <system_error>

#include <spdlog/spdlog.h>

namespace nj::runner {

LeaseKeeper::LeaseKeeper(std::string db_path, std::string owner, double lease_s)
    : db_path_(std::move(db_path)), owner_(std::move(owner)), lease_s_(lease_s) {}

LeaseKeeper::~LeaseKeeper() {
  stop();
}

Status LeaseKeeper::start(int64_t item_id) {
  stop();
  lost_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  try {
    thread_ = std::thread([this, item_id] { loop(item_id); });
  } catch (const std::system_error& e) {
    return resource_exhausted(std::string("cannot start the lease heartbeat thread: ") + e.what());
  }
  return Status();
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

void LeaseKeeper::loop(int64_t item_id) {
  const auto period = std::chrono::duration<double>(lease_s_ / 4);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, period, [this] { return stopping_; })) return;
    }
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
    auto owned = store_->heartbeat(item_id, owner_, lease_s_);
    if (!owned.ok()) {
      spdlog::warn("heartbeat: {}", owned.status().message());
    } else if (!*owned) {
      lost_ = true;
      return;
    }
  }
}

}  // namespace nj::runner
