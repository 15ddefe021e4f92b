// Keeps the leases of the items this process holds alive from a background thread, so that
// a long engine call (a pass over a giant model can take minutes) never lets a lease
// expire. The leases are a set: one heartbeat (one transaction) extends all of them. It has
// its own store connection and touches only lease_expires; when a lease turns out to be
// gone (item cancelled, or reclaimed after this process stalled) that item's lost() turns
// true, which its runner checks after every pass.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
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

  // Adds `item_id` to the set heartbeated (starting the thread on first use).
  // REQUIRES: the lease is ours. ResourceExhausted when the system refuses to start the
  // thread (the item is then not in the set).
  Status add(int64_t item_id);
  // Removes it from the set (its runner is done with it).
  void remove(int64_t item_id);
  // Stops heartbeating; returns when the thread has finished its current write.
  void stop();
  // True once a heartbeat found the item's lease gone.
  bool lost(int64_t item_id) const;

 private:
  void loop();

  std::string db_path_;
  std::string owner_;
  double lease_s_;
  std::unique_ptr<JobStore> store_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::set<int64_t> held_;  // guarded by mu_
  std::set<int64_t> lost_;  // guarded by mu_
};

// One item's view of the keeper (what an item runner checks).
class ItemLease {
 public:
  ItemLease(const LeaseKeeper& keeper, int64_t item_id) : keeper_(keeper), item_id_(item_id) {}
  bool lost() const { return keeper_.lost(item_id_); }

 private:
  const LeaseKeeper& keeper_;
  int64_t item_id_;
};

}  // namespace nj::runner
