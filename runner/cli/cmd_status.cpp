// `nightjar status [JOB]`, `nightjar cancel JOB`, `nightjar retry JOB`.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/plan/kernel_rates.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/run/model_args.h"
#include "runner/cli/output.h"
#include "runner/results/job_outputs.h"
#include "runner/forecast/job_plan.h"
#include "runner/durable/lease_owner.h"
#include "runner/item/progress.h"
#include "runner/report/report.h"
#include "runner/store/home.h"
#include "runner/store/job_kind.h"
#include "runner/store/job_label.h"

namespace nj::runner {
namespace {

std::string job_state(const JobSummary& j) {
  if (j.running > 0) return "running";
  if (j.queued > 0) return "queued";
  if (j.job.outputs_state == "failed") return "outputs_failed";  // finished, files not written
  if (j.failed > 0) return "failed";
  if (j.cancelled > 0) return "cancelled";
  return "done";
}

// The declared outputs' state: null while none were written (or none are declared).
nlohmann::json outputs_json(const JobRow& job) {
  if (!job.outputs_state) return nullptr;
  nlohmann::json out = {{"state", *job.outputs_state}, {"at", job.outputs_at.value_or(0.0)}};
  out["error"] = job.outputs_error ? nlohmann::json(*job.outputs_error) : nlohmann::json(nullptr);
  return out;
}

// An item's state as status shows it: a running item whose lease expired without a
// heartbeat, or whose run process on this host is gone, is "stalled" (the next run takes it
// over), not running.
std::string shown_state(const ItemRow& i, double now) {
  if (i.state == ItemState::kRunning && ((i.lease_expires && *i.lease_expires < now) ||
                                         (i.lease_owner && !lease_owner_alive(*i.lease_owner))))
    return "stalled";
  return item_state_name(i.state);
}

// Generated tokens per second of engine time, and the time the queued work still needs.
double rate_of(int64_t tokens, double active_s) {
  return active_s > 0 && tokens > 0 ? tokens / active_s : 0.0;
}

// The ETA of a running job: its remaining work replayed as `run` does it and costed by the
// engine's cost model (job_plan.h), as `plan SPEC` predicts a whole job. The kernel rates
// are measured once per status command, and only when a job is running.
class EtaModel {
 public:
  explicit EtaModel(double bandwidth_gbps) : bandwidth_gbps_(bandwidth_gbps) {}

  // Seconds the job still needs, or nullopt when it is not running or cannot be predicted
  // (its model gone, say: then the warning says why and the rate-based ETA stands).
  std::optional<double> eta(JobStore& store, const JobSummary& j) {
    if (j.running == 0) return std::nullopt;
    auto items = store.items(j.job.id);
    if (!items.ok()) return std::nullopt;
    JobRunShape shape;
    auto work = remaining_work(j.job, *items, &shape);
    if (!work.ok()) return std::nullopt;
    if (!rates_) {
      if (!apply_compute_options(ModelArgs{}).ok()) return std::nullopt;
      rates_ = KernelRates::measure(2);
    }
    auto f = forecast_job(*work, shape, *rates_, bandwidth_gbps_);
    if (!f.ok()) {
      spdlog::warn("{}: no ETA from the cost model: {}", job_label(j.job), f.status().message());
      return std::nullopt;
    }
    return f->prediction.seconds;
  }

