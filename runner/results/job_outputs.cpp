// results_csv and the declared outputs of a job.
#include "runner/results/job_outputs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/io/durable.h"
#include "engine/io/env.h"
#include "engine/io/lock_file.h"
#include "jobs/spec/job_spec.h"
#include "jobs/spec/output_paths.h"
#include "runner/results/openai_results.h"
#include "runner/results/result_record.h"
#include "runner/store/job_label.h"
#include "runner/store/job_kind.h"
#include "runner/store/job_settings.h"

namespace nj::runner {
namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9f", v);
  return buf;
}

std::string text_of(const nlohmann::json& record, const char* key) {
  const auto v = record.find(key);
  return v != record.end() && v->is_string() ? v->get<std::string>() : std::string();
}

std::string classify_csv(const std::vector<nlohmann::json>& records,
                         const jobs::ClassifySettings& c) {
  std::string out = "custom_id,status,label";
  for (const auto& label : c.labels) out += "," + csv_field("p(" + label + ")");
  out += ",margin,error\n";
  for (const nlohmann::json& record : records) {
    const nlohmann::json d = record.value("details", nlohmann::json());
    const bool scored = d.is_object() && d.contains("probabilities");
    out += csv_field(text_of(record, "custom_id")) + "," + text_of(record, "status") + ",";
    out += scored ? csv_field(d.value("label", "")) : "";
    for (const auto& label : c.labels) {
      out += ",";
      if (scored && d["probabilities"].contains(label) && d["probabilities"][label].is_number())
        out += number(d["probabilities"][label].get<double>());
    }
    out += ",";
    if (scored && d.contains("margin") && d["margin"].is_number())
      out += number(d["margin"].get<double>());
    out += "," + csv_field(record_error(record)) + "\n";
  }
  return out;
}

std::string generate_csv(const std::vector<nlohmann::json>& records) {
  std::string out = "custom_id,status,finish_reason,output_tokens,output_text,error\n";
  for (const nlohmann::json& record : records) {
    const auto tokens = record.find("output_tokens");
    out += csv_field(text_of(record, "custom_id")) + "," + text_of(record, "status") + ",";
    out += csv_field(text_of(record, "finish_reason")) + ",";
    out += (tokens != record.end() && tokens->is_number_integer()
                ? std::to_string(tokens->get<int64_t>())
                : std::string("0")) +
           ",";
    out += csv_field(text_of(record, "output_text")) + ",";
    out += csv_field(record_error(record)) + "\n";
  }
  return out;
}

Result<std::vector<nlohmann::json>> job_records(JobStore& store, const JobRow& job) {
  NJ_ASSIGN_OR_RETURN(auto items, store.items(job.id));
  const int64_t shared = shared_prompt_tokens(job);
  std::vector<nlohmann::json> records;
  for (const auto& item : items) {
    NJ_ASSIGN_OR_RETURN(auto r, store.result(item.id));
    records.push_back(result_record(item, r, shared));
  }
  return records;
}

// write_file_durably, creating the file's directory first (results/triage.csv). Two `run`
// processes finishing a job's last items at the same instant both write its outputs; an
// flock on the directory serializes them, since write_file_durably's temp name is fixed.
Status write_output(const std::string& path, const std::string& text) {
  std::error_code ec;
  auto dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error(dir.string() + ": cannot create the output directory: " + ec.message());
  NJ_ASSIGN_OR_RETURN(LockFile lock, LockFile::open(dir.string(), /*directory=*/true));
  NJ_RETURN_IF_ERROR(lock.lock_exclusive());
  return write_file_durably(*Env::posix(), path, text);  // then `lock` releases the lock
}

}  // namespace

