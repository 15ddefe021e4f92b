// `nightjar generate` and `nightjar logits`: one-shot runs of the model. `generate` can save
// the sequence state after its last token (--save-state) and continue from such a state
// (--load-state), producing exactly the tokens an uninterrupted run would have.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "engine/io/env.h"
#include "engine/ops/cpu.h"
#include "engine/session/sampler.h"
#include "engine/session/session.h"
#include "engine/speculative/decode.h"
#include "engine/state/state_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "jobs/chat/chat_format.h"
#include "jobs/chat/chat_messages.h"
#include "jobs/chat/chat_reply.h"
#include "runner/generate/generate_batch.h"
#include "runner/generate/one_prompt.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/run/model_args.h"
#include "runner/cli/output.h"
#include "runner/item/clock.h"

namespace nj::runner {
namespace {

nlohmann::json run_info(const ForwardStats& fs) {
  return {{"simd", simd_level_name(active_simd_level())},
          {"threads", omp_get_max_threads()},
          {"compute_s", fs.compute_s},
          {"weight_wait_s", fs.wait_s},
          {"forward_passes", fs.passes},
          {"expert_computations", fs.expert_computations}};
}

struct SamplingFlags {
  CLI::Option* temperature = nullptr;
  CLI::Option* top_k = nullptr;
  CLI::Option* top_p = nullptr;
  CLI::Option* seed = nullptr;
};

// The sampler of a resumed generation. By default the checkpoint's settings and RNG state
// continue unchanged, and a sampling flag that disagrees with them is a usage error (a
// silent change would make the continuation differ from the uninterrupted run). With
// --override-sampling the given flags replace the saved settings; --seed then restarts
// the RNG from that seed, otherwise the saved RNG state continues.
Result<Sampler> resumed_sampler(const SamplerSnapshot& saved, const SamplingParams& given,
                                const SamplingFlags& f, bool override_sampling) {
  SamplingParams p = saved.params;
  struct Flag {
    CLI::Option* opt;
    bool differs;
    std::string saved_text;
  };
  const Flag flags[] = {
      {f.temperature, given.temperature != p.temperature, fmt::format("{}", p.temperature)},
      {f.top_k, given.top_k != p.top_k, fmt::format("{}", p.top_k)},
      {f.top_p, given.top_p != p.top_p, fmt::format("{}", p.top_p)},
      {f.seed, given.seed != p.seed, fmt::format("{}", p.seed)},
  };
  if (!override_sampling) {
    for (const Flag& fl : flags)
      if (fl.opt->count() > 0 && fl.differs)
        return invalid_argument(
            fl.opt->get_name() + " differs from the checkpoint's setting (" + fl.saved_text +
            "); pass --override-sampling to change sampling settings when resuming");
    Sampler s(p);
    s.set_rng(saved.rng);
    return s;
  }
  if (f.temperature->count()) p.temperature = given.temperature;
  if (f.top_k->count()) p.top_k = given.top_k;
  if (f.top_p->count()) p.top_p = given.top_p;
  if (f.seed->count()) p.seed = given.seed;
  NJ_RETURN_IF_ERROR(validate_sampling(p));
  Sampler s(p);
  s.set_rng(f.seed->count() ? RngState{given.seed} : saved.rng);
  return s;
}

// The flags of `generate` (defaults as --help states them).
struct GenerateArgs {
  ModelArgs model;
  std::string prompt_ids;
  int max_tokens = 16;
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  std::string output = "text";
  std::string save_routing;
  std::string prompt_text, prompt_file;
  std::string chat_file, effort;
  bool thinking = false;
  bool ignore_eos = false;
  std::string save_state, load_state;
  bool override_sampling = false;
  std::string prompts_file;
  int batch = 0;
  std::string speculative = "off";
  int draft_tokens = DraftLengthOptions{}.max_draft_tokens;
  std::string draft_ids;
  std::string kda_rollback = "replay";
};

// The steps of `generate`, in the order the command runs them. Each returns the exit code
// to end with, or kExitOk to go on.

// --speculative's flags agree with each other.
int check_speculation_flags(const GenerateArgs& a, const CLI::Option* draft_tokens,
                            const CLI::Option* kda_rollback) {
  const bool speculate = a.speculative != "off";
  if (!speculate && (draft_tokens->count() > 0 || !a.draft_ids.empty()))
    return report_usage_error("--draft-tokens", invalid_argument("only applies with --speculative"));
  if (!speculate && kda_rollback->count() > 0)
    return report_usage_error("--kda-rollback", invalid_argument("only applies with --speculative"));
  if ((a.speculative == "oracle") != !a.draft_ids.empty())
    return report_usage_error("--draft-ids", invalid_argument("--speculative oracle and --draft-ids go together"));
  return kExitOk;
}

// The model's tokenizer, when it has one: text prompts need it; it also decodes the output
// and knows the end-of-sequence token.
int load_tokenizer(const std::string& model_dir, std::optional<Tokenizer>& tokenizer) {
  if (Tokenizer::exists_in(model_dir)) {
    auto t = Tokenizer::load(model_dir);
    if (!t.ok()) return report_failure(t.status());
    tokenizer.emplace(std::move(t).value());
  }
  return kExitOk;
}

// `generate --prompts-file`: many prompts in one batch (runner/generate/generate_batch.h).
int run_prompts_file(const GenerateArgs& a) {
  const bool speculate = a.speculative != "off";
  if (a.speculative == "oracle")
    return report_usage_error("--speculative",
                              invalid_argument("oracle drafts are for one prompt; with --prompts-file "
                                               "use ngram"));
  const std::pair<bool, const char*> one_prompt_only[] = {
      {!a.prompt_ids.empty(), "--prompt-ids"},   {!a.prompt_text.empty(), "--prompt"},
      {!a.prompt_file.empty(), "--prompt-file"}, {!a.chat_file.empty(), "--chat-file"},
      {!a.load_state.empty(), "--load-state"},   {!a.save_state.empty(), "--save-state"},
      {!a.save_routing.empty(), "--save-routing-profile"},
      {a.override_sampling, "--override-sampling"}};
  for (const auto& [given, flag] : one_prompt_only)
    if (given)
      return report_conflict(flag, "--prompts-file",
                             "it is for one prompt; the file gives each prompt its own");
  BatchGenerateArgs b;
  b.model = a.model;
  b.prompts_file = a.prompts_file;
  b.batch = a.batch;
  b.max_tokens = a.max_tokens;
  b.sampling = SamplingParams{a.temperature, a.top_k, a.top_p, a.seed};
  if (Status s = validate_sampling(b.sampling); !s.ok()) return report_usage_error("sampling", s);
  b.ignore_eos = a.ignore_eos;
  b.output = a.output;
  b.draft_tokens = speculate ? a.draft_tokens : 0;
  b.kda_rollback = a.kda_rollback == "snapshots" ? KdaRollback::kSnapshots : KdaRollback::kReplay;
  auto config = load_model_config(a.model.model);
  if (!config.ok()) return report_failure(config.status());
  b.vocab = config->vocab;
  std::optional<Tokenizer> tokenizer;
  if (int code = load_tokenizer(a.model.model, tokenizer); code != kExitOk) return code;
  auto g = generate_batch(b, tokenizer);
  if (!g.ok()) return report_failure(g.status());
  if (b.output == "json") {
    print_json(batch_generation_json(b, tokenizer, *g));
  } else {
    const std::string text = batch_generation_text(tokenizer, *g);
    std::fwrite(text.data(), 1, text.size(), stdout);
    spdlog::info("{} sequences, batch {}: {} tokens in {} passes, {:.3f} s", g->requests.size(), g->batch,
                 g->generated, g->passes, g->run_s);
  }
  if (b.model.stats) std::fprintf(stderr, "stats: %s\n", stats_text(g->stats).c_str());
  return kExitOk;
}

// The one prompt's flags agree: one source of the prompt, or --load-state.
int check_prompt_flags(const GenerateArgs& a) {
  if (a.batch > 0) return report_usage_error("--batch", invalid_argument("only applies with --prompts-file"));
  const bool resume = !a.load_state.empty();
  const int prompt_sources = !a.prompt_ids.empty() + !a.prompt_text.empty() +
                             !a.prompt_file.empty() + !a.chat_file.empty();
  if (prompt_sources > 1)
    return report_usage_error(
        "--prompt-ids",
        invalid_argument("give one of --prompt-ids, --prompt, --prompt-file, --chat-file"));
  if (resume && prompt_sources > 0)
    return report_usage_error("--prompt-ids",
                              invalid_argument("cannot be combined with --load-state (the saved "
                                               "state already holds the sequence)"));
  if (!resume && prompt_sources == 0)
    return report_usage_error("--prompt-ids",
                              invalid_argument("required (or --prompt TEXT, --prompt-file FILE, or --load-state "
                                               "FILE to continue a saved sequence)"));
  return kExitOk;
}

// The prompt's tokens, and for a chat the reply's reader's controls and options.
struct GeneratePrompt {
  std::vector<int32_t> ids;
  std::optional<jobs::ChatControls> controls;
  jobs::ChatReplyOptions reply_options;
};

int read_prompt(const GenerateArgs& a, const std::optional<Tokenizer>& tokenizer, GeneratePrompt& prompt) {
  const bool resume = !a.load_state.empty();
  if (!a.chat_file.empty()) {
    if (!tokenizer)
      return report_failure(not_found(a.model.model +
                                      ": the model has no tokenizer (tiktoken.model); "
                                      "a chat needs one"));
    auto c = jobs::chat_controls(*tokenizer);
    if (!c.ok()) return report_failure(c.status().with_context(a.model.model));
    prompt.controls = *c;
    jobs::ChatOptions options;
    options.thinking = prompt.reply_options.thinking = a.thinking;
    if (!a.effort.empty()) options.effort = *jobs::parse_thinking_effort(a.effort);
    auto rendered = jobs::render_chat_file(*tokenizer, a.chat_file, options);
    if (!rendered.ok()) return report_failure(rendered.status());
    prompt.ids = std::move(rendered->ids);
  } else if (!a.prompt_ids.empty()) {
    auto parsed = parse_id_list(a.prompt_ids);
    if (!parsed.ok()) return report_usage_error("--prompt-ids", parsed.status());
    prompt.ids = std::move(*parsed);
  } else if (!resume) {
    if (!tokenizer)
      return report_failure(not_found(a.model.model + ": the model has no tokenizer (tiktoken.model); "
                                      "give the prompt as --prompt-ids"));
    std::string text = a.prompt_text;
    if (!a.prompt_file.empty()) {
      auto read = read_text_input(a.prompt_file);
      if (!read.ok()) return report_failure(read.status());
      text = std::move(*read);
    }
    prompt.ids = tokenizer->encode(text);
    if (prompt.ids.empty()) return report_usage_error("--prompt", invalid_argument("the prompt is empty"));
  }
  return kExitOk;
}

// --save-state: the sequence state and sampler after the last token, as `saved_state` in
// the JSON output.
int save_generation_state(const std::string& path, const Model& model, const Session& session,
                          const Sampler& sampler, nlohmann::json& saved) {
  auto t_save = Clock::now();
  StateFileWriter writer(*Env::posix(), path);
  if (Status s = writer.save(model, session.state(), {sampler.params(), sampler.rng()}); !s.ok())
    return report_failure(s);
  const StateSaveStats& st = writer.last_save();
  saved = {{"path", path},
           {"position", session.position()},
           {"head_bytes", st.head_bytes},
           {"segment_bytes", st.segment_total_bytes},
           {"save_s", seconds_since(t_save)}};
  return kExitOk;
}

// What one prompt's run did, as the output reports it.
struct GenerateRun {
  const GenerateArgs& args;
  const std::optional<Tokenizer>& tokenizer;
  const std::vector<int32_t>& prompt;
  const DecodedTokens& decoded;
  int32_t eos = -1;
  const jobs::ChatReplyReader* reply = nullptr;
  std::optional<int64_t> resumed_from;  // --load-state's position
  const nlohmann::json& saved;          // --save-state's, or null
  const SpeculationStats* speculation = nullptr;
  int planned_drafts = 0;
  double load_s = 0, prefill_s = 0;
  Model& model;
  const Session& session;
};

void print_generate_json(const GenerateRun& g) {
  const std::vector<int32_t>& out = g.decoded.out;
  nlohmann::json j;
  j["output_ids"] = out;
  if (g.tokenizer) j["output_text"] = g.tokenizer->decode(out);
  j["stopped_at_eos"] = !out.empty() && out.back() == g.eos;
  if (g.reply) {
    const jobs::ChatReply r = g.reply->reply();
    j["content"] = r.content ? nlohmann::json(*r.content) : nlohmann::json(nullptr);
    if (r.reasoning) j["reasoning_content"] = *r.reasoning;
    j["finish_reason"] = g.reply->ended() ? "stop" : "length";
  }
  j["prompt_tokens"] = g.prompt.size();
  j["generated_tokens"] = out.size();
  if (g.resumed_from) j["resumed_from_position"] = *g.resumed_from;
  if (!g.args.save_state.empty()) j["saved_state"] = g.saved;
  if (g.speculation) {
    const SpeculationStats& st = *g.speculation;
    j["speculation"] = {{"max_draft_tokens", g.planned_drafts},
                        {"passes", st.passes},
                        {"drafted", st.drafted},
                        {"accepted", st.accepted},
                        {"tokens_per_pass", st.tokens_per_pass()}};
  }
  const double decode_s = g.decoded.decode_s, decoded = g.decoded.decoded;
  j["timings"] = {{"load_s", g.load_s}, {"prefill_s", g.prefill_s}, {"decode_s", decode_s},
                  {"decode_tokens_per_s", decoded > 0 ? decoded / decode_s : 0.0}};
  j["run"] = run_info(g.session.stats());
  j["stats"] = stats_json(g.model, g.session.stats());
  print_json(j);
}

void print_generate_text(const GenerateRun& g) {
  const std::vector<int32_t>& out = g.decoded.out;
  if (g.reply) {
    // The reply's channels, never its envelope: the reasoning first (with --thinking),
    // then the answer ("(none)" when the reply never reached it).
    const jobs::ChatReply r = g.reply->reply();
    if (r.reasoning) {
      std::printf("[reasoning]\n");
      std::fwrite(r.reasoning->data(), 1, r.reasoning->size(), stdout);
      std::printf("\n[answer]\n");
    }
    const std::string text = r.content.value_or(r.reasoning ? "(none)" : "");
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else if (g.tokenizer) {
    const std::string text = g.tokenizer->decode(out);
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? " " : "", out[i]);
  }
  std::printf("\n");
  spdlog::info("prefill {} tokens in {:.3f} s; {} decode steps in {:.3f} s", g.prompt.size(),
               g.prefill_s, g.decoded.decode_steps, g.decoded.decode_s);
  if (!g.args.save_state.empty())
    spdlog::info("state at position {} saved to {}", g.session.position(), g.args.save_state);
  if (g.speculation)
    spdlog::info("speculation: {} passes, {} drafted, {} accepted ({:.2f} tokens per pass)", g.speculation->passes,
                 g.speculation->drafted, g.speculation->accepted, g.speculation->tokens_per_pass());
}

// `generate` for one prompt, or continuing a saved state.
int run_one_prompt(const GenerateArgs& a, const SamplingFlags& flags) {
  if (int code = check_prompt_flags(a); code != kExitOk) return code;
  const bool speculate = a.speculative != "off";
  const bool resume = !a.load_state.empty();
  std::optional<Tokenizer> tokenizer;
  if (int code = load_tokenizer(a.model.model, tokenizer); code != kExitOk) return code;
  if (!resume && a.override_sampling)
    return report_usage_error("--override-sampling",
                              invalid_argument("only applies with --load-state"));
  std::vector<int32_t> oracle;
  if (!a.draft_ids.empty()) {
    auto parsed = parse_id_list(a.draft_ids);
    if (!parsed.ok()) return report_usage_error("--draft-ids", parsed.status());
    oracle = std::move(*parsed);
  }
  GeneratePrompt p;
  if (int code = read_prompt(a, tokenizer, p); code != kExitOk) return code;
  const std::vector<int32_t>& prompt = p.ids;
  SamplingParams sp{a.temperature, a.top_k, a.top_p, a.seed};
  if (Status s = validate_sampling(sp); !s.ok()) return report_usage_error("sampling", s);
  // A missing or damaged checkpoint fails before the (possibly huge) model is opened.
  StateFileInfo resume_info;
  if (resume) {
    auto info = read_state_file_info(*Env::posix(), a.load_state);
    if (!info.ok()) return report_failure(info.status());
    resume_info = *info;
  }
  auto t_load = Clock::now();
  // The run's context: the saved positions when resuming, the prompt, and every generated
  // token (with --save-state the last one is fed too).
  const int prompt_len = static_cast<int>(prompt.size());
  const int64_t context = resume_info.position + prompt_len + a.max_tokens;
  if (context > INT32_MAX)
    return report_usage_error("--max-tokens", invalid_argument("the context would exceed " +
                                                               std::to_string(INT32_MAX)));
  RunShape shape{static_cast<int>(context), prompt_len, false};
  shape.draft_tokens = speculate ? a.draft_tokens : 0;
  shape.kda_rollback = a.kda_rollback == "snapshots" ? KdaRollback::kSnapshots : KdaRollback::kReplay;
  auto model = open_model(a.model, shape);
  if (!model.ok()) return report_failure(model.status());
  SessionOptions so;
  so.prefill_chunk = a.model.prefill_chunk;
  so.record_routing = !a.save_routing.empty();
  // The drafts the budget holds beside plain decoding's plan (planner.h, step 4): never
  // more than asked for, possibly none (every pass is then a plain step).
  const int planned_drafts = speculate ? (*model)->plan().draft_tokens : 0;
  if (speculate && planned_drafts < a.draft_tokens)
    spdlog::warn("--speculative: the budget leaves room for {} drafted tokens per pass (asked for {}); "
                 "drafts never take memory from the weights",
                 planned_drafts, a.draft_tokens);
  so.tentative_rows = speculate ? 1 + planned_drafts : 0;
  so.kda_rollback = a.kda_rollback == "snapshots" ? KdaRollback::kSnapshots : KdaRollback::kReplay;
  Session session(**model, so);
  Sampler sampler(sp);
  if (resume) {
    auto cp = load_state_file(*Env::posix(), a.load_state, **model);
    if (!cp.ok()) return report_failure(cp.status());
    auto resumed = resumed_sampler(cp->sampler, sp, flags, a.override_sampling);
    if (!resumed.ok()) return report_usage_error("sampling", resumed.status());
    sampler = *resumed;
    resume_info.position = cp->state.position;  // (the file might have been replaced since)
    session.set_state(std::move(cp->state));
  }
  const double load_s = seconds_since(t_load);

  auto t_prefill = Clock::now();
  if (Status s = session.feed(prompt); !s.ok()) return report_failure(s);
  const double prefill_s = seconds_since(t_prefill);
  // The state is saved after the last token has been fed, so that the continuation
  // samples its first token from the logits that follow it.
  const bool save = !a.save_state.empty();
  const int32_t eos = tokenizer && !a.ignore_eos ? tokenizer->eos_id() : -1;
  std::optional<SpeculativeDecoder<Session>> spec;
  if (speculate) start_speculation(spec, session, **model, a.speculative, planned_drafts, oracle);
  std::optional<jobs::ChatReplyReader> reply;
  if (p.controls) reply.emplace(*tokenizer, *p.controls, p.reply_options);
  auto decoded = decode_prompt(session, sampler, spec ? &*spec : nullptr, reply ? &*reply : nullptr, eos,
                               a.max_tokens, save);
  if (!decoded.ok()) return report_failure(decoded.status());
  nlohmann::json saved;
  if (save)
    if (int code = save_generation_state(a.save_state, **model, session, sampler, saved); code != kExitOk)
      return code;
  const GenerateRun run{a,         tokenizer,      prompt,
                        *decoded,  eos,            reply ? &*reply : nullptr,
                        resume ? std::optional<int64_t>(resume_info.position) : std::nullopt,
                        saved,     spec ? &spec->stats() : nullptr,
                        planned_drafts, load_s,    prefill_s,
                        **model,   session};
  if (a.output == "json")
    print_generate_json(run);
  else
    print_generate_text(run);
  if (a.model.stats) std::fprintf(stderr, "stats: %s\n", stats_text(stats_json(**model, session.stats())).c_str());
  if (!a.save_routing.empty()) {
    std::ofstream f(a.save_routing, std::ios::trunc);
    f << session.routing_profile().to_json((*model)->fingerprint());
    if (!f) return report_failure(io_error(a.save_routing + ": cannot write the routing profile"));
  }
  return kExitOk;
}

// The flags of `generate`; returns the subcommand, and in `draft_tokens` --draft-tokens's
// option (whether it was given matters).
CLI::App* add_generate_options(CLI::App& app, GenerateArgs* a, SamplingFlags* flags,
                               CLI::Option*& draft_tokens, CLI::Option*& kda_rollback) {
  CLI::App* sub =
      app.add_subcommand("generate", "Generate tokens after a prompt, or continue a saved state");
  add_model_options(*sub, a->model);
  sub->add_option("--prompt-ids", a->prompt_ids,
                  "Prompt as token ids, e.g. 3,7,11 (or --prompt / --prompt-file, or --load-state)");
  sub->add_option("--prompt", a->prompt_text, "Prompt as text (needs the model's tokenizer)");
  sub->add_option("--prompt-file", a->prompt_file, "Prompt as the text of a file (- for stdin)");
  CLI::Option* chat_opt = sub->add_option(
      "--chat-file", a->chat_file,
      "Prompt as a conversation ({\"messages\": [...]}, as in an OpenAI chat request) in K3's "
      "chat format; the output is read as the assistant's reply (answer, and reasoning with "
      "--thinking)");
  CLI::Option* thinking_opt = sub->add_flag(
      "--thinking", a->thinking,
      "With --chat-file: thinking on (the reply opens in the think channel; costs many tokens)");
  sub->add_option("--thinking-effort", a->effort,
                  "With --thinking: low, medium, high or max (default max, the release's)")
      ->check(CLI::IsMember({"low", "medium", "high", "max"}))
      ->needs(thinking_opt);
  thinking_opt->needs(chat_opt);
  sub->add_flag("--ignore-eos", a->ignore_eos,
                "Keep generating after the end-of-sequence token (by default generation stops there when the "
                "model has a tokenizer)");
  sub->add_option("--max-tokens", a->max_tokens, "Tokens to generate (default 16)")->check(CLI::NonNegativeNumber);
  flags->temperature = sub->add_option("--temperature", a->temperature, "0 = greedy (default)");
  flags->top_k =
      sub->add_option("--top-k", a->top_k, "Sample among the k most likely tokens (0 = all)");
  flags->top_p = sub->add_option("--top-p", a->top_p, "Nucleus sampling mass (default 1 = off)");
  flags->seed = sub->add_option("--seed", a->seed, "RNG seed for sampling (default 0)")
                    ->check(CLI::NonNegativeNumber);  // else CLI11 reads -1 as 2^64 - 1
  sub->add_option("--save-routing-profile", a->save_routing,
                  "Write which experts decoding used, for `plan --routing-profile` (predicts the expert cache)");
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--save-state", a->save_state,
                  "After the last token, feed it and save the sequence state and sampler to FILE "
                  "(plus FILE.seg-*; costs one more forward pass)");
  sub->add_option(
      "--load-state", a->load_state,
      "Continue the sequence saved in FILE instead of reading a prompt; output_ids holds only the "
      "new tokens. Sampling settings come from FILE; a flag that differs is an error unless "
      "--override-sampling");
  sub->add_flag(
      "--override-sampling", a->override_sampling,
      "With --load-state: use the given sampling flags instead of the saved ones (--seed restarts "
      "the RNG; without it the saved RNG state continues)");
  sub->add_option("--prompts-file", a->prompts_file,
                  "Many prompts, one JSON object per line ({\"id\", \"prompt_ids\"} or {\"id\", \"prompt\"}, "
                  "optionally max_tokens, temperature, seed), decoded together; each gets what it would alone");
  sub->add_option("--batch", a->batch,
                  "With --prompts-file: sequences per pass over the weights (default: all the budget holds)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--speculative", a->speculative,
                  "Speculative decoding: off (default); ngram (drafts from the prompt and output so far, "
                  "verified exactly: the tokens never change); oracle (drafts given by --draft-ids, for "
                  "benchmarks)")
      ->check(CLI::IsMember({"off", "ngram", "oracle"}));
  draft_tokens = sub->add_option("--draft-tokens", a->draft_tokens,
                  "With --speculative: the most drafted tokens per pass (default 8; fewer are drafted "
                  "while drafts are rarely accepted)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--draft-ids", a->draft_ids,
                  "With --speculative oracle: the drafts, as the output_ids of a previous run of the same "
                  "prompt (or anything else: drafts never change the output)");
  kda_rollback = sub->add_option("--kda-rollback", a->kda_rollback,
                  "With --speculative: how KDA layers undo rejected drafts, replay (default: recompute the "
                  "kept rows, small) or snapshots (copy the state after every row); never changes a token")
      ->check(CLI::IsMember({"replay", "snapshots"}));  return sub;
}

}  // namespace

