// Status line sink, log set-up for `run`, and the progress reporter.
#include "runner/item/progress.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

namespace nj::runner {

void StatusLineSink::set_status(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  status_ = line;
  draw_locked();
}

void StatusLineSink::draw_locked() {
  if (drawn_) std::fputs("\r\033[K", stderr);
  drawn_ = false;
  if (!status_.empty()) {
    std::fputs(status_.c_str(), stderr);
    drawn_ = true;
  }
  std::fflush(stderr);
}

void StatusLineSink::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t buf;
  formatter_->format(msg, buf);
  if (drawn_) std::fputs("\r\033[K", stderr);
  std::fwrite(buf.data(), 1, buf.size(), stderr);
  drawn_ = false;
  draw_locked();
}

void StatusLineSink::flush_() {
  std::fflush(stderr);
}

std::shared_ptr<StatusLineSink> setup_run_logging(bool tty, int verbosity,
                                                  const std::string& log_file) {
  auto logger = spdlog::default_logger();
  const spdlog::level::level_enum stderr_level = logger->level();
  std::shared_ptr<StatusLineSink> status;
  if (tty) {
    status = std::make_shared<StatusLineSink>();
    status->set_pattern("nightjar: %^%l%$: %v");
    status->set_level(stderr_level);
    logger->sinks().clear();
    logger->sinks().push_back(status);
  } else {
    for (auto& sink : logger->sinks()) sink->set_level(stderr_level);
  }
  std::string file_error;
  try {
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, false);
    file->set_pattern("%Y-%m-%d %H:%M:%S.%e [%P] %l: %v");
    file->set_level(verbosity > 0 ? spdlog::level::debug : spdlog::level::info);
    logger->sinks().push_back(file);
    logger->set_level(std::min(stderr_level, file->level()));
    logger->flush_on(spdlog::level::info);
  } catch (const spdlog::spdlog_ex& e) {
    file_error = e.what();
  }
  if (!file_error.empty()) spdlog::warn("{}: cannot write the log file: {}", log_file, file_error);
  // A sink that fails (the log file's disk is full) would make spdlog print its raw
  // "[*** LOG ERROR ***]" line on stderr for each message; say it once, as nightjar speaks.
  // The other sinks have the message already (the file is the last sink).
  logger->set_error_handler([log_file](const std::string& what) {
    static std::atomic<bool> said{false};
    if (said.exchange(true)) return;
    std::fprintf(stderr,
                 "nightjar: warning: %s: cannot write the log file: %s (messages go to stderr "
                 "only while it fails)\n",
                 log_file.c_str(), what.c_str());
  });
  return status;
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

ProgressReporter::ProgressReporter(std::shared_ptr<StatusLineSink> status, double log_interval_s)
    : status_(std::move(status)), log_interval_s_(log_interval_s) {}

void ProgressReporter::begin_item(const std::string& label, int64_t tokens_done, int64_t) {
  label_ = label;
  item_start_ = Clock::now();
  start_tokens_ = tokens_done;
  decoding_ = false;
  last_emit_ = item_start_;
}

void ProgressReporter::feeding(const char* what, int64_t fed, int64_t total) {
  emit(label_ + "  " + what + " " + std::to_string(fed) + "/" + std::to_string(total) + " tokens",
       false);
}

void ProgressReporter::tokens(int64_t tokens_done, int64_t max_tokens) {
  const auto now = Clock::now();
  if (!decoding_) {
    decoding_ = true;
    decode_start_ = now;
    start_tokens_ = tokens_done;
  }
  const double elapsed = std::chrono::duration<double>(now - decode_start_).count();
  const int64_t made = tokens_done - start_tokens_;
  std::string line =
      label_ + "  " + std::to_string(tokens_done) + "/" + std::to_string(max_tokens) + " tokens";
  if (made > 0 && elapsed > 0) {
    const double rate = made / elapsed;
    char buf[96];
    std::snprintf(buf, sizeof buf, "  %.2f tok/s  ETA %s", rate,
                  format_duration(static_cast<double>(max_tokens - tokens_done) / rate).c_str());
    line += buf;
  }
  emit(line, false);
}

void ProgressReporter::end_item() {
  if (status_) status_->set_status("");
  label_.clear();
}

void ProgressReporter::emit(const std::string& line, bool force) {
  const auto now = Clock::now();
  const double since = std::chrono::duration<double>(now - last_emit_).count();
  if (status_) {
    // Redraw at most 10 times a second: a terminal is slower than a tiny model.
    if (!force && since < 0.1) return;
    last_emit_ = now;
    status_->set_status(line);
    return;
  }
  if (!force && since < log_interval_s_) return;
  last_emit_ = now;
  spdlog::info("{}", line);
}

}  // namespace nj::runner
