// A timeline of the streaming pipeline, for diagnosis: when each trunk unit was asked for,
// when its reads started and ended, when its blocks' decoding started and ended, and when the
// forward pass waited for it and let it go. Off unless a caller passes one in (stream_bench
// --timeline); recording is one locked push_back per event, a few hundred per token.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace nj {

enum class TimelineKind : uint8_t {
  kSubmit,       // the unit's reads were queued (block -1; arg: 0 urgent, 1 prefetch)
  kReadStart,    // an I/O thread took a chunk or block off the queue
  kReadEnd,      // its bytes arrived (for a block held in RAM: at once)
  kDecodeStart,  // a decode thread started its `consume` step (decoding)
  kDecodeEnd,    // ... and finished it
  kWaitBegin,    // the forward pass asked for the unit (block -1)
  kWaitEnd,      // ... and had its bytes (block -1)
  kRelease,      // the forward pass let it go (block -1)
};

const char* timeline_kind_name(TimelineKind kind);

struct TimelineEvent {
  double t_s = 0;  // steady clock, seconds
  int unit = -1;   // trunk unit (layer, or layers for the head)
  int block = -1;  // block or chunk index within the unit's batch; -1 for the whole unit
  TimelineKind kind = TimelineKind::kSubmit;
  int arg = 0;
};

// Thread-safe.
class Timeline {
 public:
  void record(int unit, int block, TimelineKind kind, int arg = 0);
  std::vector<TimelineEvent> events() const;
  void clear();

 private:
  mutable std::mutex mu_;
  std::vector<TimelineEvent> events_;
};

// Where a read belongs on a timeline (ReadRequest::trace). `timeline` null: not traced.
struct ReadTrace {
  Timeline* timeline = nullptr;
  int unit = -1;
  int block = -1;
};

}  // namespace nj
