// The morning summary: per-job figures from the store, and their text form.
#include "runner/report/report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include <nlohmann/json.hpp>

#include "engine/util/units.h"
#include "runner/report/printable.h"
#include "runner/store/job_kind.h"

namespace nj::runner {
namespace {

std::string printf_string(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// A classification result's label and its probability, from the result details
// ({"label": L, "probability": P} or {"label": L, "probabilities": {L: P, ...}}).
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
}

void append_item_lines(const JobReport& r, size_t max_items, std::string& out) {
  const bool labels = std::any_of(r.items.begin(), r.items.end(),
                                  [](const ItemReport& i) { return i.label.has_value(); });
  const size_t shown = max_items == 0 ? r.items.size() : std::min(max_items, r.items.size());
  int id_width = 12;  // the widest id shown, so the columns line up
  for (size_t k = 0; k < shown; ++k)
    id_width = std::max(id_width, static_cast<int>(printable(r.items[k].custom_id).size()));
  out += printf_string("  %-*s %-10s %8s %9s %9s %6s", id_width, "ITEM", "STATE", "TOKENS", "WALL",
                       "ENGINE", "DISK");
  out += labels ? "  LABEL\n" : "\n";
  for (size_t k = 0; k < shown; ++k) {
    const ItemReport& i = r.items[k];
    const auto wall = i.wall_s();
    const auto share = i.disk_share();
    out += printf_string("  %-*s %-10s %8lld %9s %9s %6s", id_width, printable(i.custom_id).c_str(),
                         item_state_name(i.state), static_cast<long long>(i.tokens),
                         wall ? format_seconds(*wall).c_str() : "-",
                         format_seconds(i.engine_s).c_str(),
                         share ? format_share(*share).c_str() : "-");
    if (i.label) out += "  " + printable(i.label_text());
    if (i.state == ItemState::kFailed && i.last_error)
      out += "  error: " + printable(*i.last_error);
    out += "\n";
  }
  if (shown < r.items.size())
    out +=
        printf_string("  ... and %zu more items (--items 0 lists all)\n", r.items.size() - shown);
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

Result<JobReport> build_job_report(JobStore& store, const JobRow& job) {
  JobReport r;
  r.job = job;
  NJ_ASSIGN_OR_RETURN(std::vector<ItemRow> items, store.items(job.id));
  for (const ItemRow& row : items) {
    ItemReport i;
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

std::string report_text(const std::vector<JobReport>& jobs, size_t max_items) {
  std::string out;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const JobReport& r = jobs[k];
    if (k) out += "\n";
    if (r.homes > 1)
      out += printf_string("job '%s' (%s) in %d homes: %s\n", printable(r.job.name).c_str(),
                           printable(r.job.kind).c_str(), r.homes, r.state());
    else
      out += printf_string("job %lld '%s' (%s): %s\n", static_cast<long long>(r.job.id),
                           printable(r.job.name).c_str(), printable(r.job.kind).c_str(), r.state());
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
    out += batch_timeline(r);
    out += "  waiting on disk:  " + format_share(r.disk_share()) + " of engine time (" +
           format_seconds(r.usage.io_wait_s) + " I/O wait, " + format_seconds(r.usage.compute_s) +
           " compute)\n";
    out += "  bytes read:       " + format_bytes(r.usage.bytes_read) + " (" +
           std::to_string(r.usage.bytes_read) + " bytes)\n";
    if (r.job.outputs_state) out += "  outputs:          " + outputs_text(r.job) + "\n";
    out += "\n";
    append_item_lines(r, max_items, out);
  }
  return out;
}

}  // namespace nj::runner
