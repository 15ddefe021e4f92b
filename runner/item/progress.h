// Progress of `run`: on a terminal, one live status line at the bottom of stderr (item,
// tokens, rate, ETA) that log messages scroll above; otherwise a plain log line every
// `log_interval_s`. Also sets up the log file under the home directory.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <spdlog/sinks/base_sink.h>

namespace nj::runner {

// A stderr sink that keeps a status line below the log messages it prints.
// Thread-safe (spdlog's base_sink locks).
class StatusLineSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  // Replaces the status line (empty: none) and redraws it.
  void set_status(const std::string& line);

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;

 private:
  void draw_locked();
  std::string status_;
  bool drawn_ = false;
};

// Routes the default logger to stderr (a StatusLineSink when `tty`) and appends to
// `log_file` (created if missing). `stderr_level` is the level the command line asked for;
// the file always gets info and above (debug with -v). Returns the status sink (null when
// not a terminal). Failure to open the log file is reported as a warning, not an error.
std::shared_ptr<StatusLineSink> setup_run_logging(bool tty, int verbosity,
                                                  const std::string& log_file);

// Formats seconds as "1:02:03" / "2:03".
std::string format_duration(double seconds);

class ProgressReporter {
 public:
  // `status`: the terminal's status line, or null for periodic log lines.
  ProgressReporter(std::shared_ptr<StatusLineSink> status, double log_interval_s);

  // A new item: "job 3 item doc-002" and its token counts so far.
  void begin_item(const std::string& label, int64_t tokens_done, int64_t max_tokens);
  // Prompt / replay catch-up: `fed` of `total` tokens fed to the engine.
  void feeding(const char* what, int64_t fed, int64_t total);
  // Generated tokens; the rate counts only tokens generated in this attempt.
  void tokens(int64_t tokens_done, int64_t max_tokens);
  void end_item();

 private:
  using Clock = std::chrono::steady_clock;
  void emit(const std::string& line, bool force);

  std::shared_ptr<StatusLineSink> status_;
  double log_interval_s_;
  std::string label_;
  Clock::time_point item_start_{};
  int64_t start_tokens_ = 0;
  Clock::time_point decode_start_{};
  bool decoding_ = false;
  Clock::time_point last_emit_{};
};

}  // namespace nj::runner
