// Signal handling for graceful stops: async-signal-safe atomics only.
#include "runner/item/stop.h"

#include <unistd.h>

#include <atomic>
#include <csignal>

namespace nj::runner {
namespace {

std::atomic<int> g_signal{0};      // the first signal received
std::atomic<int64_t> g_tokens{0};  // published by the item runner
std::atomic<int64_t> g_tokens_at_signal{-1};
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "signal handlers need lock-free atomics");

extern "C" void on_stop_signal(int sig) {
  int expected = 0;
  if (g_signal.compare_exchange_strong(expected, sig)) {
    g_tokens_at_signal.store(g_tokens.load());
    static const char kMsg[] =
        "\nnightjar: stopping after the current token (signal again to exit at once)\n";
    (void)!write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
    return;
  }
  static const char kNow[] = "\nnightjar: second signal: exiting now\n";
  (void)!write(STDERR_FILENO, kNow, sizeof kNow - 1);
  _exit(128 + sig);
}

}  // namespace

StopControl::StopControl(std::optional<std::time_t> deadline, std::string deadline_text)
    : deadline_(deadline), deadline_text_(std::move(deadline_text)) {}

void StopControl::install_signal_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a sleeping poll wakes up
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

std::optional<std::string> StopControl::reason() const {
  const int sig = g_signal.load();
  if (sig == SIGTERM) return std::string("SIGTERM");
  if (sig == SIGINT) return std::string("SIGINT");
  if (sig != 0) return "signal " + std::to_string(sig);
  if (deadline_ && std::time(nullptr) >= *deadline_) return "deadline " + deadline_text_;
  return requested_;
}

void StopControl::request(std::string reason) {
  if (!requested_) requested_ = std::move(reason);
}

void StopControl::publish_tokens(int64_t tokens) {
  g_tokens.store(tokens, std::memory_order_relaxed);
}

std::optional<int64_t> StopControl::tokens_at_signal() {
  const int64_t v = g_tokens_at_signal.load();
  if (v < 0) return std::nullopt;
  return v;
}

}  // namespace nj::runner
