// OpenAI Batch API input lines -> requests -> a generate JobSpec (format in openai_batch.h).
#include "jobs/openai/openai_batch.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/io/file.h"
#include "engine/model/config.h"
#include "engine/tokenizer/tokenizer.h"
#include "jobs/chat/chat_messages.h"
#include "jobs/inputs/document_inputs.h"
#include "jobs/inputs/shard.h"
#include "jobs/spec/spec_model.h"

namespace nj::jobs {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTokensLimit = 1 << 20;
constexpr size_t kMaxErrorsListed = 20;
constexpr size_t kMaxFileBytes = 1u << 30;  // the Batch API's own limit is 200 MB
constexpr size_t kMaxStopStrings = 4;       // the API's limit

// The errors of one file, each "<file>:<line>: <what>".
class LineErrors {
 public:
  explicit LineErrors(std::string file) : file_(std::move(file)) {}
  void add(int line, const std::string& what) {
    lines_.push_back(file_ + ":" + std::to_string(line) + ": " + what);
  }
  bool empty() const { return lines_.empty(); }
  size_t size() const { return lines_.size(); }
  Status status() const {
    std::string text;
    for (size_t i = 0; i < lines_.size() && i < kMaxErrorsListed; ++i)
      text += (i ? "\n" : "") + lines_[i];
    if (lines_.size() > kMaxErrorsListed)
      text += "\n... and " + std::to_string(lines_.size() - kMaxErrorsListed) + " more errors";
    return invalid_argument(text);
  }

 private:
  std::string file_;
  std::vector<std::string> lines_;
};

// Reports keys of `obj` outside `known` as unsupported.
void check_keys(const json& obj, const std::set<std::string>& known, const std::string& path,
                int line, LineErrors& errors) {
  for (const auto& [key, value] : obj.items()) {
    if (known.count(key)) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    errors.add(line, path + key + ": unsupported field (supported: " + list + ")");
  }
}

// The value of `key` unless absent or null.
const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

void read_messages(const json& body, OpenAiRequest& req, LineErrors& errors) {
  std::vector<std::string> problems;
  const json* messages = field(body, "messages");
  req.messages = read_chat_messages(messages ? *messages : json(), "body.messages", problems);
  for (const std::string& p : problems) errors.add(req.line, p);
  size_t bytes = 0;
  for (const ChatMessage& m : req.messages) bytes += m.content.size() + m.reasoning.size();
  if (bytes > kMaxDocumentBytes)
    errors.add(req.line, document_too_large("body.messages' text", bytes));
}

// Thinking: reasoning_effort and/or chat_template_kwargs (the header's rules).
void read_thinking(const json& body, OpenAiRequest& req, LineErrors& errors) {
  std::optional<ThinkingEffort> effort;
  std::optional<bool> thinking;
  if (const json* v = field(body, "reasoning_effort")) {
    const auto e = v->is_string() ? parse_thinking_effort(v->get<std::string>()) : std::nullopt;
    if (!e || *e == ThinkingEffort::kMax) {
      errors.add(req.line, "body.reasoning_effort: expected \"low\", \"medium\" or \"high\"");
      return;
    }
    effort = *e;
    thinking = true;
  }
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) {
      errors.add(req.line, "body.chat_template_kwargs: expected an object");
      return;
    }
    check_keys(*kw, {"thinking", "thinking_effort"}, "body.chat_template_kwargs.", req.line,
               errors);
    if (const json* t = field(*kw, "thinking")) {
      if (!t->is_boolean()) {
        errors.add(req.line, "body.chat_template_kwargs.thinking: expected true or false");
        return;
      }
      if (thinking && !t->get<bool>()) {
        errors.add(req.line,
                   "body.chat_template_kwargs.thinking: false, but reasoning_effort turns "
                   "thinking on");
        return;
      }
      thinking = t->get<bool>();
    }
    if (const json* te = field(*kw, "thinking_effort")) {
      const auto e = te->is_string() ? parse_thinking_effort(te->get<std::string>()) : std::nullopt;
      if (!e) {
        errors.add(req.line,
                   "body.chat_template_kwargs.thinking_effort: expected \"low\", \"medium\", "
                   "\"high\" or \"max\"");
        return;
      }
      if (!thinking || !*thinking) {
        errors.add(req.line,
                   "body.chat_template_kwargs.thinking_effort: needs \"thinking\": true "
                   "(thinking is off by default)");
        return;
      }
      if (effort && *effort != *e) {
        errors.add(req.line, std::string("body.chat_template_kwargs.thinking_effort: '") +
                                 thinking_effort_name(*e) + "' disagrees with reasoning_effort '" +
                                 thinking_effort_name(*effort) + "'");
        return;
      }
      effort = *e;
    }
  }
  req.chat.thinking = thinking.value_or(false);
  if (effort) req.chat.effort = *effort;
}

