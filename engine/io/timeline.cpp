// Timeline: events of the streaming pipeline (see the header).
#include "engine/io/timeline.h"

#include <chrono>

namespace nj {

const char* timeline_kind_name(TimelineKind kind) {
  switch (kind) {
    case TimelineKind::kSubmit:
      return "submit";
    case TimelineKind::kReadStart:
      return "read_start";
    case TimelineKind::kReadEnd:
      return "read_end";
    case TimelineKind::kDecodeStart:
      return "decode_start";
    case TimelineKind::kDecodeEnd:
      return "decode_end";
    case TimelineKind::kWaitBegin:
      return "wait_begin";
    case TimelineKind::kWaitEnd:
      return "wait_end";
    case TimelineKind::kRelease:
      return "release";
  }
  return "?";
}

void Timeline::record(int unit, int block, TimelineKind kind, int arg) {
  const double t =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(TimelineEvent{t, unit, block, kind, arg});
}

std::vector<TimelineEvent> Timeline::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

void Timeline::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  events_.clear();
}

}  // namespace nj
