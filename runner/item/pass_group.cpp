// PassGroup: member threads, turns and shared passes (see pass_group.h).
#include "runner/item/pass_group.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "engine/runtime/model_plan.h"
#include "runner/durable/sweep_boundaries.h"

namespace nj::runner {

struct PassGroup::Member {
  enum class State { kRunning, kWaiting, kWoken, kFinished };
  State state = State::kRunning;
  std::thread thread;
  std::condition_variable cv;
  SeqStep step;
  std::span<SweepSequence> sweep;  // a sweep part (empty: a pass step, or skipping)
  int64_t sweep_job = 0;           // the job and item of its part
  int64_t sweep_item = 0;
  std::span<const int32_t> sweep_after;  // the job's prefix its part's roots continue
  bool prompt = false;             // its part keeps final states: a generate item's prompt
  int window = 0;                  // the parts its sweep carried
  uint64_t order = 0;
  Status result;
};

namespace {
thread_local PassGroup::Member* t_member = nullptr;  // the member this thread runs
}  // namespace

void PassTotals::add(const PassTotals& o) {
  passes += o.passes;
  sweeps += o.sweeps;
  rows += o.rows;
  bytes_read += o.bytes_read;
  compute_s += o.compute_s;
  wait_s += o.wait_s;
  max_sequences = std::max(max_sequences, o.max_sequences);
}

ItemSession::ItemSession(PassGroup& group, int prefill_chunk)
    : group_(group), prefill_chunk_(std::max(1, prefill_chunk)) {}

SequenceState& ItemSession::live_state() {
  if (state_.layers.empty()) state_ = SequenceState::empty(config());
  return state_;
}

Status ItemSession::feed(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  return feed_in_chunks(live_state(), ids, prefill_chunk_, group_.forward().config().vocab,
                        all_logits, &usage_,
                        [this](SeqStep& step) { return group_.take_part(step); });
}

Status ItemSession::feed_tentative(std::span<const int32_t> ids, std::vector<float>* all_logits) {
  all_logits->resize(ids.size() * static_cast<size_t>(config().vocab));
  SeqStep step{&live_state(), ids, LogitsWanted::kAll, all_logits->data(), &usage_};
  step.tentative = true;
  return group_.take_part(step);
}

const ModelConfig& ItemSession::config() const {
  return group_.forward().config();
}

Status ItemSession::keep(int rows) {
  return group_.forward().keep(live_state(), rows);
}

Status ItemSession::sweep(std::span<SweepSequence> part, int64_t job_id, int64_t item_id,
                          std::span<const int32_t> after) {
  for (SweepSequence& s : part)
    if (!s.usage) s.usage = &usage_;
  return group_.take_sweep(part, job_id, item_id, after, &last_window_);
}

Status ItemSession::sweep_prompt(std::span<const int32_t> ids, int64_t job_id, int64_t item_id) {
  SweepSequence s{ids, nullptr, -1, LogitsWanted::kLast};
  s.final_state = &state_;  // every layer, replaced
  s.usage = &usage_;
  return group_.take_sweep(std::span<SweepSequence>(&s, 1), job_id, item_id, {}, &last_window_);
}

Status ItemSession::skip_pass() {
  return group_.take_part(SeqStep{});
}

PassGroup::PassGroup(Forward& forward, int max_rows, int sweep_chunk_rows)
    : forward_(forward),
      max_rows_(std::max(1, max_rows)),
      sweep_chunk_rows_(std::max(1, sweep_chunk_rows)),
      lock_(mu_) {}

PassGroup::~PassGroup() {
  if (lock_.owns_lock()) lock_.unlock();
  for (auto& m : members_)
    if (m->thread.joinable()) m->thread.join();
}

void PassGroup::spawn(std::function<void()> body) {
  auto m = std::make_unique<Member>();
  Member* self = m.get();
  members_.push_back(std::move(m));
  self->thread = std::thread([this, self, body = std::move(body)] {
    std::unique_lock<std::mutex> hold(mu_);  // the member's turn
    t_member = self;
    body();
    t_member = nullptr;
    self->state = Member::State::kFinished;
    scheduler_cv_.notify_all();
  });
}

Status PassGroup::take_part(SeqStep step) {
  Member* self = t_member;
  NJ_CHECK_MSG(self != nullptr, "ItemSession::feed outside a PassGroup member");
  // The caller holds mu_ (its turn): the member thread's lock in spawn().
  std::unique_lock<std::mutex> turn(mu_, std::adopt_lock);
  self->step = step;
  self->sweep = {};
  self->order = waiting_order_++;
  self->state = Member::State::kWaiting;
  scheduler_cv_.notify_all();
  self->cv.wait(turn, [self] { return self->state == Member::State::kWoken; });
  self->state = Member::State::kRunning;
  turn.release();  // still held: the member keeps its turn
  return self->result;
}

Status PassGroup::take_sweep(std::span<SweepSequence> part, int64_t job_id, int64_t item_id,
                             std::span<const int32_t> after, int* window) {
  Member* self = t_member;
  NJ_CHECK_MSG(self != nullptr, "ItemSession::sweep outside a PassGroup member");
  NJ_CHECK_MSG(!part.empty(), "ItemSession::sweep without sequences");
  std::unique_lock<std::mutex> turn(mu_, std::adopt_lock);
  self->step = SeqStep{};
  self->sweep = part;
  self->sweep_job = job_id;
  self->sweep_item = item_id;
  self->sweep_after = after;
  self->prompt = std::any_of(part.begin(), part.end(),
                             [](const SweepSequence& q) { return q.final_state != nullptr; });
  self->order = waiting_order_++;
  self->state = Member::State::kWaiting;
  scheduler_cv_.notify_all();
  self->cv.wait(turn, [self] { return self->state == Member::State::kWoken; });
  self->state = Member::State::kRunning;
  self->sweep = {};
  *window = self->window;
  turn.release();
  return self->result;
}

void PassGroup::run_sweep(std::vector<Member*> members) {
  // The window: every part end to end, each part's parents shifted to its place, in (job,
  // item) order, so that the same items form the same window (and find its saved boundaries)
  // in whatever order their threads came to wait.
  std::sort(members.begin(), members.end(), [](const Member* a, const Member* b) {
    return std::pair(a->sweep_job, a->sweep_item) < std::pair(b->sweep_job, b->sweep_item);
  });
  // A job's template prefix, when its parts continue one, comes first: one root for the job,
  // the parent of their roots (its layer states live only while their layer runs).
  std::vector<SweepSequence> window;
  std::map<int64_t, int> prefix_of;  // job -> its prefix's index in the window
  for (Member* m : members)
    if (!m->sweep_after.empty() &&
        prefix_of.emplace(m->sweep_job, static_cast<int>(window.size())).second)
      window.push_back(SweepSequence{m->sweep_after, nullptr, -1, LogitsWanted::kNone});
  for (Member* m : members) {
    const int base = static_cast<int>(window.size());
    for (SweepSequence s : m->sweep) {
      if (s.parent >= 0) s.parent += base;
      else if (!s.start && !m->sweep_after.empty())
        s.parent = prefix_of.at(m->sweep_job);
      window.push_back(s);
    }
  }
  Sweep sweep(forward_.config(), forward_.weights(), SweepOptions{sweep_chunk_rows_});
  // With a home: saved layer boundaries. Not for prompts, whose final states a sweep resumed at
  // a layer would not have (a crash redoes the window's prompts; each item checkpoints after).
  const bool prompts = std::any_of(members.begin(), members.end(), [](const Member* m) { return m->prompt; });
  std::unique_ptr<SweepBoundaries> boundaries;
  if (keeping_ && !prompts)
    boundaries = std::make_unique<SweepBoundaries>(*Env::posix(), *keeping_, members.front()->sweep_job,
                                                   SweepBoundaries::window_key(window));
  const Status st = sweep.run(window, boundaries.get());
  if (boundaries) {
    if (boundaries->saves() > 0)
      spdlog::info("sweep: {} boundary save(s), {} bytes in {:.2f} s", boundaries->saves(),
                   boundaries->saved_bytes(), boundaries->save_s());
    if (st.ok()) boundaries->remove();
  }
  const SweepStats& s = sweep.last();
  PassTotals t;
  t.passes = 1;
  t.sweeps = 1;
  t.rows = static_cast<uint64_t>(s.rows);
  t.bytes_read = static_cast<double>(s.bytes_read());
  t.compute_s = s.compute_s;
  t.wait_s = s.wait_s;
  t.max_sequences = static_cast<int>(members.size());
  if (st.ok()) totals_.add(t);
  for (Member* m : members) {
    m->result = st;
    m->window = static_cast<int>(members.size());
    m->state = Member::State::kWoken;
    m->cv.notify_all();
  }
}

int PassGroup::wait_for_members() {
  scheduler_cv_.wait(lock_, [this] {
    return std::all_of(members_.begin(), members_.end(), [](const auto& m) {
      return m->state == Member::State::kWaiting || m->state == Member::State::kFinished;
    });
  });
  int finished = 0;
  for (auto it = members_.begin(); it != members_.end();) {
    if ((*it)->state == Member::State::kFinished) {
      // It gave up mu_ when its body returned; join without holding it.
      lock_.unlock();
      (*it)->thread.join();
      lock_.lock();
      it = members_.erase(it);
      ++finished;
    } else {
      ++it;
    }
  }
  return finished;
}

bool PassGroup::anyone_waiting() const {
  return std::any_of(members_.begin(), members_.end(),
                     [](const auto& m) { return m->state == Member::State::kWaiting; });
}

void PassGroup::run_pass() {
  std::vector<Member*> waiting;
  for (auto& m : members_)
    if (m->state == Member::State::kWaiting) waiting.push_back(m.get());
  std::sort(waiting.begin(), waiting.end(),
            [](Member* a, Member* b) { return a->order < b->order; });
  // The oldest waiters first, as many as fit (a member never waits behind a newer one).
  std::vector<SeqStep> steps;
  std::vector<Member*> in_pass, skipping;
  int rows = 0;
  // Members that skip passes (waiting at the prefix gate) look again before each pass: the
  // gate may have opened since the last one, and then they join this pass.
  if (!skippers_looked_) {
    bool woke = false;
    for (Member* m : waiting)
      if (m->step.ids.empty() && m->sweep.empty()) {
        m->result = Status();
        m->state = Member::State::kWoken;
        m->cv.notify_all();
        woke = true;
      }
    if (woke) {
      skippers_looked_ = true;
      return;  // the scheduler waits for them again, then calls run_pass
    }
  }
  skippers_looked_ = false;
  std::vector<Member*> sweeping, prompts;
  for (Member* m : waiting) {
    if (!m->sweep.empty()) {
      (m->prompt ? prompts : sweeping).push_back(m);  // a document waits for the pass steps first
      continue;
    }
    const int n = static_cast<int>(m->step.ids.size());
    if (n == 0) {
      skipping.push_back(m);
      continue;
    }
    if (!in_pass.empty() && rows + n > max_rows_) continue;
    steps.push_back(m->step);
    in_pass.push_back(m);
    rows += n;
  }
  for (Member* m : skipping) {
    m->result = Status();
    m->state = Member::State::kWoken;
    m->cv.notify_all();
  }
  // Prompts waiting to be swept go before the pass (its members wait one sweep): a window of
  // the first items (by job and item, as they were claimed: the order their threads came to
  // wait in is not deterministic), as many as fit its rows and kPromptSweepSequences (the
  // first always). The scheduler fills places freed meanwhile before the next one.
  if (!prompts.empty()) {
    std::sort(prompts.begin(), prompts.end(), [](const Member* a, const Member* b) {
      return std::pair(a->sweep_job, a->sweep_item) < std::pair(b->sweep_job, b->sweep_item);
    });
    std::vector<Member*> window;
    int64_t window_rows = 0;
    for (Member* m : prompts) {
      const int64_t n = static_cast<int64_t>(m->sweep.front().ids.size());
      if (!joins_prompt_window(static_cast<int>(window.size()), window_rows, n, prompt_sweep_rows_))
        break;
      window.push_back(m);
      window_rows += n;
    }
    run_sweep(window);
    return;
  }
  // A sweep once no member has a pass step to take (its prefix prefilled, say): the window is
  // every member waiting with a part.
  if (steps.empty()) {
    if (!sweeping.empty()) run_sweep(sweeping);
    return;
  }
  const Status st = forward_.run(steps);
  const PassStats& pass = forward_.last_pass();
  PassTotals t;
  t.passes = 1;
  t.rows = static_cast<uint64_t>(rows);
  t.bytes_read = static_cast<double>(pass.bytes_read());
  t.compute_s = pass.compute_s;
  t.wait_s = pass.wait_s;
  t.max_sequences = static_cast<int>(in_pass.size());
  if (st.ok()) totals_.add(t);
  for (Member* m : in_pass) {
    m->result = st;
    m->state = Member::State::kWoken;
    m->cv.notify_all();
  }
}

}  // namespace nj::runner