// stop, logprobs, top_logprobs.
void read_reply_options(const json& body, OpenAiRequest& req, LineErrors& errors) {
  ChatReplyOptions reply;
  reply.thinking = req.chat.thinking;
  if (const json* v = field(body, "stop")) {
    const json list = v->is_string() ? json::array({*v}) : *v;
    bool ok = list.is_array() && !list.empty() && list.size() <= kMaxStopStrings;
    for (const json& s : ok ? list : json::array())
      ok = ok && s.is_string() && !s.get<std::string>().empty();
    if (!ok)
      errors.add(req.line, "body.stop: expected a non-empty text or a list of 1 to " +
                               std::to_string(kMaxStopStrings) + " non-empty texts");
    else
      reply.stop = list.get<std::vector<std::string>>();
  }
  req.params.chat = std::move(reply);
  if (const json* v = field(body, "logprobs")) {
    if (!v->is_boolean())
      errors.add(req.line, "body.logprobs: expected true or false");
    else
      req.params.logprobs = v->get<bool>();
  }
  if (const json* v = field(body, "top_logprobs")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxTopLogprobs)
      errors.add(req.line, "body.top_logprobs: expected a whole number in 0.." +
                               std::to_string(kMaxTopLogprobs));
    else if (!req.params.logprobs)
      errors.add(req.line, "body.top_logprobs: needs \"logprobs\": true");
    else
      req.params.top_logprobs = static_cast<int>(v->get<int64_t>());
  }
}

void read_sampling(const json& body, OpenAiRequest& req, LineErrors& errors) {
  const json* max_tokens = field(body, "max_tokens");
  const json* max_completion = field(body, "max_completion_tokens");
  if (max_tokens && max_completion)
    errors.add(req.line, "body: give max_tokens or max_completion_tokens, not both");
  if (const json* v = max_tokens ? max_tokens : max_completion) {
    const char* key = max_tokens ? "max_tokens" : "max_completion_tokens";
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > kMaxTokensLimit)
      errors.add(req.line, std::string("body.") + key + ": expected a whole number in 1.." +
                               std::to_string(kMaxTokensLimit));
    else
      req.params.max_tokens = static_cast<int>(v->get<int64_t>());
    req.max_tokens_given = true;
  }
  req.params.sampling.temperature = kDefaultOpenAiTemperature;
  if (const json* v = field(body, "temperature")) {
    if (!v->is_number() || v->get<double>() < 0)
      errors.add(req.line, "body.temperature: expected a number >= 0");
    else
      req.params.sampling.temperature = v->get<float>();
  }
  if (const json* v = field(body, "top_p")) {
    if (!v->is_number() || v->get<double>() <= 0 || v->get<double>() > 1)
      errors.add(req.line, "body.top_p: expected a number in (0, 1]");
    else
      req.params.sampling.top_p = v->get<float>();
  }
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_unsigned())
      errors.add(req.line, "body.seed: expected a whole number >= 0");
    else
      req.params.sampling.seed = v->get<uint64_t>();
    req.seed_given = true;
  }
  if (const json* v = field(body, "n")) {
    if (!v->is_number_integer() || v->get<int64_t>() != 1)
      errors.add(req.line, "body.n: only 1 is supported (one completion per request)");
    else
      req.accepted_fields["n"] = *v;
  }
  if (const json* v = field(body, "model"); v && !v->is_string())
    errors.add(req.line, "body.model: expected text");
}