 private:
  double bandwidth_gbps_;
  std::optional<KernelRates> rates_;
};

nlohmann::json job_json(const JobSummary& j, std::optional<double> planned_eta = std::nullopt) {
  const double rate = rate_of(j.tokens_done, j.active_s);
  const int64_t left = std::max<int64_t>(0, j.tokens_planned - j.tokens_done);
  nlohmann::json out = {{"id", j.job.id},
                        {"name", j.job.name},
                        {"kind", j.job.kind},
                        {"model", j.job.model_dir},
                        {"state", job_state(j)},
                        {"priority", j.job.priority},
                        {"items",
                         {{"total", j.items()},
                          {"queued", j.queued},
                          {"running", j.running},
                          {"done", j.done},
                          {"failed", j.failed},
                          {"cancelled", j.cancelled}}},
                        {"tokens_done", j.tokens_done},
                        {"tokens_planned", j.tokens_planned},
                        {"active_s", j.active_s},
                        {"rate_tokens_per_s", rate},
                        {"created_at", j.job.created_at},
                        {"outputs", outputs_json(j.job)}};
  const bool rated = rate > 0 && (j.queued + j.running) > 0;
  out["eta_s"] = planned_eta ? nlohmann::json(*planned_eta)
                 : rated     ? nlohmann::json(left / rate)
                             : nlohmann::json(nullptr);
  // "plan": the cost model on the work left; "rate": tokens left at the rate so far.
  out["eta_basis"] = planned_eta ? nlohmann::json("plan") : rated ? nlohmann::json("rate") : nlohmann::json(nullptr);
  return out;
}

// An item's failed attempts over its whole history: the stored count (since its last retry,
// the one max_attempts applies to) plus what each retry reset.
int64_t failed_attempts(const ItemRow& i, const std::map<int64_t, RetryHistory>& history) {
  auto h = history.find(i.id);
  return i.attempts + (h == history.end() ? 0 : h->second.attempts);
}

int64_t retries(const ItemRow& i, const std::map<int64_t, RetryHistory>& history) {
  auto h = history.find(i.id);
  return h == history.end() ? 0 : h->second.retries;
}

// "attempts": failed attempts since the last retry (what max_attempts counts);
// "failed_attempts": over the item's whole history, as `report` counts them; "retries".
nlohmann::json item_json(const ItemRow& i, int64_t shared_prompt, double now,
                         const std::map<int64_t, RetryHistory>& history) {
  const double rate = rate_of(i.tokens_done, i.prefill_s + i.decode_s);
  const std::string state = shown_state(i, now);
  nlohmann::json out = {
      {"custom_id", i.custom_id},
      {"state", state},
      {"tokens_done", i.tokens_done},
      {"max_tokens", i.max_tokens},
      {"prompt_tokens", static_cast<int64_t>(i.prompt_ids.size()) + shared_prompt},
      {"attempts", i.attempts},
      {"failed_attempts", failed_attempts(i, history)},
      {"retries", retries(i, history)},
      {"claims", i.claims},
      {"rate_tokens_per_s", rate}};
  out["last_error"] = i.last_error ? nlohmann::json(*i.last_error) : nlohmann::json(nullptr);
  out["lease_owner"] = i.lease_owner ? nlohmann::json(*i.lease_owner) : nlohmann::json(nullptr);
  const bool active = state == "queued" || state == "running";
  out["eta_s"] = active && rate > 0 ? nlohmann::json((i.max_tokens - i.tokens_done) / rate)
                                    : nlohmann::json(nullptr);
  out["retry_at"] = i.state == ItemState::kQueued && i.retry_at && *i.retry_at > now
                        ? nlohmann::json(*i.retry_at)
                        : nlohmann::json(nullptr);
  out["numerics_version"] =
      i.numerics_version ? nlohmann::json(*i.numerics_version) : nlohmann::json(nullptr);
  return out;
}

std::string rate_text(double rate) {
  if (rate <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f tok/s", rate);
  return buf;
}

// A line under the table for each job whose declared outputs could not be written.
void print_outputs_failures(const std::vector<JobSummary>& jobs) {
  for (const auto& j : jobs)
    if (j.job.outputs_state == "failed")
      std::printf(
          "%s: its outputs could not be written: %s (nightjar results %lld --write "
          "writes them again)\n",
          job_label(j.job).c_str(), printable(j.job.outputs_error.value_or("")).c_str(),
          (long long)j.job.id);
}

void print_jobs_text(const std::vector<JobSummary>& jobs, const std::vector<nlohmann::json>& shown) {
  if (jobs.empty()) {
    std::printf("no jobs\n");
    return;
  }
  std::printf("%-5s %-24s %-14s %-30s %-17s %-13s %s\n", "JOB", "NAME", "STATE",
              "ITEMS done/run/queue/fail/canc", "TOKENS", "RATE", "ETA");
  for (size_t k = 0; k < jobs.size(); ++k) {
    const JobSummary& j = jobs[k];
    const nlohmann::json& js = shown[k];
    char items[64], tokens[40];
    std::snprintf(items, sizeof items, "%lld/%lld/%lld/%lld/%lld", (long long)j.done,
                  (long long)j.running, (long long)j.queued, (long long)j.failed,
                  (long long)j.cancelled);
    std::snprintf(tokens, sizeof tokens, "%lld/%lld", (long long)j.tokens_done,
                  (long long)j.tokens_planned);
    std::printf("%-5lld %-24s %-14s %-30s %-17s %-13s %s\n", (long long)j.job.id,
                printable(j.job.name).c_str(), job_state(j).c_str(), items, tokens,
                rate_text(js["rate_tokens_per_s"]).c_str(),
                js["eta_s"].is_null() ? "-" : format_duration(js["eta_s"].get<double>()).c_str());
  }
}

// ATTEMPTS: failed attempts over the item's whole history (a retry resets the count that
// max_attempts applies to, not what happened), RETRIES: how often `retry` queued it again.
void print_items_text(const JobSummary& j, const nlohmann::json& shown,
                      const std::vector<ItemRow>& items, double now,
                      const std::map<int64_t, RetryHistory>& history) {
  print_jobs_text({j}, {shown});
  print_outputs_failures({j});
  std::printf("\n%-24s %-10s %-15s %-9s %-8s %-13s %s\n", "ITEM", "STATE", "TOKENS", "ATTEMPTS",
              "RETRIES", "RATE", "LAST ERROR");
  for (const auto& i : items) {
    char tokens[40];
    std::snprintf(tokens, sizeof tokens, "%lld/%lld", (long long)i.tokens_done,
                  (long long)i.max_tokens);
    std::printf("%-24s %-10s %-15s %-9lld %-8lld %-13s %s\n", printable(i.custom_id).c_str(),
                shown_state(i, now).c_str(), tokens, (long long)failed_attempts(i, history),
                (long long)retries(i, history),
                rate_text(rate_of(i.tokens_done, i.prefill_s + i.decode_s)).c_str(),
                printable(i.last_error.value_or("")).c_str());
  }
}

// A classify job's template prefix work, from its `prefix_prefilled` events: how often it
// was prefilled (once per job unless its state file was lost or unusable) and what that cost.
Result<nlohmann::json> prefix_json(JobStore& store, int64_t job_id) {
  NJ_ASSIGN_OR_RETURN(auto events, store.events(job_id, std::nullopt));
  int64_t prefills = 0, tokens_fed = 0;
  double prefill_s = 0;
  for (const auto& e : events) {
    if (e.kind != "prefix_prefilled") continue;
    auto d = nlohmann::json::parse(e.detail_json, nullptr, false);
    ++prefills;
    if (d.is_object()) {
      tokens_fed += d.value("tokens_fed", int64_t{0});
      prefill_s += d.value("prefill_s", 0.0);
    }
  }
  return nlohmann::json{
      {"prefills", prefills}, {"tokens_fed", tokens_fed}, {"prefill_s", prefill_s}};
}

// Opens the home's existing store (read-mostly commands never create one).
Result<std::unique_ptr<JobStore>> open_existing(const std::string& home_flag) {
  NJ_ASSIGN_OR_RETURN(Home home, resolve_home(home_flag));
  return open_home_store(home, /*create=*/false);
}

}  // namespace

void add_status_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    std::string job;
    std::string home;
    std::string output = "text";
    double bandwidth = 2.6;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("status", "Jobs and items: state, tokens, attempts, errors, rate, ETA");
  sub->add_option("job", a->job, "A job id or name (default: every job)");
  sub->add_option("--bandwidth", a->bandwidth,
                  "Disk read bandwidth in GB/s for a running job's ETA (the cost model of "
                  "`plan SPEC`; default 2.6, `nightjar doctor` measures it)")
      ->check(CLI::PositiveNumber);
  add_home_option(*sub, a->home);
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    auto store = open_existing(a->home);
    if (!store.ok()) return report_failure(store.status());
    JobStore& s = **store;
    EtaModel etas(a->bandwidth);
    if (a->job.empty()) {
      auto jobs = s.list_jobs();
      if (!jobs.ok()) return report_failure(jobs.status());
      std::vector<nlohmann::json> shown;
      for (const auto& j : *jobs) shown.push_back(job_json(j, etas.eta(s, j)));
      if (a->output == "json") {
        print_json({{"jobs", shown}});
      } else {
        print_jobs_text(*jobs, shown);
        print_outputs_failures(*jobs);
      }
      return kExitOk;
    }
    auto job = s.find_job(a->job);
    if (!job.ok()) return report_failure(job.status());
    auto summary = s.job_summary(job->id);
    if (!summary.ok()) return report_failure(summary.status());
    auto items = s.items(job->id);
    if (!items.ok()) return report_failure(items.status());
    auto history = retry_history(s, job->id);
    if (!history.ok()) return report_failure(history.status());
    if (a->output == "json") {
      nlohmann::json arr = nlohmann::json::array();
      const int64_t shared = shared_prompt_tokens(*job);
      for (const auto& i : *items) arr.push_back(item_json(i, shared, s.now(), *history));
      nlohmann::json j = job_json(*summary, etas.eta(s, *summary));
      if (is_classify(*job)) {
        auto prefix = prefix_json(s, job->id);
        if (!prefix.ok()) return report_failure(prefix.status());
        j["prefix"] = *prefix;
      }
      print_json({{"job", j}, {"items", arr}});
    } else {
      print_items_text(*summary, job_json(*summary, etas.eta(s, *summary)), *items, s.now(),
                       *history);
    }
    return kExitOk;
  });
}