std::string csv_field(const std::string& raw) {
  // Invalid UTF-8 (a generation cut inside a character) becomes U+FFFD exactly as the JSON
  // forms write it, so that `merge --format csv` (which reads those) writes the same text.
  const std::string text =
      nlohmann::json::parse(
          nlohmann::json(raw).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
          .get<std::string>();
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

Result<std::string> records_csv(const std::string& kind, const std::string& settings_json,
                                const std::vector<nlohmann::json>& records) {
  if (known_job_kind(kind) != jobs::JobKind::kClassify) return generate_csv(records);
  NJ_ASSIGN_OR_RETURN(auto c, JobSettings::parse(settings_json).classify());
  return classify_csv(records, c);
}

Result<std::string> results_csv(JobStore& store, const JobRow& job) {
  NJ_ASSIGN_OR_RETURN(auto records, job_records(store, job));
  return records_csv(job.kind, job.settings_json, records);
}

namespace {

// An OpenAI batch job's output and error files (jobs::OpenAiOutputs), when it asked for them.
Result<std::vector<std::string>> write_openai_outputs(JobStore& store, const JobRow& job,
                                                      const Home& home) {
  std::vector<std::string> written;
  NJ_ASSIGN_OR_RETURN(auto outputs, JobSettings::of(job).openai_outputs());
  if (!outputs) return written;
  jobs::OutputRules rules = outputs->rules;
  rules.homes.push_back(home.dir);
  rules.store_file = Home::kStoreFile;
  auto checked = [&](const std::string& path, const char* flag) -> Status {
    auto resolved = jobs::check_output_path(path, rules);
    if (resolved.ok()) return Status();
    return invalid_argument(job_label(job) + ": " + flag + " " + path + ": " +
                            resolved.status().message() + "; not written");
  };
  NJ_ASSIGN_OR_RETURN(auto items, store.items(job.id));
  OpenAiBatchFiles files;
  if (outputs->error_file) {
    NJ_ASSIGN_OR_RETURN(files, openai_batch_files(store, job, items));
  } else {
    // Without an error file every line goes to the output file, in spec order, as
    // `results --format openai` prints them.
    NJ_ASSIGN_OR_RETURN(files.output, openai_batch_text(store, job, items));
  }
  const std::string& output = files.output;
  NJ_RETURN_IF_ERROR(checked(outputs->output_file, "--output-file"));
  if (outputs->error_file) NJ_RETURN_IF_ERROR(checked(*outputs->error_file, "--error-file"));
  NJ_RETURN_IF_ERROR(write_output(outputs->output_file, output));
  written.push_back(outputs->output_file);
  if (outputs->error_file) {
    NJ_RETURN_IF_ERROR(write_output(*outputs->error_file, files.errors));
    written.push_back(*outputs->error_file);
  }
  return written;
}

}  // namespace

bool declares_outputs(const JobRow& job) {
  if (is_classify(job)) {
    auto c = JobSettings::of(job).classify();
    return c.ok() && (c->output_jsonl || c->output_csv);
  }
  auto openai = JobSettings::of(job).openai_outputs();  // submit --openai-batch --output-file
  return openai.ok() && openai->has_value();
}

Result<std::vector<std::string>> write_declared_outputs(JobStore& store, const JobRow& job,
                                                        const Home& home) {
  std::vector<std::string> written;
  if (!is_classify(job)) return write_openai_outputs(store, job, home);
  NJ_ASSIGN_OR_RETURN(auto c, JobSettings::of(job).classify());
  // A job stored before the rules were recorded: the spec's directory and the spec.
  jobs::OutputRules rules = c.output_rules.value_or(jobs::OutputRules{});
  if (!c.output_rules) {
    rules.spec_dir = std::filesystem::path(job.spec_path).parent_path().string();
    rules.spec_file = job.spec_path;
  }
  rules.homes.push_back(home.dir);
  rules.store_file = Home::kStoreFile;
  auto checked = [&](const std::string& path, const char* key) -> Status {
    auto resolved = jobs::check_output_path(path, rules);
    if (resolved.ok()) return Status();
    return invalid_argument(job_label(job) + ": outputs." + key + " " + path + ": " +
                            resolved.status().message() + "; not written");
  };
  if (c.output_jsonl) {
    NJ_ASSIGN_OR_RETURN(std::string text, results_jsonl(store, job));
    NJ_RETURN_IF_ERROR(checked(*c.output_jsonl, "jsonl"));
    NJ_RETURN_IF_ERROR(write_output(*c.output_jsonl, text));
    written.push_back(*c.output_jsonl);
  }
  if (c.output_csv) {
    NJ_ASSIGN_OR_RETURN(auto records, job_records(store, job));
    const std::string text = classify_csv(records, c);
    NJ_RETURN_IF_ERROR(checked(*c.output_csv, "csv"));
    NJ_RETURN_IF_ERROR(write_output(*c.output_csv, text));
    written.push_back(*c.output_csv);
  }
  return written;
}

}  // namespace nj::runner
