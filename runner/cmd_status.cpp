// `nightjar status [JOB]`, `nightjar cancel JOB`, `nightjar retry JOB`.
#include <cmath>
#include <cstdio>
#include <memory>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runner/commands.h"
#include "runner/exit_codes.h"
#include "runner/home.h"
#include "runner/job_outputs.h"
#include "runner/lease_owner.h"
#include "runner/output.h"
#include "runner/progress.h"

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

nlohmann::json job_json(const JobSummary& j) {
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
  out["eta_s"] = (rate > 0 && (j.queued + j.running) > 0) ? nlohmann::json(left / rate)
                                                          : nlohmann::json(nullptr);
  return out;
}

nlohmann::json item_json(const ItemRow& i, int64_t shared_prompt, double now) {
  const double rate = rate_of(i.tokens_done, i.prefill_s + i.decode_s);
  const std::string state = shown_state(i, now);
  nlohmann::json out = {
      {"custom_id", i.custom_id},
      {"state", state},
      {"tokens_done", i.tokens_done},
      {"max_tokens", i.max_tokens},
      {"prompt_tokens", static_cast<int64_t>(i.prompt_ids.size()) + shared_prompt},
      {"attempts", i.attempts},
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
          "job %lld: its outputs could not be written: %s (nightjar results %lld --write "
          "writes them again)\n",
          (long long)j.job.id, printable(j.job.outputs_error.value_or("")).c_str(),
          (long long)j.job.id);
}

void print_jobs_text(const std::vector<JobSummary>& jobs) {
  if (jobs.empty()) {
    std::printf("no jobs\n");
    return;
  }
  std::printf("%-5s %-24s %-9s %-30s %-17s %-13s %s\n", "JOB", "NAME", "STATE",
              "ITEMS done/run/queue/fail/canc", "TOKENS", "RATE", "ETA");
  for (const auto& j : jobs) {
    const nlohmann::json js = job_json(j);
    char items[64], tokens[40];
    std::snprintf(items, sizeof items, "%lld/%lld/%lld/%lld/%lld", (long long)j.done,
                  (long long)j.running, (long long)j.queued, (long long)j.failed,
                  (long long)j.cancelled);
    std::snprintf(tokens, sizeof tokens, "%lld/%lld", (long long)j.tokens_done,
                  (long long)j.tokens_planned);
    std::printf("%-5lld %-24s %-9s %-30s %-17s %-13s %s\n", (long long)j.job.id,
                printable(j.job.name).c_str(), job_state(j).c_str(), items, tokens,
                rate_text(js["rate_tokens_per_s"]).c_str(),
                js["eta_s"].is_null() ? "-" : format_duration(js["eta_s"].get<double>()).c_str());
  }
}

void print_items_text(const JobSummary& j, const std::vector<ItemRow>& items, double now) {
  print_jobs_text({j});
  print_outputs_failures({j});
  std::printf("\n%-24s %-10s %-15s %-9s %-13s %s\n", "ITEM", "STATE", "TOKENS", "ATTEMPTS", "RATE",
              "LAST ERROR");
  for (const auto& i : items) {
    char tokens[40];
    std::snprintf(tokens, sizeof tokens, "%lld/%lld", (long long)i.tokens_done,
                  (long long)i.max_tokens);
    std::printf("%-24s %-10s %-15s %-9d %-13s %s\n", printable(i.custom_id).c_str(),
                shown_state(i, now).c_str(), tokens, i.attempts,
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
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("status", "Jobs and items: state, tokens, attempts, errors, rate, ETA");
  sub->add_option("job", a->job, "A job id or name (default: every job)");
  add_home_option(*sub, a->home);
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    auto store = open_existing(a->home);
    if (!store.ok()) return report_failure(store.status());
    JobStore& s = **store;
    if (a->job.empty()) {
      auto jobs = s.list_jobs();
      if (!jobs.ok()) return report_failure(jobs.status());
      if (a->output == "json") {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& j : *jobs) arr.push_back(job_json(j));
        print_json({{"jobs", arr}});
      } else {
        print_jobs_text(*jobs);
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
    if (a->output == "json") {
      nlohmann::json arr = nlohmann::json::array();
      const int64_t shared = shared_prompt_tokens(*job);
      for (const auto& i : *items) arr.push_back(item_json(i, shared, s.now()));
      nlohmann::json j = job_json(*summary);
      if (job->kind == "classify") {
        auto prefix = prefix_json(s, job->id);
        if (!prefix.ok()) return report_failure(prefix.status());
        j["prefix"] = *prefix;
      }
      print_json({{"job", j}, {"items", arr}});
    } else {
      print_items_text(*summary, *items, s.now());
    }
    return kExitOk;
  });
}

namespace {

// `cancel` and `retry`: one store action on a job's items, and a line saying how many moved.
void add_job_action(CLI::App& app, CommandTable& table, const char* name, const char* help,
                    Result<int64_t> (JobStore::*action)(int64_t), const char* moved) {
  struct Args {
    std::string job;
    std::string home;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("job", a->job, "A job id or name")->required();
  add_home_option(*sub, a->home);
  table.emplace_back(sub, [a, action, moved]() -> int {
    auto store = open_existing(a->home);
    if (!store.ok()) return report_failure(store.status());
    auto job = (*store)->find_job(a->job);
    if (!job.ok()) return report_failure(job.status());
    auto n = ((**store).*action)(job->id);
    if (!n.ok()) return report_failure(n.status());
    std::printf("%s %lld items of job %lld\n", moved, (long long)*n, (long long)job->id);
    return kExitOk;
  });
}

}  // namespace

void add_cancel_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  add_job_action(app, table, "cancel", "Cancel a job's queued and running items",
                 &JobStore::cancel_job, "cancelled");
}

void add_retry_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  add_job_action(app, table, "retry",
                 "Queue a job's failed and cancelled items again (they resume)",
                 &JobStore::retry_job, "requeued");
}

}  // namespace nj::runner