void add_generate_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  auto a = std::make_shared<GenerateArgs>();
  auto flags = std::make_shared<SamplingFlags>();
  CLI::Option* draft_tokens = nullptr;
  CLI::Option* kda_rollback = nullptr;
  CLI::App* sub = add_generate_options(app, a.get(), flags.get(), draft_tokens, kda_rollback);
  table.emplace_back(sub, [a, flags, draft_tokens, kda_rollback]() -> int {
    if (int code = check_speculation_flags(*a, draft_tokens, kda_rollback); code != kExitOk)
      return code;
    if (!a->prompts_file.empty()) return run_prompts_file(*a);
    return run_one_prompt(*a, *flags);
  });
}

void add_logits_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
    ModelArgs model;
    std::string prompt_ids;
    std::string output = "text";
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("logits", "Teacher-forced pass: argmax at every position, last logits");
  add_model_options(*sub, a->model);
  sub->add_option("--prompt-ids", a->prompt_ids, "Token ids, e.g. 3,7,11")->required();
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    auto prompt = parse_id_list(a->prompt_ids);
    if (!prompt.ok()) return report_usage_error("--prompt-ids", prompt.status());
    const int n = static_cast<int>(prompt->size());
    auto model = open_model(a->model, RunShape{n, n, /*all_logits=*/true});
    if (!model.ok()) return report_failure(model.status());
    Session session(**model, SessionOptions{a->model.prefill_chunk});
    std::vector<float> all;
    if (Status s = session.feed(*prompt, &all); !s.ok()) return report_failure(s);
    const size_t vocab = static_cast<size_t>((*model)->config().vocab);
    std::vector<int32_t> am;
    for (size_t t = 0; t < prompt->size(); ++t)
      am.push_back(argmax(std::span<const float>(all.data() + t * vocab, vocab)));
    if (a->output == "json") {
      nlohmann::json j;
      j["argmax"] = am;
      j["last_logits"] = session.last_logits();
      j["run"] = run_info(session.stats());
      j["stats"] = stats_json(**model, session.stats());
      print_json(j);
    } else {
      for (size_t i = 0; i < am.size(); ++i) std::printf("%s%d", i ? " " : "", am[i]);
      std::printf("\n");
    }
    if (a->model.stats) std::fprintf(stderr, "stats: %s\n", stats_text(stats_json(**model, session.stats())).c_str());
    return kExitOk;
  });
}

}  // namespace nj::runner