// The fields that change nothing in the output: accepted when they have their no-op value,
// and recorded with the item; any other value would change the output, so it is an error.
void read_no_op_fields(const json& body, OpenAiRequest& req, LineErrors& errors) {
  auto accept = [&](const char* key, bool ok, const std::string& expected) {
    const json* v = field(body, key);
    if (!v) return;
    if (ok)
      req.accepted_fields[key] = *v;
    else
      errors.add(req.line, std::string("body.") + key + ": " + expected);
  };
  const json* user = field(body, "user");
  accept("user", user && user->is_string(), "expected text");
  const json* metadata = field(body, "metadata");
  bool metadata_ok = metadata && metadata->is_object();
  if (metadata_ok)
    for (const auto& [k, v] : metadata->items()) metadata_ok = metadata_ok && v.is_string();
  accept("metadata", metadata_ok, "expected an object of texts");
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    const json* v = field(body, penalty);
    accept(penalty, v && v->is_number() && v->get<double>() == 0,
           "only 0 is supported (a penalty would change the output)");
  }
  const json* format = field(body, "response_format");
  accept(
      "response_format",
      format && format->is_object() && format->size() == 1 && format->value("type", "") == "text",
      "only {\"type\": \"text\"} is supported (a JSON format would change the output)");
  const json* stream = field(body, "stream");
  accept("stream", stream && stream->is_boolean() && !stream->get<bool>(),
         "only false is supported (a batch is not streamed)");
  const json* bias = field(body, "logit_bias");
  accept("logit_bias", bias && bias->is_object() && bias->empty(),
         "only {} is supported (a bias would change the output)");
}

// One line's request; errors go to `errors` (the request is then incomplete).
OpenAiRequest read_request(const json& j, int line, LineErrors& errors) {
  OpenAiRequest req;
  req.line = line;
  check_keys(j, {"custom_id", "method", "url", "body"}, "", line, errors);
  const json* id = field(j, "custom_id");
  if (!id)
    errors.add(line, "custom_id: missing");
  else if (!id->is_string() || id->get<std::string>().empty())
    errors.add(line, "custom_id: expected non-empty text");
  else
    req.custom_id = id->get<std::string>();
  if (const json* m = field(j, "method"); m && *m != "POST")
    errors.add(line, "method: unsupported " + m->dump() + " (only \"POST\")");
  if (const json* u = field(j, "url"); u && *u != "/v1/chat/completions")
    errors.add(line, "url: unsupported endpoint " + u->dump() + " (only \"/v1/chat/completions\")");
  const json* body = field(j, "body");
  if (!body || !body->is_object()) {
    errors.add(line, "body: missing or not an object");
    return req;
  }
  // clang-format off
  check_keys(
      *body,
      {"messages", "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed",
       "n", "reasoning_effort", "chat_template_kwargs", "stop", "logprobs", "top_logprobs",
       "user", "metadata", "presence_penalty", "frequency_penalty", "response_format", "stream",
       "logit_bias"},
      "body.", line, errors);
  // clang-format on
  read_messages(*body, req, errors);
  read_sampling(*body, req, errors);
  read_no_op_fields(*body, req, errors);
  read_thinking(*body, req, errors);
  read_reply_options(*body, req, errors);
  return req;
}

std::string default_job_name(const std::string& path) {
  std::filesystem::path p(path);
  return p.extension() == ".jsonl" ? p.stem().string() : p.filename().string();
}

}  // namespace

uint64_t derived_seed(const std::string& job_name, const std::string& custom_id) {
  std::string key = job_name;
  key.push_back('\0');
  key += custom_id;
  return custom_id_hash(key);  // XXH64 of the bytes, seed 0 (jobs/inputs/shard.h)
}

