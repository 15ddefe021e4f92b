// Lease owner names and same-host liveness via /proc/<pid>/stat.
#include "runner/durable/lease_owner.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace nj::runner {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// Field 22 of /proc/<pid>/stat (starttime); "" when the process does not exist or is a
// zombie (dead, not yet reaped by its parent).
std::string process_start_ticks(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!f || !std::getline(f, stat)) return "";
  // The command name (field 2) is in parentheses and may contain spaces: skip past its ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return "";
    if (i == 3 && (field == "Z" || field == "X")) return "";
  }
  return field;
}

}  // namespace

std::string this_lease_owner() {
  const long pid = static_cast<long>(getpid());
  return host_name() + "/" + std::to_string(pid) + "/" + process_start_ticks(pid);
}

bool lease_owner_alive(const std::string& owner) {
  const size_t a = owner.find('/');
  const size_t b = owner.rfind('/');
  if (a == std::string::npos || b == a) return true;
  if (owner.substr(0, a) != host_name()) return true;
  char* end = nullptr;
  const long pid = std::strtol(owner.c_str() + a + 1, &end, 10);
  if (end != owner.c_str() + b || pid <= 0) return true;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  const std::string start = process_start_ticks(pid);
  if (start.empty()) return false;  // gone between the two checks
  return start == owner.substr(b + 1);
}

}  // namespace nj::runner
