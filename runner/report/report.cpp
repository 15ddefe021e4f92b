// The morning summary: per-job figures from the store, and their text form.
#include "runner/report/report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/util/units.h"
#include "runner/store/printable.h"
#include "runner/store/job_kind.h"
#include "runner/store/job_settings.h"

namespace nj::runner {
namespace {

std::string printf_string(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// A classification result's label, its probability and margin, from the result details
// ({"label": L, "probability": P} or {"label": L, "probabilities": {L: P, ...}, "margin": M}).
void read_label(const std::string& details_json, ItemReport& out) {
  const nlohmann::json d = nlohmann::json::parse(details_json, nullptr, false);
  if (!d.is_object() || !d.contains("label") || !d["label"].is_string()) return;
  out.label = d["label"].get<std::string>();
  if (auto p = d.find("probability"); p != d.end() && p->is_number()) {
    out.label_prob = p->get<double>();
  } else if (auto ps = d.find("probabilities"); ps != d.end() && ps->is_object()) {
    if (auto q = ps->find(*out.label); q != ps->end() && q->is_number())
      out.label_prob = q->get<double>();
  }
  if (auto m = d.find("margin"); m != d.end() && m->is_number()) out.margin = m->get<double>();
}

// "1 item", "3 items".
std::string count_of(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// The item lines: the first `max_items` (0 = all), then every failed item after them (a
// failure is never cut off), then how many were left out.
void append_item_lines(const JobReport& r, size_t max_items, std::string& out) {
  const bool labels = std::any_of(r.items.begin(), r.items.end(),
                                  [](const ItemReport& i) { return i.label.has_value(); });
  const size_t first = max_items == 0 ? r.items.size() : std::min(max_items, r.items.size());
  std::vector<const ItemReport*> shown;
  for (size_t k = 0; k < r.items.size(); ++k)
    if (k < first || r.items[k].state == ItemState::kFailed) shown.push_back(&r.items[k]);
  int id_width = 12;  // the widest id shown, so the columns line up
  for (const ItemReport* i : shown)
    id_width = std::max(id_width, static_cast<int>(printable(i->custom_id).size()));
  out += printf_string("  %-*s %-10s %8s %8s %9s %9s %6s", id_width, "ITEM", "STATE", "FAILURES",
                       "TOKENS", "WALL", "ENGINE", "DISK");
  out += labels ? "  LABEL (p, margin)\n" : "\n";
  for (const ItemReport* i : shown) {
    const auto wall = i->wall_s();
    const auto share = i->disk_share();
    out += printf_string(
        "  %-*s %-10s %8lld %8lld %9s %9s %6s", id_width, printable(i->custom_id).c_str(),
        item_state_name(i->state), static_cast<long long>(i->failed_attempts),
        static_cast<long long>(i->tokens), wall ? format_seconds(*wall).c_str() : "-",
        format_seconds(i->engine_s).c_str(), share ? format_share(*share).c_str() : "-");
    if (i->label) {
      out += "  " + printable(i->label_text());
      if (i->margin) out += printf_string(" margin %.3f", *i->margin);
    }
    if (i->retries > 0) out += "  retried " + count_of(i->retries, "time", "times");
    if (i->state == ItemState::kFailed && i->last_error)
      out += "  error: " + printable(*i->last_error);
    out += "\n";
  }
  if (shown.size() < r.items.size())
    out +=
        "  ... and " +
        count_of(static_cast<int64_t>(r.items.size() - shown.size()), "more item", "more items") +
        " (--items 0 lists all)\n";
}

}  // namespace

std::string outputs_text(const JobRow& job) {
  if (job.outputs_state == "failed")
    return "NOT WRITTEN: " + printable(job.outputs_error.value_or("")) + " (nightjar results " +
           std::to_string(job.id) + " --write writes them again)";
  return "written " + format_utc(job.outputs_at.value_or(0));
}

std::optional<double> JobReport::wall_s() const {
  if (!first_start || !last_finish) return std::nullopt;
  return std::max(0.0, *last_finish - *first_start);
}

std::optional<double> JobReport::s_per_token() const {
  if (tokens <= 0) return std::nullopt;
  return engine_s / static_cast<double>(tokens);
}

std::optional<double> disk_share(double engine_s, const EngineUsage& usage) {
  const double denom = std::max(engine_s, usage.io_wait_s + usage.compute_s);
  if (denom <= 0) return std::nullopt;
  return usage.io_wait_s / denom;
}

std::optional<double> ItemReport::wall_s() const {
  if (!started_at || !finished_at) return std::nullopt;
  return *finished_at - *started_at;
}

std::optional<double> ItemReport::disk_share() const {
  return runner::disk_share(engine_s, usage);
}

std::string ItemReport::label_text() const {
  if (!label) return "";
  return *label + (label_prob ? printf_string(" (p=%.3f)", *label_prob) : "");
}

double JobReport::disk_share() const {
  return runner::disk_share(engine_s, usage).value_or(0.0);
}

const char* JobReport::state() const {
  if (running > 0) return "running";
  if (queued > 0) return "queued";
  if (job.outputs_state == "failed") return "outputs_failed";
  if (failed > 0) return "failed";
  if (cancelled > 0) return "cancelled";
  return "done";
}

int64_t JobReport::failed_attempts() const {
  int64_t n = 0;
  for (const ItemReport& i : items) n += i.failed_attempts;
  return n;
}

int64_t JobReport::retries() const {
  int64_t n = 0;
  for (const ItemReport& i : items) n += i.retries;
  return n;
}

std::optional<double> JobReport::documents_per_hour() const {
  const auto wall = wall_s();
  if (!wall || *wall <= 0 || done == 0) return std::nullopt;
  return static_cast<double>(done) * 3600.0 / *wall;
}

std::vector<std::pair<std::string, int64_t>> JobReport::label_counts() const {
  std::vector<std::pair<std::string, int64_t>> counts;
  for (const std::string& label : labels) counts.emplace_back(label, 0);
  for (const ItemReport& i : items) {
    if (i.state != ItemState::kDone || !i.label) continue;
    auto it = std::find_if(counts.begin(), counts.end(),
                           [&](const auto& c) { return c.first == *i.label; });
    if (it == counts.end())
      counts.emplace_back(*i.label, 1);
    else
      ++it->second;
  }
  return counts;
}

std::vector<const ItemReport*> JobReport::review(size_t n) const {
  std::vector<const ItemReport*> out;
  for (const ItemReport& i : items)
    if (i.state == ItemState::kDone && i.label && i.margin) out.push_back(&i);
  std::stable_sort(out.begin(), out.end(), [](const ItemReport* a, const ItemReport* b) {
    return *a->margin < *b->margin;
  });
  if (out.size() > n) out.resize(n);
  return out;
}

std::vector<const JobReport*> failures_first(const std::vector<JobReport>& jobs) {
  std::vector<const JobReport*> out;
  for (const JobReport& r : jobs) out.push_back(&r);
  std::stable_sort(out.begin(), out.end(), [](const JobReport* a, const JobReport* b) {
    return a->has_failures() && !b->has_failures();
  });
  return out;
}

Result<std::map<int64_t, RetryHistory>> retry_history(JobStore& store, int64_t job_id) {
  std::map<int64_t, RetryHistory> history;
  NJ_ASSIGN_OR_RETURN(std::vector<EventRow> events, store.events(job_id, std::nullopt));
  for (const EventRow& e : events) {
    if (e.kind != "retried" || !e.item_id) continue;
    const nlohmann::json d = nlohmann::json::parse(e.detail_json, nullptr, false);
    RetryHistory& h = history[*e.item_id];
    ++h.retries;
    if (d.is_object() && d.contains("attempts") && d["attempts"].is_number_integer())
      h.attempts += d["attempts"].get<int64_t>();
  }
  return history;
}

Result<JobReport> build_job_report(JobStore& store, const JobRow& job) {
  JobReport r;
  r.job = job;
  if (is_classify(job)) {
    if (auto c = JobSettings::of(job).classify(); c.ok()) r.labels = c->labels;
  }
  NJ_ASSIGN_OR_RETURN(auto history, retry_history(store, job.id));
  NJ_ASSIGN_OR_RETURN(std::vector<ItemRow> items, store.items(job.id));
  for (const ItemRow& row : items) {
    ItemReport i;
    i.failed_attempts = row.attempts;
    if (auto h = history.find(row.id); h != history.end()) {
      i.retries = h->second.retries;
      i.failed_attempts += h->second.attempts;
    }
    i.custom_id = row.custom_id;
    i.state = row.state;
    i.tokens = row.tokens_done;
    i.started_at = row.started_at;
    i.finished_at = row.finished_at;
    i.engine_s = row.prefill_s + row.decode_s;
    i.usage = row.usage;
    i.last_error = row.last_error;
    if (row.state == ItemState::kDone) {
      NJ_ASSIGN_OR_RETURN(std::optional<ResultRow> result, store.result(row.id));
      if (result && result->details_json) read_label(*result->details_json, i);
    }
    switch (row.state) {
      case ItemState::kDone:
        ++r.done;
        break;
      case ItemState::kFailed:
        ++r.failed;
        break;
      case ItemState::kCancelled:
        ++r.cancelled;
        break;
      case ItemState::kQueued:
        ++r.queued;
        break;
      case ItemState::kRunning:
        ++r.running;
        break;
    }
    r.tokens += i.tokens;
    r.engine_s += i.engine_s;
    r.usage += i.usage;
    if (i.started_at)
      r.first_start = std::min(r.first_start.value_or(*i.started_at), *i.started_at);
    if (i.started_at && i.finished_at)
      r.last_finish = std::max(r.last_finish.value_or(*i.finished_at), *i.finished_at);
    r.items.push_back(std::move(i));
  }
  return r;
}

std::string format_utc(double unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string format_seconds(double s) {
  if (s < 10) return printf_string("%.2f s", s);
  return s < 120 ? printf_string("%.1f s", s) : printf_string("%.1f min", s / 60);
}

std::string format_share(double share) {
  return printf_string("%.1f%%", 100.0 * share);
}

namespace {

// Batch size over the night: the finished items in up to six equal spans of time from the
// first start to the last finish, each with how many ended in it and the largest batch
// (most items sharing a pass) they ran in, on average and at most.
std::string batch_timeline(const JobReport& r) {
  const auto wall = r.wall_s();
  if (!wall) return "";
  constexpr int kSpans = 6;
  struct Span {
    int64_t items = 0, batch_sum = 0, batch_max = 0;
  };
  std::vector<Span> spans(kSpans);
  int64_t batched = 0;
  for (const ItemReport& i : r.items) {
    if (!i.finished_at || i.state != ItemState::kDone) continue;
    const double at = *i.finished_at - *r.first_start;
    const int k = *wall > 0 ? std::min(kSpans - 1, static_cast<int>(at / *wall * kSpans)) : 0;
    Span& sp = spans[static_cast<size_t>(std::max(0, k))];
    ++sp.items;
    sp.batch_sum += i.usage.max_batch;
    sp.batch_max = std::max(sp.batch_max, i.usage.max_batch);
    batched += i.usage.max_batch > 1 ? 1 : 0;
  }
  if (batched == 0) return "";  // one at a time all night: nothing to show
  std::string out = "  batch over time:  ";
  for (int k = 0; k < kSpans; ++k) {
    const Span& sp = spans[static_cast<size_t>(k)];
    if (k) out += " | ";
    out += "+" + format_seconds(*wall * k / kSpans) + ": ";
    out += sp.items ? printf_string("%lld ended, batch %.1f (max %lld)", (long long)sp.items,
                                    static_cast<double>(sp.batch_sum) / sp.items,
                                    (long long)sp.batch_max)
                    : std::string("-");
  }
  return out + "\n";
}

}  // namespace

namespace {

// "job 3 'night'", or "job 'night' in 4 homes".
std::string job_title(const JobReport& r) {
  if (r.homes > 1)
    return printf_string("job '%s' in %d homes", printable(r.job.name).c_str(), r.homes);
  return printf_string("job %lld '%s'", static_cast<long long>(r.job.id),
                       printable(r.job.name).c_str());
}

// The summary across jobs: one line each, failures first, then every failed item.
std::string summary_text(const std::vector<const JobReport*>& order) {
  std::string out = "Summary of " + count_of(static_cast<int64_t>(order.size()), "job", "jobs") +
                    " (failures first):\n";
  size_t name_width = 16;
  for (const JobReport* r : order)
    name_width = std::max(name_width, printable(r->job.name).size() + 6);
  out += printf_string("  %-*s %-14s %6s %6s %9s %6s %7s %8s %7s\n", static_cast<int>(name_width),
                       "JOB", "STATE", "DONE", "FAILED", "CANCELLED", "QUEUED", "RUNNING",
                       "FAILURES", "RETRIES");
  for (const JobReport* r : order) {
    const std::string name = (r->homes > 1 ? std::string("*") : std::to_string(r->job.id)) + " " +
                             printable(r->job.name);
    out += printf_string("  %-*s %-14s %6lld %6lld %9lld %6lld %7lld %8lld %7lld\n",
                         static_cast<int>(name_width), name.c_str(), r->state(), (long long)r->done,
                         (long long)r->failed, (long long)r->cancelled, (long long)r->queued,
                         (long long)r->running, (long long)r->failed_attempts(),
                         (long long)r->retries());
  }
  for (const JobReport* r : order) {
    if (!r->has_failures()) continue;
    out += "  " + job_title(*r) + ":";
    if (r->job.outputs_state == "failed") out += " outputs " + outputs_text(r->job) + ";";
    out += " " + count_of(r->failed, "item", "items") + " failed for good\n";
    for (const ItemReport& i : r->items) {
      if (i.state != ItemState::kFailed) continue;
      out += "    " + printable(i.custom_id) + ": " +
             count_of(i.failed_attempts, "failed attempt", "failed attempts");
      if (i.retries > 0) out += ", retried " + count_of(i.retries, "time", "times");
      out += ": " + printable(i.last_error.value_or("(no error recorded)")) + "\n";
    }
  }
  return out;
}

// A classify job's labels, throughput and review list.
std::string classify_text(const JobReport& r, size_t review) {
  std::string out;
  if (auto per_hour = r.documents_per_hour())
    out += printf_string("  documents/hour:   %.0f (%lld done in %s of wall time)\n", *per_hour,
                         static_cast<long long>(r.done), format_seconds(*r.wall_s()).c_str());
  std::string counts;
  for (const auto& [label, n] : r.label_counts())
    counts += (counts.empty() ? "" : ", ") + printable(label) + " " + std::to_string(n);
  if (!counts.empty()) out += "  labels:           " + counts + "\n";
  const auto low = r.review(review);
  if (!low.empty()) {
    out += "  review (the " +
           count_of(static_cast<int64_t>(low.size()), "lowest margin", "lowest margins") +
           ", least certain first):\n";
    for (const ItemReport* i : low)
      out += printf_string("    %-30s %-20s margin %.3f\n", printable(i->custom_id).c_str(),
                           printable(*i->label).c_str(), *i->margin);
  }
  return out;
}

}  // namespace

std::string report_text(const std::vector<JobReport>& jobs, const ReportOptions& options) {
  const std::vector<const JobReport*> order = failures_first(jobs);
  std::string out = summary_text(order);
  for (const JobReport* jr : order) {
    const JobReport& r = *jr;
    out += "\n";
    if (r.homes > 1)
      out += printf_string("job '%s' (%s) in %d homes: %s\n", printable(r.job.name).c_str(),
                           printable(r.job.kind).c_str(), r.homes, r.state());
    else
      out += job_title(r) + " (" + printable(r.job.kind) + "): " + r.state() + "\n";
    out += "  model:            " + printable(r.job.model_dir) + "\n";
    out += printf_string(
        "  items:            %lld done, %lld failed, %lld cancelled, %lld queued, "
        "%lld running (%lld in all)\n",
        (long long)r.done, (long long)r.failed, (long long)r.cancelled, (long long)r.queued,
        (long long)r.running, (long long)r.total());
    out += printf_string("  tokens generated: %lld\n", static_cast<long long>(r.tokens));
    if (auto wall = r.wall_s())
      out += "  wall time:        " + format_seconds(*wall) + " (" + format_utc(*r.first_start) +
             " to " + format_utc(*r.last_finish) + ")\n";
    else
      out += "  wall time:        - (no item finished yet)\n";
    out += "  engine time:      " + format_seconds(r.engine_s);
    if (auto spt = r.s_per_token())
      out += printf_string("; %.4f s per output token (%.2f tokens/s)", *spt,
                           *spt > 0 ? 1.0 / *spt : 0.0);
    out += "\n";
    if (is_classify(r.job) && r.done > 0) {  // a label's tokens are not the work here
      const double n = static_cast<double>(r.done);
      out += printf_string(
          "  per document:     %s engine, %s read, %.1f tokens fed, %.2f decode steps (means "
          "over %lld done)\n",
          format_seconds(r.engine_s / n).c_str(),
          format_bytes(static_cast<uint64_t>(static_cast<double>(r.usage.bytes_read) / n)).c_str(),
          static_cast<double>(r.usage.tokens_fed) / n, static_cast<double>(r.usage.decode_steps) / n,
          static_cast<long long>(r.done));
    }
    if (is_classify(r.job)) out += classify_text(r, options.review);
    out += batch_timeline(r);
    if (r.engine_s > 0)
      out += "  waiting on disk:  " + format_share(r.disk_share()) + " of engine time (" +
             format_seconds(r.usage.io_wait_s) + " I/O wait, " + format_seconds(r.usage.compute_s) +
             " compute)\n";
    else
      out += "  waiting on disk:  - (no engine time)\n";
    out += "  bytes read:       " + format_bytes(r.usage.bytes_read) + " (" +
           std::to_string(r.usage.bytes_read) + " bytes)\n";
    if (r.job.outputs_state) out += "  outputs:          " + outputs_text(r.job) + "\n";
    out += "\n";
    append_item_lines(r, options.max_items, out);
  }
  return out;
}

nlohmann::json report_json(const std::vector<JobReport>& jobs, double generated_at,
                           const ReportOptions& options) {
  nlohmann::json list = nlohmann::json::array();
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  for (const JobReport* jr : failures_first(jobs)) {
    const JobReport& r = *jr;
    nlohmann::json failed = nlohmann::json::array();
    for (const ItemReport& i : r.items) {
      if (i.state != ItemState::kFailed) continue;
      failed.push_back({{"custom_id", i.custom_id},
                        {"failed_attempts", i.failed_attempts},
                        {"retries", i.retries},
                        {"error", i.last_error ? nlohmann::json(*i.last_error) : nullptr}});
    }
    nlohmann::json j = {
        {"id", r.job.id},
        {"name", r.job.name},
        {"kind", r.job.kind},
        {"state", r.state()},
        {"model", r.job.model_dir},
        {"homes", r.homes},
        {"counts",
         {{"done", r.done},
          {"failed", r.failed},
          {"cancelled", r.cancelled},
          {"queued", r.queued},
          {"running", r.running},
          {"total", r.total()}}},
        {"failed_attempts", r.failed_attempts()},
        {"retries", r.retries()},
        {"tokens", r.tokens},
        {"wall_s", opt(r.wall_s())},
        {"engine_s", r.engine_s},
        {"disk_share", r.engine_s > 0 ? nlohmann::json(r.disk_share()) : nlohmann::json(nullptr)},
        {"bytes_read", r.usage.bytes_read},
        {"outputs",
         r.job.outputs_state
             ? nlohmann::json{{"state", *r.job.outputs_state},
                              {"error", r.job.outputs_error ? nlohmann::json(*r.job.outputs_error)
                                                            : nlohmann::json(nullptr)}}
             : nlohmann::json(nullptr)},
        {"failed_items", failed}};
    if (is_classify(r.job)) {
      nlohmann::json counts = nlohmann::json::object();
      for (const auto& [label, n] : r.label_counts()) counts[label] = n;
      nlohmann::json review = nlohmann::json::array();
      for (const ItemReport* i : r.review(options.review))
        review.push_back(
            {{"custom_id", i->custom_id}, {"label", *i->label}, {"margin", *i->margin}});
      j["documents_per_hour"] = opt(r.documents_per_hour());
      j["label_counts"] = counts;
      j["review"] = review;
    }
    list.push_back(std::move(j));
  }
  return {{"generated_at", generated_at}, {"jobs", list}};
}

}  // namespace nj::runner
