// When `run` must stop: SIGTERM / SIGINT and the --until deadline.
//
// The first signal asks for a graceful stop: the item in flight finishes its current token,
// checkpoints, commits and the process exits 0. A second signal exits at once with 128 + the
// signal number; that is as safe as a crash (every write is transactional and resume does not
// depend on a clean exit), only the work since the last commit is redone.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>

namespace nj::runner {

class StopControl {
 public:
  // `deadline`: stop at this wall-clock instant (nullopt: none); `deadline_text` names it
  // in messages ("07:00").
  explicit StopControl(std::optional<std::time_t> deadline = std::nullopt,
                       std::string deadline_text = {});

  // Installs the SIGTERM and SIGINT handlers (process-wide; call once).
  static void install_signal_handlers();

  // Non-empty once a stop is due: "SIGTERM", "SIGINT", "deadline 07:00", or what request()
  // said.
  std::optional<std::string> reason() const;

  // Asks for a graceful stop from inside the process (the run failed: the items of its
  // batch checkpoint and give their leases back). The first request's reason is kept.
  // REQUIRES: not concurrent with reason() on another thread (the runner's turns).
  void request(std::string reason);

  // The item runner publishes its output-token count after every token; the signal handler
  // records the value current when the first signal arrives, so the stop can report how
  // many tokens it took (the one in flight at most).
  static void publish_tokens(int64_t tokens);
  // The count published when the first signal arrived; nullopt before any signal.
  static std::optional<int64_t> tokens_at_signal();

 private:
  std::optional<std::time_t> deadline_;
  std::string deadline_text_;
  std::optional<std::string> requested_;
};

}  // namespace nj::runner