namespace {

// `cancel` and `retry`: one store action on a job's items (all of them in the state the
// action applies to, or the named ones), and what moved: a line of text, or with --output json
// {"job": {"id", "name"}, "<verb>": N, "items": [{"custom_id", "from"}]}.
using ItemAction = Result<std::vector<JobStore::MovedItem>> (JobStore::*)(
    int64_t, const std::vector<std::string>&);

struct JobActionArgs {
  std::string job;
  std::vector<std::string> items;
  std::string home;
  std::string output = "text";
};

CommandFn job_action(std::shared_ptr<JobActionArgs> a, ItemAction action, const char* verb) {
  return [a, action, verb]() -> int {
    auto store = open_existing(a->home);
    if (!store.ok()) return report_failure(store.status());
    auto job = (*store)->find_job(a->job);
    if (!job.ok()) return report_failure(job.status());
    const std::string named = job_label(*job);
    auto moved = ((**store).*action)(job->id, a->items);
    if (!moved.ok()) {
      // The store names the job by id; say its name too.
      return report_failure(Status(moved.status().code(), named + ": " + moved.status().message()));
    }
    if (a->output == "json") {
      nlohmann::json items = nlohmann::json::array();
      for (const auto& m : *moved) items.push_back({{"custom_id", m.custom_id}, {"from", m.from}});
      print_json({{"job", {{"id", job->id}, {"name", job->name}}},
                  {verb, moved->size()},
                  {"items", items}});
      return kExitOk;
    }
    std::string line = std::string(verb) + " " + std::to_string(moved->size()) +
                       (moved->size() == 1 ? " item" : " items") + " of " + named;
    if (!a->items.empty()) {
      line += ":";
      for (size_t i = 0; i < moved->size(); ++i) line += (i ? ", " : " ") + (*moved)[i].custom_id;
    }
    std::printf("%s\n", line.c_str());
    return kExitOk;
  };
}

void add_action_output(CLI::App& sub, JobActionArgs& a) {
  sub.add_option("--output", a.output, "text or json")->check(CLI::IsMember({"text", "json"}));
}

}  // namespace

void add_cancel_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  auto a = std::make_shared<JobActionArgs>();
  CLI::App* sub = app.add_subcommand(
      "cancel", "Cancel a job's queued and running items, or only those given with --item");
  sub->add_option("job", a->job, "A job id or name")->required();
  sub->add_option("--item", a->items,
                  "Cancel only this item (custom_id; repeat --item for more); "
                  "each must be queued or running, else nothing changes");
  add_home_option(*sub, a->home);
  add_action_output(*sub, *a);
  table.emplace_back(sub, job_action(a, &JobStore::cancel_items, "cancelled"));
}

void add_retry_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  auto a = std::make_shared<JobActionArgs>();
  CLI::App* sub = app.add_subcommand(
      "retry",
      "Queue a job's failed and cancelled items again, or only the ITEMs given (they resume)");
  sub->add_option("job", a->job, "A job id or name")->required();
  sub->add_option("items", a->items,
                  "Retry only these items (custom_id); each must be failed or cancelled, else "
                  "nothing changes");
  add_home_option(*sub, a->home);
  add_action_output(*sub, *a);
  table.emplace_back(sub, job_action(a, &JobStore::retry_items, "requeued"));
}

}  // namespace nj::runner
