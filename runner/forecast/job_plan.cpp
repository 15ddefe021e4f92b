// The replay of a job's passes (see job_plan.h).
#include "runner/forecast/job_plan.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "engine/forward/decoder_layer.h"
#include "engine/io/file.h"
#include "engine/model/fingerprint.h"
#include "engine/runtime/model.h"
#include "engine/plan/planner.h"
#include "jobs/spec/label_trie.h"
#include "runner/run/scheduler.h"
#include "runner/store/job_kind.h"
#include "runner/store/job_label.h"
#include "runner/store/job_settings.h"

namespace nj::runner {
namespace {

// Σ (position + 1) over `n` rows fed after `position` rows: what they attend over.
double attended(int64_t position, int64_t n) {
  return static_cast<double>(n) *
         (2.0 * static_cast<double>(position) + static_cast<double>(n) + 1.0) / 2.0;
}

struct Member {
  ItemWork left;              // what it still has to feed
  int64_t position = 0;       // positions in its state
  int64_t waiting_since = 0;  // the pass its current step started waiting at
  int64_t order = 0;          // when it joined (ties among equal waiters)

  bool done() const { return left.prompt_rows == 0 && left.decode_rows == 0; }
  int64_t step_rows(int64_t chunk) const {
    return left.prompt_rows > 0 ? std::min(chunk, left.prompt_rows) : 1;
  }
  // Feeds its step; returns Σ (position + 1) over the step's rows.
  double feed(int64_t n) {
    const double rows_attended = attended(position, n);
    position += n;
    if (left.prompt_rows > 0)
      left.prompt_rows -= n;
    else
      left.decode_rows -= 1;
    return rows_attended;
  }
};

void add_pass(JobPrediction& p, const PassCostModel& cost, const PassShape& shape, int sequences) {
  const PassPrediction pass = cost.predict(shape);
  ++p.passes;
  p.rows += shape.rows;
  p.max_batch = std::max(p.max_batch, sequences);
  p.disk_bytes += pass.disk_bytes;
  p.flops += pass.flops;
  p.io_seconds += pass.io_seconds;
  p.compute_seconds += pass.compute_seconds;
  p.element_seconds += pass.element_seconds;
  p.expert_seconds += pass.expert_seconds;
  p.seconds += pass.seconds;
}

}  // namespace

int64_t JobPrediction::items_within(double s) const {
  return std::count_if(finished_at.begin(), finished_at.end(), [s](double t) { return t <= s; });
}

Result<JobWork> job_work(const jobs::JobSpec& spec) {
  JobWork work;
  int64_t trie_rows = 0;
  if (spec.kind == jobs::JobKind::kClassify) {
    const jobs::ClassifySpec& c = *spec.classify;
    NJ_ASSIGN_OR_RETURN(jobs::LabelTrie trie, jobs::LabelTrie::build(c.label_ids, c.labels));
    for (const auto& path : trie.feed_paths()) {
      trie_rows += static_cast<int64_t>(path.size());
      ++work.label_branches;
    }
    work.shared_prefix_rows = static_cast<int64_t>(c.prefix_ids.size());
    work.prefix_rows = work.shared_prefix_rows;
  }
  for (const jobs::ItemSpec& item : spec.items) {
    ItemWork w;
    w.prompt_rows = static_cast<int64_t>(item.prompt_ids.size());
    if (spec.kind == jobs::JobKind::kClassify) {
      w.start_position = work.shared_prefix_rows;
      w.decode_rows = trie_rows;
    } else {
      w.decode_rows = std::max(0, item.params.max_tokens - 1);
    }
    work.items.push_back(w);
  }
  return work;
}

JobPrediction predict_job(const JobWork& work, const JobPlanShape& shape,
                          const PassCostModel& cost) {
  JobPrediction p;
  p.items = static_cast<int64_t>(work.items.size());
  if (work.items.empty()) return p;
  p.load_bytes = p.disk_bytes = cost.load_bytes();
  p.io_seconds = p.seconds = cost.load_seconds();
  const int64_t chunk = std::max(1, shape.prefill_chunk);
  const int64_t max_rows = std::max(1, shape.max_rows);

  // The shared prefix, alone: the others wait at the prefix gate.
  for (int64_t fed = 0; fed < work.shared_prefix_rows;) {
    const int64_t n = std::min(chunk, work.shared_prefix_rows - fed);
    add_pass(p, cost, PassShape{static_cast<int>(n), 1, attended(fed, n)}, 1);
    fed += n;
  }

  std::deque<ItemWork> queue(work.items.begin(), work.items.end());
  std::vector<Member> members;
  int64_t joined = 0;
  for (int64_t pass = 0;; ++pass) {
    // Fill the batch; items with nothing to feed end at once.
    while (static_cast<int>(members.size()) < std::max(1, shape.batch) && !queue.empty()) {
      Member m{queue.front(), queue.front().start_position, pass, joined++};
      queue.pop_front();
      if (m.done())
        p.finished_at.push_back(p.seconds);
      else
        members.push_back(m);
    }
    if (members.empty()) break;
    // Prompts waiting to be swept go before the pass, one window at a time (PassGroup::run_pass):
    // the first joined, within the window's rows and prompts; places freed meanwhile are filled
    // before the next window (the scheduler's loop).
    if (shape.prompt_sweep_rows > 0) {
      std::vector<Member*> waiting;
      for (Member& m : members)
        if (m.position == m.left.start_position && m.left.prompt_rows > 0 &&
            m.left.prompt_rows <= shape.prompt_sweep_rows)
          waiting.push_back(&m);
      if (!waiting.empty()) {  // members are in the order they joined
        PassShape sweep{0, 0, 0};
        size_t n = 0;
        while (n < waiting.size() && joins_prompt_window(static_cast<int>(n), sweep.rows,
                                                         waiting[n]->left.prompt_rows,
                                                         shape.prompt_sweep_rows)) {
          Member& m = *waiting[n];
          sweep.rows += static_cast<int>(m.left.prompt_rows);
          sweep.logits_rows += 1;
          sweep.attended += m.feed(m.left.prompt_rows);
          ++n;
        }
        add_pass(p, cost, sweep, static_cast<int>(n));
        ++p.sweeps;
        for (const Member& m : members)
          if (m.done()) p.finished_at.push_back(p.seconds);
        std::erase_if(members, [](const Member& m) { return m.done(); });
        continue;
      }
    }
    std::vector<Member*> order;
    for (Member& m : members) order.push_back(&m);
    std::sort(order.begin(), order.end(), [](const Member* a, const Member* b) {
      return a->waiting_since != b->waiting_since ? a->waiting_since < b->waiting_since
                                                  : a->order < b->order;
    });
    PassShape ps{0, 0, 0};
    int sequences = 0;
    for (Member* m : order) {
      const int64_t n = m->step_rows(chunk);
      if (ps.rows > 0 && ps.rows + n > max_rows) continue;
      ps.rows += static_cast<int>(n);
      ps.logits_rows += 1;
      ps.attended += m->feed(n);
      m->waiting_since = pass + 1;
      ++sequences;
    }
    add_pass(p, cost, ps, sequences);
    for (const Member& m : members)
      if (m.done()) p.finished_at.push_back(p.seconds);
    std::erase_if(members, [](const Member& m) { return m.done(); });
  }
  return p;
}

Result<JobWork> remaining_work(const JobRow& job, const std::vector<ItemRow>& items,
                               JobRunShape* shape) {
  const JobSettings settings = JobSettings::of(job);
  if (!settings.is_object())
    return invalid_argument(job_label(job) + ": its stored settings are not JSON");
  shape->model_dir = job.model_dir;
  shape->memory_bytes = job.memory_bytes.value_or(0);
  shape->classify = is_classify(job);
  NJ_ASSIGN_OR_RETURN(shape->speculative, stored_speculative_mode(job));
  shape->context = 1;
  if (auto max_context = settings.max_context()) shape->context = *max_context;
  JobWork work;
  int64_t trie_rows = 0, prefix_rows = 0;
  if (shape->classify) {
    NJ_ASSIGN_OR_RETURN(jobs::ClassifySettings c, settings.classify());
    NJ_ASSIGN_OR_RETURN(jobs::LabelTrie trie, jobs::LabelTrie::build(c.label_ids, c.labels));
    for (const auto& path : trie.feed_paths()) {
      trie_rows += static_cast<int64_t>(path.size());
      ++work.label_branches;
    }
    prefix_rows = static_cast<int64_t>(c.prefix_ids.size());
  }
  bool prefix_done = false;
  for (const ItemRow& item : items) {
    shape->context = std::max<int64_t>(
        shape->context, static_cast<int64_t>(item.prompt_ids.size()) + item.max_tokens);
    if (item.state != ItemState::kQueued && item.state != ItemState::kRunning) {
      prefix_done = prefix_done || item.state == ItemState::kDone;
      continue;
    }
    ItemWork w;
    const bool started = item.state == ItemState::kRunning && item.tokens_done > 0;
    prefix_done = prefix_done || item.state == ItemState::kRunning;
    w.prompt_rows = started ? 0 : static_cast<int64_t>(item.prompt_ids.size());
    if (shape->classify) {
      w.start_position = prefix_rows;
      w.decode_rows = started ? 0 : trie_rows;
    } else {
      w.start_position =
          started ? static_cast<int64_t>(item.prompt_ids.size()) + item.tokens_done : 0;
      w.decode_rows =
          std::max<int64_t>(0, item.max_tokens - std::max<int64_t>(1, item.tokens_done));
    }
    work.items.push_back(w);
  }
  work.shared_prefix_rows = prefix_done ? 0 : prefix_rows;
  work.prefix_rows = prefix_rows;
  return work;
}

SweepWork sweep_work(const JobWork& work) {
  SweepWork w;
  w.documents = std::max<int64_t>(1, static_cast<int64_t>(work.items.size()));
  w.start_rows = work.prefix_rows;
  w.branches = work.label_branches;
  for (const ItemWork& i : work.items) {
    w.document_rows = std::max(w.document_rows, i.prompt_rows);
    w.branch_rows = std::max(w.branch_rows, i.decode_rows);
  }
  w.logits_rows = 1 + static_cast<int>(w.branch_rows);
  return w;
}

std::vector<std::vector<size_t>> sweep_windows(const JobWork& work, const SweepWindowFill& empty) {
  std::vector<std::vector<size_t>> windows;
  std::vector<bool> taken(work.items.size(), false);
  for (size_t first = 0; first < work.items.size(); ++first) {
    if (taken[first]) continue;
    SweepWindowFill fill = empty;
    std::vector<size_t> window;
    for (size_t i = first; i < work.items.size(); ++i) {
      if (taken[i] || !fill.fits(work.items[i].prompt_rows)) continue;
      fill.add(work.items[i].prompt_rows);
      window.push_back(i);
      taken[i] = true;
      if (!fill.fits(1)) break;  // full: nothing more joins
    }
    windows.push_back(std::move(window));
  }
  return windows;
}

JobPrediction predict_sweeps(const JobWork& work, const std::vector<std::vector<size_t>>& windows,
                             const PassCostModel& cost, const BoundaryCost& boundary) {
  JobPrediction p;
  p.items = static_cast<int64_t>(work.items.size());
  if (work.items.empty()) return p;
  p.load_bytes = p.disk_bytes = cost.load_bytes();
  p.io_seconds = p.seconds = cost.load_seconds();
  // Each window computes the job's template prefix as the parent of its documents.
  for (const std::vector<size_t>& window : windows) {
    PassShape sweep{static_cast<int>(work.prefix_rows), 0, attended(0, work.prefix_rows)};
    for (size_t i : window) {
      const ItemWork& it = work.items[i];
      const int64_t rows = it.prompt_rows + it.decode_rows;
      sweep.rows += static_cast<int>(rows);
      sweep.logits_rows += 1 + static_cast<int>(it.decode_rows);
      sweep.attended += attended(it.start_position, rows);
    }
    const double start = p.seconds;
    add_pass(p, cost, sweep, static_cast<int>(window.size()));
    if (boundary.interval_s > 0 && boundary.boundaries > 0) {
      const double saves = std::min<double>(boundary.boundaries, std::floor((p.seconds - start) / boundary.interval_s));
      const double bytes = saves * sweep.rows * boundary.bytes_per_row;
      const double s = bytes / (std::max(1e-3, boundary.write_gbps) * 1e9);
      p.boundary_bytes += bytes;
      p.boundary_seconds += s;
      p.seconds += s;
    }
    for (size_t n = 0; n < window.size(); ++n) p.finished_at.push_back(p.seconds);
  }
  return p;
}

Result<JobForecast> forecast_job(const JobWork& work, const JobRunShape& shape, KernelRates& rates,
                                 double bandwidth_gbps) {
  SchedulerOptions run;  // run's defaults, as the flags change them
  if (shape.prefill_chunk > 0) run.prefill_chunk = shape.prefill_chunk;
  if (shape.io_threads > 0) run.io_threads = shape.io_threads;
  std::string pack_warning;
  NJ_ASSIGN_OR_RETURN(ModelHeaders headers,
                      open_model_headers(shape.model_dir, true, &pack_warning));
  const ModelLayout& layout = *headers.layout;
  const ModelConfig& c = layout.config();
  if (c.num_experts > 0 &&
      (!rates.experts.measured() || rates.experts.latent != c.latent ||
       rates.experts.moe_inter != c.moe_inter || rates.experts.mxfp4 != c.mxfp4_experts))
    rates.measure_experts(c);
  std::optional<RoutingProfile> routing;
  if (!shape.routing_profile.empty()) {
    NJ_ASSIGN_OR_RETURN(std::string text, read_small_file(shape.routing_profile));
    NJ_ASSIGN_OR_RETURN(routing, RoutingProfile::parse(text, shape.routing_profile,
                                                       model_fingerprint(c, *headers.index)));
  }
  const RoutingProfile* measured = routing ? &*routing : nullptr;
  // The plan `run` makes (engine/runtime/model_plan.h), for the items the job has.
  ModelRequest request;
  request.memory_bytes = shape.memory_bytes;
  request.classify = shape.classify;
  request.context = shape.context;
  request.batch = shape.batch;
  request.items = static_cast<int64_t>(work.items.size());
  request.speculation = shape.speculative == jobs::SpeculativeMode::kOff     ? Speculation::kOff
                        : shape.speculative == jobs::SpeculativeMode::kNgram ? Speculation::kNgram
                                                                             : Speculation::kAuto;
  request.prefill_chunk = run.prefill_chunk;
  request.io_threads = run.io_threads;
  request.bandwidth_gbps = bandwidth_gbps;
  request.routing = measured;
  if (!shape.classify && shape.schedule != Schedule::kPasses)
    for (const ItemWork& it : work.items)
      request.prompt_sweep_rows = std::max(request.prompt_sweep_rows, it.prompt_rows);
  JobForecast f;
  const SweepWork each = sweep_work(work);
  NJ_ASSIGN_OR_RETURN(std::optional<SweepDecision> sweep,
                      decide_sweep(layout, request, each, shape.schedule));
  if (sweep) {
    const SweepWindowPlan& window = sweep->window;
    f.sweep = true;
    f.min_memory_bytes = window.min_memory_bytes;
    const PassCostModel cost(layout, window.residency, rates, bandwidth_gbps, measured);
    const BoundaryCost boundary{
        4.0 * c.hidden * (1 + banked_before(c, c.layers - 1)), c.layers - 1,
        run.item.checkpoint_interval_s, bandwidth_gbps};
    const std::vector<std::vector<size_t>> windows =
        sweep_windows(work, SweepWindowFill(c, each, window.window_bytes, sweep->max_documents));
    // The largest window formed (its documents and rows: prefix, documents, branches).
    for (const std::vector<size_t>& w : windows) {
      int64_t rows = work.prefix_rows;
      for (size_t i : w) rows += work.items[i].prompt_rows + work.items[i].decode_rows;
      f.window_documents = std::max(f.window_documents, static_cast<int>(w.size()));
      f.window_rows = std::max(f.window_rows, static_cast<int>(rows));
    }
    f.batch = f.window_documents;
    f.max_batch = sweep->max_documents;
    f.rows_per_pass = f.window_rows;
    f.prediction = predict_sweeps(work, windows, cost, boundary);
    f.sweeps = static_cast<int64_t>(windows.size());
    return f;
  }
  NJ_ASSIGN_OR_RETURN(ModelPlan plan, plan_model(layout, request));
  f.min_memory_bytes = plan.residency.min_memory_bytes;
  f.batch = plan.batch;
  f.max_batch = plan.max_batch;
  f.rows_per_pass = plan.residency.rows_per_pass;
  f.draft_tokens = plan.residency.draft_tokens;
  const PassCostModel cost(layout, plan.residency, rates, bandwidth_gbps, measured);
  f.prompt_sweep_rows = plan.prompt_sweep_rows;
  f.prediction = predict_job(
      work,
      JobPlanShape{f.batch, plan.residency.rows_per_pass, plan.options.prefill_chunk, plan.prompt_sweep_rows},
      cost);
  f.sweeps = f.prediction.sweeps;
  return f;
}

}  // namespace nj::runner
