// The morning summary as a self-contained XHTML-style page (see report_html.h).
#include "runner/report/report_html.h"

#include <algorithm>
#include <cstdio>

#include "engine/util/units.h"
#include "runner/store/printable.h"

namespace nj::runner {
namespace {

// Timeline geometry, in SVG user units (the SVG scales to the page width).
constexpr double kChartWidth = 900;
constexpr double kLabelWidth = 180;  // item ids left of the bars
constexpr double kRowHeight = 18;
constexpr double kBarHeight = 12;
constexpr double kAxisHeight = 24;
constexpr size_t kMaxTimelineItems = 500;  // beyond this the page lists, it does not draw

constexpr const char* kStyle = R"css(
body { font-family: sans-serif; margin: 2em; color: #222; background: #fff; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { padding: 0.2em 0.8em; text-align: left; border-bottom: 1px solid #ddd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.io { fill: #d9822b; } .compute { fill: #2b6cb0; } .idle { fill: #e2e8f0; }
.failed { fill: #c53030; } .running { fill: #90cdf4; }
.axis { stroke: #888; } svg text { font-size: 11px; fill: #333; }
.legend span { display: inline-block; width: 0.9em; height: 0.9em; margin: 0 0.3em 0 1em; }
.swatch-io { background: #d9822b; } .swatch-compute { background: #2b6cb0; }
.swatch-idle { background: #e2e8f0; } .swatch-running { background: #90cdf4; }
.swatch-failed { background: #c53030; } .label-bar { fill: #2f855a; }
tr.has-failures td { background: #fff5f5; } .bad { color: #c53030; font-weight: bold; }
)css";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string row(const std::string& key, const std::string& value) {
  return "<tr><th>" + html_escape(key) + "</th><td>" + html_escape(value) + "</td></tr>\n";
}

std::string rect(const char* cls, double x, double y, double w, double h);

// The summary across jobs, failures first, and every failed item with its error.
std::string jobs_summary(const std::vector<const JobReport*>& order) {
  std::string t =
      "<table id=\"summary\">\n<tr><th>job</th><th>name</th><th>kind</th><th>state</th>"
      "<th>done</th><th>failed</th><th>cancelled</th><th>queued</th><th>running</th>"
      "<th>failed attempts</th><th>retries</th></tr>\n";
  auto num = [](int64_t v) { return "<td class=\"num\">" + std::to_string(v) + "</td>"; };
  for (const JobReport* r : order) {
    t += std::string("<tr") + (r->has_failures() ? " class=\"has-failures\"" : "") + "><td>" +
         (r->homes > 1 ? std::to_string(r->homes) + " homes" : std::to_string(r->job.id)) +
         "</td><td>" + html_escape(r->job.name) + "</td><td>" + html_escape(r->job.kind) +
         "</td><td" + (r->has_failures() ? " class=\"bad\"" : "") + ">" + r->state() + "</td>" +
         num(r->done) + num(r->failed) + num(r->cancelled) + num(r->queued) + num(r->running) +
         num(r->failed_attempts()) + num(r->retries()) + "</tr>\n";
  }
  t += "</table>\n";
  std::string failures;
  for (const JobReport* r : order) {
    for (const ItemReport& i : r->items) {
      if (i.state != ItemState::kFailed) continue;
      failures += "<tr><td>" + html_escape(r->job.name) + "</td><td>" + html_escape(i.custom_id) +
                  "</td><td class=\"num\">" + std::to_string(i.failed_attempts) +
                  "</td><td class=\"num\">" + std::to_string(i.retries) + "</td><td>" +
                  html_escape(i.last_error.value_or("")) + "</td></tr>\n";
    }
    if (r->job.outputs_state == "failed")
      failures += "<tr><td>" + html_escape(r->job.name) +
                  "</td><td>(outputs)</td><td></td><td></td><td>" +
                  html_escape(outputs_text(r->job)) + "</td></tr>\n";
  }
  if (!failures.empty())
    t += "<h2>Failures</h2>\n<table id=\"failures\">\n<tr><th>job</th><th>item</th>"
         "<th>failed attempts</th><th>retries</th><th>error</th></tr>\n" +
         failures + "</table>\n";
  return t;
}

// A classify job's label counts as horizontal bars.
std::string label_chart(const JobReport& r) {
  const auto counts = r.label_counts();
  if (counts.empty()) return "";
  int64_t most = 1;
  for (const auto& c : counts) most = std::max(most, c.second);
  const double row_h = 20, label_w = 180, bar_w = 400;
  const double height = row_h * static_cast<double>(counts.size()) + 4;
  std::string s = "<svg class=\"labels\" width=\"640\" viewBox=\"0 0 640 " + fmt("%.0f", height) +
                  "\" role=\"img\"><title>documents per label</title>\n";
  for (size_t k = 0; k < counts.size(); ++k) {
    const double y = row_h * static_cast<double>(k);
    const double w = bar_w * static_cast<double>(counts[k].second) / static_cast<double>(most);
    s += "<text x=\"" + fmt("%.0f", label_w - 6) + "\" y=\"" + fmt("%.1f", y + 13) +
         "\" text-anchor=\"end\">" + html_escape(counts[k].first.substr(0, 28)) + "</text>" +
         rect("label-bar", label_w, y + 3, w, 14) + "<text x=\"" + fmt("%.1f", label_w + w + 6) +
         "\" y=\"" + fmt("%.1f", y + 14) + "\">" + std::to_string(counts[k].second) + "</text>\n";
  }
  return s + "</svg>\n";
}

// A classify job's least certain answers.
std::string review_table(const JobReport& r, size_t n) {
  const auto low = r.review(n);
  if (low.empty()) return "";
  std::string t =
      "<table class=\"review\">\n<tr><th>item</th><th>label</th><th>p</th>"
      "<th>margin</th></tr>\n";
  for (const ItemReport* i : low)
    t += "<tr><td>" + html_escape(i->custom_id) + "</td><td>" + html_escape(*i->label) +
         "</td><td class=\"num\">" + (i->label_prob ? fmt("%.3f", *i->label_prob) : "-") +
         "</td><td class=\"num\">" + fmt("%.3f", *i->margin) + "</td></tr>\n";
  return t + "</table>\n";
}

std::string summary_table(const JobReport& r) {
  std::string t = "<table>\n";
  t += row("model", r.job.model_dir);
  t += row("items", std::to_string(r.done) + " done, " + std::to_string(r.failed) + " failed, " +
                        std::to_string(r.cancelled) + " cancelled, " + std::to_string(r.queued) +
                        " queued, " + std::to_string(r.running) + " running (" +
                        std::to_string(r.total()) + " in all)");
  t += row("tokens generated", std::to_string(r.tokens));
  t += row("wall time", r.wall_s()
                            ? format_seconds(*r.wall_s()) + " (" + format_utc(*r.first_start) +
                                  " to " + format_utc(*r.last_finish) + ")"
                            : "- (no item finished yet)");
  t += row("engine time", format_seconds(r.engine_s));
  t += row("seconds per output token", r.s_per_token() ? fmt("%.4f", *r.s_per_token()) : "-");
  if (auto per_hour = r.documents_per_hour(); per_hour && !r.labels.empty())
    t += row("documents per hour", fmt("%.0f", *per_hour));
  t += row("waiting on disk", r.engine_s > 0 ? format_share(r.disk_share()) + " of engine time"
                                             : "- (no engine time)");
  t += row("bytes read", format_bytes(r.usage.bytes_read));
  if (r.job.outputs_state) t += row("outputs", outputs_text(r.job));
  return t + "</table>\n";
}

// One horizontal bar: I/O wait share, then compute.
std::string share_bar(double share) {
  const double w = 400, io = std::clamp(share, 0.0, 1.0) * w;
  return "<svg width=\"400\" height=\"16\" "
         "viewBox=\"0 0 400 16\" role=\"img\"><title>" +
         html_escape("waiting on disk " + format_share(share)) +
         "</title><rect class=\"io\" x=\"0\" "
         "y=\"0\" width=\"" +
         fmt("%.1f", io) + "\" height=\"16\"/><rect class=\"compute\" x=\"" + fmt("%.1f", io) +
         "\" y=\"0\" width=\"" + fmt("%.1f", w - io) + "\" height=\"16\"/></svg>\n";
}

std::string rect(const char* cls, double x, double y, double w, double h) {
  return std::string("<rect class=\"") + cls + "\" x=\"" + fmt("%.2f", x) + "\" y=\"" +
         fmt("%.2f", y) + "\" width=\"" + fmt("%.2f", std::max(w, 0.0)) + "\" height=\"" +
         fmt("%.2f", h) + "\"/>";
}

// An axis label at `at` seconds on an axis `span` seconds long, in a unit that tells the
// ticks apart ("+0 ms", "+2.5 ms", ... rather than "0.00 s, 0.00 s, 0.01 s").
std::string tick_label(double at, double span) {
  if (span < 0.1) return "+" + fmt("%.1f ms", at * 1e3);
  if (span < 2) return "+" + fmt("%.0f ms", at * 1e3);
  if (span < 120) return "+" + fmt(span < 20 ? "%.1f s" : "%.0f s", at);
  if (span < 7200) return "+" + fmt("%.1f min", at / 60);
  return "+" + fmt("%.2f h", at / 3600);
}

// How many of the job's items the page shows: `max_items` (0 = all).
size_t shown_items(const JobReport& r, size_t max_items) {
  return max_items == 0 ? r.items.size() : std::min(max_items, r.items.size());
}

// Items on one time axis, from the first start to the last finish or, while an item runs,
// to `now`: a finished item's bar runs from started_at to finished_at, split by its
// disk-wait share of engine time; a running item's bar runs from started_at to `now`.
std::string timeline(const JobReport& r, double now, size_t max_items) {
  auto running = [](const ItemReport& i) {
    return i.state == ItemState::kRunning && i.started_at.has_value();
  };
  const bool any_running = std::any_of(r.items.begin(), r.items.end(), running);
  if (!r.first_start || (!r.last_finish && !any_running))
    return "<p>No item has finished or is running: no timeline.</p>\n";
  const size_t n = std::min(shown_items(r, max_items), kMaxTimelineItems);
  const double t0 = *r.first_start;
  const double t1 = std::max(r.last_finish.value_or(t0), any_running ? now : t0);
  const double span = std::max(t1 - t0, 1e-3);
  const double plot = kChartWidth - kLabelWidth - 10;
  const double height = kAxisHeight + kRowHeight * static_cast<double>(n) + 4;
  std::string s = "<svg width=\"100%\" viewBox=\"0 0 " + fmt("%.0f", kChartWidth) + " " +
                  fmt("%.0f", height) + "\" role=\"img\"><title>per-item timeline</title>\n";
  s += "<line class=\"axis\" x1=\"" + fmt("%.0f", kLabelWidth) + "\" y1=\"16\" x2=\"" +
       fmt("%.0f", kLabelWidth + plot) + "\" y2=\"16\"/>";
  for (int tick = 0; tick <= 4; ++tick) {
    const double x = kLabelWidth + plot * tick / 4.0;
    s += "<text x=\"" + fmt("%.1f", x) + "\" y=\"12\" text-anchor=\"" +
         (tick == 0   ? "start"
          : tick == 4 ? "end"
                      : "middle") +
         "\">" + html_escape(tick_label(span * tick / 4.0, span)) + "</text>";
  }
  s += "\n";
  for (size_t k = 0; k < n; ++k) {
    const ItemReport& i = r.items[k];
    const double y = kAxisHeight + kRowHeight * static_cast<double>(k);
    s += "<g><title>" +
         html_escape(i.custom_id + ": " + item_state_name(i.state) + ", " +
                     std::to_string(i.tokens) + " tokens, engine " + format_seconds(i.engine_s)) +
         "</title><text x=\"" + fmt("%.0f", kLabelWidth - 6) + "\" y=\"" + fmt("%.1f", y + 10) +
         "\" text-anchor=\"end\">" + html_escape(i.custom_id.substr(0, 28)) + "</text>";
    if (const auto wall = i.wall_s()) {
      const double x = kLabelWidth + plot * (*i.started_at - t0) / span;
      const double w = std::max(plot * *wall / span, 1.0);
      const double busy =
          *wall > 0 ? std::clamp(i.engine_s / *wall, 0.0, 1.0) : (i.engine_s > 0 ? 1.0 : 0.0);
      const double io = w * busy * i.disk_share().value_or(0.0);
      const double compute = w * busy - io;
      if (i.state == ItemState::kFailed) {
        s += rect("failed", x, y, w, kBarHeight);
      } else {
        s += rect("io", x, y, io, kBarHeight) + rect("compute", x + io, y, compute, kBarHeight) +
             rect("idle", x + io + compute, y, w - io - compute, kBarHeight);
      }
    } else if (running(i)) {
      const double x = kLabelWidth + plot * (*i.started_at - t0) / span;
      s += rect("running", x, y, std::max(plot * (now - *i.started_at) / span, 1.0), kBarHeight);
    }
    s += "</g>\n";
  }
  s += "</svg>\n";
  if (r.items.size() > n)
    s += "<p>" + std::to_string(r.items.size() - n) + " more items are not drawn.</p>\n";
  return s;
}

std::string item_table(const JobReport& r, size_t max_items) {
  std::string t =
      "<table class=\"items\">\n<tr><th>item</th><th>state</th><th>failed attempts</th>"
      "<th>tokens</th><th>wall</th><th>engine</th><th>waiting on disk</th><th>label</th>"
      "<th>margin</th><th>error</th></tr>\n";
  const size_t first = shown_items(r, max_items);
  size_t shown = 0;
  for (size_t k = 0; k < r.items.size(); ++k) {
    const ItemReport& i = r.items[k];
    if (k >= first && i.state != ItemState::kFailed) continue;  // failures are always listed
    ++shown;
    const auto wall = i.wall_s();
    const auto share = i.disk_share();
    t += "<tr><td>" + html_escape(i.custom_id) + "</td><td" +
         (i.state == ItemState::kFailed ? " class=\"bad\"" : "") + ">" + item_state_name(i.state) +
         "</td><td class=\"num\">" + std::to_string(i.failed_attempts) + "</td><td class=\"num\">" +
         std::to_string(i.tokens) + "</td><td class=\"num\">" +
         (wall ? format_seconds(*wall) : "-") + "</td><td class=\"num\">" +
         format_seconds(i.engine_s) + "</td><td class=\"num\">" +
         (share ? format_share(*share) : "-") + "</td><td>" + html_escape(i.label_text()) +
         "</td><td class=\"num\">" + (i.margin ? fmt("%.3f", *i.margin) : "") + "</td><td>" +
         html_escape(i.last_error.value_or("")) + "</td></tr>\n";
  }
  t += "</table>\n";
  if (shown < r.items.size())
    t += "<p>... and " + std::to_string(r.items.size() - shown) + " more item" +
         (r.items.size() - shown == 1 ? "" : "s") + " (--items 0 lists all).</p>\n";
  return t;
}

// The timeline's legend: every colour it draws.
constexpr const char* kLegend =
    "<p class=\"legend\"><span class=\"swatch-io\"></span>waiting on disk"
    "<span class=\"swatch-compute\"></span>compute<span class=\"swatch-idle\"></span>"
    "outside the engine (queued, stopped, overhead)<span class=\"swatch-running\"></span>"
    "still running at the report's time<span class=\"swatch-failed\"></span>failed</p>\n";

}  // namespace

std::string html_escape(std::string_view raw) {
  const std::string text = printable(raw);  // control characters as visible escapes
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string report_html(const std::vector<JobReport>& jobs, double generated_at,
                        const ReportOptions& options) {
  const std::vector<const JobReport*> order = failures_first(jobs);
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
      "<meta charset=\"utf-8\"/>\n<title>Nightjar report</title>\n<style>";
  h += kStyle;
  h += "</style>\n</head>\n<body>\n<h1>Nightjar: the morning summary</h1>\n<p>Generated " +
       html_escape(format_utc(generated_at)) + "; " + std::to_string(jobs.size()) + " job" +
       (jobs.size() == 1 ? "" : "s") + ", failures first.</p>\n";
  h += jobs_summary(order);
  for (const JobReport* jr : order) {
    const JobReport& r = *jr;
    h += "<h2>" +
         (r.homes > 1 ? "Job in " + std::to_string(r.homes) + " homes"
                      : "Job " + std::to_string(r.job.id)) +
         ": " + html_escape(r.job.name) + " (" + html_escape(r.job.kind) + ", " + r.state() +
         ")</h2>\n";
    h += summary_table(r);
    if (!r.labels.empty() || !r.review(1).empty()) {
      h += "<h3>Labels</h3>\n" + label_chart(r);
      const std::string review = review_table(r, options.review);
      if (!review.empty()) h += "<h3>To review: the lowest margins</h3>\n" + review;
    }
    if (r.engine_s > 0) {
      h += "<h3>Share of engine time waiting on disk: " + format_share(r.disk_share()) + "</h3>\n";
      h += share_bar(r.disk_share());
    }
    h += "<h3>Timeline</h3>\n";
    const bool running = std::any_of(r.items.begin(), r.items.end(), [](const ItemReport& i) {
      return i.state == ItemState::kRunning;
    });
    if (r.engine_s > 0 || running) {
      h += kLegend;
      h += timeline(r, generated_at, options.max_items);
    } else {
      // Nothing ran in the engine (a model that never opened): no bars that would look like
      // work.
      h += "<p>No item reached the engine (0 s of engine time): no timeline.</p>\n";
    }
    h += "<h3>Items</h3>\n" + item_table(r, options.max_items);
  }
  return h + "</body>\n</html>\n";
}

}  // namespace nj::runner
