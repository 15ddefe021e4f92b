// Lease owners: how a `run` process names itself in the store ("host/pid/start"), and how
// another process on the same host tells whether that owner still exists. A lease held by a
// dead process is reclaimed at once instead of waiting for it to expire.
#pragma once

#include <string>

namespace nj::runner {

// "<hostname>/<pid>/<process start time in clock ticks since boot>". The start time tells a
// recycled pid from the original process.
std::string this_lease_owner();

// False only when `owner` names a process on this host that no longer exists (or whose pid
// now belongs to a process started at another time). Owners on other hosts, and strings
// that do not parse, count as alive: their leases end by expiry.
bool lease_owner_alive(const std::string& owner);

}  // namespace nj::runner
