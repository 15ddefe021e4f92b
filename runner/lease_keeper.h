// Keeps the lease of the item being run alive from a background thread, so that a long
// engine call (a prefill chunk of a giant model can take minutes) never lets the lease
// expire. It has its own store connection and touches only lease_expires; when the lease
// turns out to be gone (item cancelled, or reclaimed after this process stalled) it raises
// lost(), which the item runner checks after every token.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runner/store/job_store.h"

namespace nj::runner {

class LeaseKeeper {
 public:
  // Heartbeats every lease_s / 4 through a connection to `db_path` opened on first use.
  LeaseKeeper(std::string db_path, std::string owner, double lease_s);
  ~LeaseKeeper();  // stops the thread
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Starts heartbeating `item_id` (stopping any previous item). REQUIRES: the lease is ours.
  // ResourceExhausted when the system refuses to start the thread.
  Status start(int64_t item_id);
  // Stops heartbeating; returns when the thread has finished its current write.
  void stop();
  // True once a heartbeat found the lease gone.
  bool lost() const { return lost_.load(); }

 private:
  void loop(int64_t item_id);

  std::string db_path_;
  std::string owner_;
  double lease_s_;
  std::unique_ptr<JobStore> store_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> lost_{false};
};

}  // namespace nj::runner