Result<std::vector<OpenAiRequest>> parse_openai_batch(const std::string& text,
                                                      const std::string& name) {
  LineErrors errors(name);
  std::vector<OpenAiRequest> requests;
  std::map<std::string, int> first_line;  // custom_id -> line of its first use
  size_t start = 0;
  for (int line = 1; start < text.size(); ++line) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view row(text.data() + start, end - start);
    start = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json j;
    try {
      j = json::parse(row);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
      std::string what = e.what();
      if (auto colon = what.find("column"); colon != std::string::npos) what = what.substr(colon);
      errors.add(line, "malformed JSON: " + what);
      continue;
    }
    if (!j.is_object()) {
      errors.add(line, "expected one JSON object per line");
      continue;
    }
    OpenAiRequest req = read_request(j, line, errors);
    if (!req.custom_id.empty()) {
      auto [it, fresh] = first_line.emplace(req.custom_id, line);
      if (!fresh)
        errors.add(line, "custom_id: duplicate '" + req.custom_id + "' (first used at line " +
                             std::to_string(it->second) + ")");
    }
    requests.push_back(std::move(req));
  }
  if (!errors.empty()) return errors.status();
  if (requests.empty()) return invalid_argument(name + ": no requests (the file has no lines)");
  return requests;
}

Result<JobSpec> load_openai_batch(const OpenAiBatchJob& job) {
  NJ_ASSIGN_OR_RETURN(std::string text, read_small_file(job.path, kMaxFileBytes));
  NJ_ASSIGN_OR_RETURN(std::vector<OpenAiRequest> requests, parse_openai_batch(text, job.path));

  JobSpec spec;
  spec.source = job.path;
  spec.name = job.name.empty() ? default_job_name(job.path) : job.name;
  spec.model_dir = std::filesystem::absolute(job.model_dir).lexically_normal().string();
  while (spec.model_dir.size() > 1 && spec.model_dir.back() == '/') spec.model_dir.pop_back();
  spec.model_where = "--model " + job.model_dir;
  spec.memory_bytes = job.memory_bytes;
  spec.memory_where = "--memory";

  auto config = load_model_config(spec.model_dir);
  if (!config.ok()) return invalid_argument(spec.model_where + ": " + config.status().message());
  if (!Tokenizer::exists_in(spec.model_dir))
    return invalid_argument(job.path + ": chat messages need the model's tokenizer, and " +
                            spec.model_dir + " has none (no " + Tokenizer::kRanksFile + ")");
  auto tok = Tokenizer::load(spec.model_dir);
  if (!tok.ok())
    return invalid_argument(spec.model_where +
                            ": its tokenizer cannot be read: " + tok.status().message());
  auto controls = chat_controls(*tok);
  if (!controls.ok())
    return invalid_argument(job.path + ": " + spec.model_dir + ": " + controls.status().message());

  const auto limit = model_max_context(spec.model_dir);
  for (const OpenAiRequest& req : requests) {
    ItemSpec item;
    item.id = req.custom_id;
    item.where = job.path + ":" + std::to_string(req.line);
    item.prompt_where = item.where;
    item.prompt_ids = render_chat(*tok, *controls, req.messages, req.chat).ids;
    item.params = req.params;
    if (!req.max_tokens_given) {
      // OpenAI: up to the model's context; here at most the job's default, which bounds the
      // state every sequence reserves. A prompt at the limit leaves 1 (check_job_fits_model
      // then names the item).
      int64_t n = job.default_max_tokens;
      if (limit)
        n = std::min<int64_t>(n, limit->first - static_cast<int64_t>(item.prompt_ids.size()));
      item.params.max_tokens = static_cast<int>(std::max<int64_t>(1, n));
    }
    if (!req.seed_given) item.params.sampling.seed = derived_seed(spec.name, req.custom_id);
    if (!req.accepted_fields.empty()) item.accepted_fields = req.accepted_fields;
    spec.items.push_back(std::move(item));
  }
  NJ_RETURN_IF_ERROR(check_spec_against_model(spec, *config, &*tok));
  NJ_RETURN_IF_ERROR(check_job_fits_model(spec));
  return spec;
}

}  // namespace nj::jobs
