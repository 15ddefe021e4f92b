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
#include "runner/cli/cmd_generate_batch.h"
#include "runner/cli/commands.h"
#include "runner/cli/exit_codes.h"
#include "runner/cli/model_args.h"
#include "runner/cli/output.h"
#include "runner/run/clock.h"

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

}  // namespace

void add_generate_command(CLI::App& app, const GlobalOptions&, CommandTable& table) {
  struct Args {
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
  auto a = std::make_shared<Args>();
  auto flags = std::make_shared<SamplingFlags>();
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
  flags->seed = sub->add_option("--seed", a->seed, "RNG seed for sampling (default 0)");
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
  CLI::Option* draft_tokens = sub->add_option("--draft-tokens", a->draft_tokens,
                  "With --speculative: the most drafted tokens per pass (default 8; fewer are drafted "
                  "while drafts are rarely accepted)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--draft-ids", a->draft_ids,
                  "With --speculative oracle: the drafts, as the output_ids of a previous run of the same "
                  "prompt (or anything else: drafts never change the output)");
  sub->add_option("--kda-rollback", a->kda_rollback,
                  "With --speculative: how KDA layers undo rejected drafts, replay (default: recompute the "
                  "kept rows, small) or snapshots (copy the state after every row); never changes a token")
      ->check(CLI::IsMember({"replay", "snapshots"}));
  table.emplace_back(sub, [a, flags, draft_tokens]() -> int {
    const bool speculate = a->speculative != "off";
    if (!speculate && (draft_tokens->count() > 0 || !a->draft_ids.empty()))
      return report_usage_error("--draft-tokens", invalid_argument("only applies with --speculative"));
    if ((a->speculative == "oracle") != !a->draft_ids.empty())
      return report_usage_error("--draft-ids", invalid_argument("--speculative oracle and --draft-ids go together"));
    if (!a->prompts_file.empty()) {
      if (a->speculative == "oracle")
        return report_usage_error("--speculative",
                                  invalid_argument("oracle drafts are for one prompt; with --prompts-file "
                                                   "use ngram"));
      if (!a->prompt_ids.empty() || !a->prompt_text.empty() || !a->prompt_file.empty() || !a->chat_file.empty() ||
          !a->load_state.empty() ||
          !a->save_state.empty() || !a->save_routing.empty())
        return report_usage_error("--prompts-file",
                                  invalid_argument("cannot be combined with --prompt-ids, --prompt, --prompt-file, --chat-file, "
                                                   "--load-state, --save-state or --save-routing-profile"));
      BatchGenerateArgs b;
      b.model = a->model;
      b.prompts_file = a->prompts_file;
      b.batch = a->batch;
      b.max_tokens = a->max_tokens;
      b.sampling = SamplingParams{a->temperature, a->top_k, a->top_p, a->seed};
      if (Status s = validate_sampling(b.sampling); !s.ok()) return report_usage_error("sampling", s);
      b.ignore_eos = a->ignore_eos;
      b.output = a->output;
      b.draft_tokens = speculate ? a->draft_tokens : 0;
      b.kda_rollback = a->kda_rollback == "snapshots" ? KdaRollback::kSnapshots : KdaRollback::kReplay;
      auto config = load_model_config(a->model.model);
      if (!config.ok()) return report_failure(config.status());
      b.vocab = config->vocab;
      std::optional<Tokenizer> tokenizer;
      if (Tokenizer::exists_in(a->model.model)) {
        auto t = Tokenizer::load(a->model.model);
        if (!t.ok()) return report_failure(t.status());
        tokenizer.emplace(std::move(t).value());
      }
      return run_generate_batch(b, tokenizer);
    }
    if (a->batch > 0) return report_usage_error("--batch", invalid_argument("only applies with --prompts-file"));
    const bool resume = !a->load_state.empty();
    const int prompt_sources = !a->prompt_ids.empty() + !a->prompt_text.empty() +
                               !a->prompt_file.empty() + !a->chat_file.empty();
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
    // The tokenizer, when the model has one: text prompts need it; it also decodes the
    // output and knows the end-of-sequence token.
    std::optional<Tokenizer> tokenizer;
    if (Tokenizer::exists_in(a->model.model)) {
      auto t = Tokenizer::load(a->model.model);
      if (!t.ok()) return report_failure(t.status());
      tokenizer.emplace(std::move(t).value());
    }
    if (!resume && a->override_sampling)
      return report_usage_error("--override-sampling",
                                invalid_argument("only applies with --load-state"));
    std::vector<int32_t> oracle;
    if (!a->draft_ids.empty()) {
      auto parsed = parse_id_list(a->draft_ids);
      if (!parsed.ok()) return report_usage_error("--draft-ids", parsed.status());
      oracle = std::move(*parsed);
    }
    std::vector<int32_t> prompt;
    // A chat: the reply's reader and the controls it needs.
    std::optional<jobs::ChatControls> controls;
    jobs::ChatReplyOptions reply_options;
    if (!a->chat_file.empty()) {
      if (!tokenizer)
        return report_failure(not_found(a->model.model +
                                        ": the model has no tokenizer (tiktoken.model); "
                                        "a chat needs one"));
      auto c = jobs::chat_controls(*tokenizer);
      if (!c.ok()) return report_failure(c.status().with_context(a->model.model));
      controls = *c;
      jobs::ChatOptions options;
      options.thinking = reply_options.thinking = a->thinking;
      if (!a->effort.empty()) options.effort = *jobs::parse_thinking_effort(a->effort);
      auto rendered = jobs::render_chat_file(*tokenizer, a->chat_file, options);
      if (!rendered.ok()) return report_failure(rendered.status());
      prompt = std::move(rendered->ids);
    } else if (!a->prompt_ids.empty()) {
      auto parsed = parse_id_list(a->prompt_ids);
      if (!parsed.ok()) return report_usage_error("--prompt-ids", parsed.status());
      prompt = std::move(*parsed);
    } else if (!resume) {
      if (!tokenizer)
        return report_failure(not_found(a->model.model + ": the model has no tokenizer (tiktoken.model); "
                                        "give the prompt as --prompt-ids"));
      std::string text = a->prompt_text;
      if (!a->prompt_file.empty()) {
        auto read = read_text_input(a->prompt_file);
        if (!read.ok()) return report_failure(read.status());
        text = std::move(*read);
      }
      prompt = tokenizer->encode(text);
      if (prompt.empty()) return report_usage_error("--prompt", invalid_argument("the prompt is empty"));
    }
    SamplingParams sp{a->temperature, a->top_k, a->top_p, a->seed};
    if (Status s = validate_sampling(sp); !s.ok()) return report_usage_error("sampling", s);
    // A missing or damaged checkpoint fails before the (possibly huge) model is opened.
    StateFileInfo resume_info;
    if (resume) {
      auto info = read_state_file_info(*Env::posix(), a->load_state);
      if (!info.ok()) return report_failure(info.status());
      resume_info = *info;
    }
    auto t_load = Clock::now();
    // The run's context: the saved positions when resuming, the prompt, and every generated
    // token (with --save-state the last one is fed too).
    const int prompt_len = static_cast<int>(prompt.size());
    const int64_t context = resume_info.position + prompt_len + a->max_tokens;
    if (context > INT32_MAX)
      return report_usage_error("--max-tokens", invalid_argument("the context would exceed " +
                                                                 std::to_string(INT32_MAX)));
    RunShape shape{static_cast<int>(context), prompt_len, false};
    shape.draft_tokens = speculate ? a->draft_tokens : 0;
    shape.kda_rollback = a->kda_rollback == "snapshots" ? KdaRollback::kSnapshots : KdaRollback::kReplay;
    auto model = open_model(a->model, shape);
    if (!model.ok()) return report_failure(model.status());
    SessionOptions so;
    so.prefill_chunk = a->model.prefill_chunk;
    so.record_routing = !a->save_routing.empty();
    // The drafts the budget holds beside plain decoding's plan (planner.h, step 4): never
    // more than asked for, possibly none (every pass is then a plain step).
    const int planned_drafts = speculate ? (*model)->plan().draft_tokens : 0;
    if (speculate && planned_drafts < a->draft_tokens)
      spdlog::warn("--speculative: the budget leaves room for {} drafted tokens per pass (asked for {}); "
                   "drafts never take memory from the weights",
                   planned_drafts, a->draft_tokens);
    so.tentative_rows = speculate ? 1 + planned_drafts : 0;
    so.kda_rollback = a->kda_rollback == "snapshots" ? KdaRollback::kSnapshots : KdaRollback::kReplay;
    Session session(**model, so);
    Sampler sampler(sp);
    if (resume) {
      auto cp = load_state_file(*Env::posix(), a->load_state, **model);
      if (!cp.ok()) return report_failure(cp.status());
      auto resumed = resumed_sampler(cp->sampler, sp, *flags, a->override_sampling);
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
    const bool save = !a->save_state.empty();
    std::vector<int32_t> out;
    int decode_steps = 0;
    auto t_decode = Clock::now();
    const int32_t eos = tokenizer && !a->ignore_eos ? tokenizer->eos_id() : -1;
    // With speculation a pass also feeds drafts; verification emits exactly the tokens this
    // loop would (engine/spec/verify.h), so the loop, its RNG and its last state are the same.
    std::optional<SpeculativeDecoder<Session>> spec;
    if (speculate) {
      DraftLengthOptions dl;
      dl.max_draft_tokens = planned_drafts;
      std::unique_ptr<Drafter> drafter;
      if (a->speculative == "oracle")
        drafter = std::make_unique<ScriptedDrafter>(static_cast<size_t>(session.position()), oracle);
      else
        drafter = std::make_unique<NgramDrafter>();
      spec.emplace(session, Speculator(std::move(drafter), dl), pass_cost((*model)->layout(), (*model)->plan()));
    }
    std::optional<jobs::ChatReplyReader> reply;
    if (controls) reply.emplace(*tokenizer, *controls, reply_options);
    // Called once for every emitted token, in order (the chat reader follows the reply).
    const int max_tokens = a->max_tokens;
    auto finishes = [&](int32_t id) {
      const bool ended = reply ? reply->push(id) : id == eos;
      return ended || static_cast<int>(out.size()) == max_tokens;
    };
    while (static_cast<int>(out.size()) < max_tokens) {
      const int32_t id = sampler.sample(session.last_logits());
      out.push_back(id);
      const bool last = finishes(id);
      if (last && !save) break;  // the last token needs no forward pass
      const int32_t one[1] = {id};
      if (last || !spec) {
        if (Status s = session.feed(one); !s.ok()) return report_failure(s);
        ++decode_steps;
        if (last) break;
        continue;
      }
      // Drafts stop one short of max_tokens: the last token is sampled, never fed.
      auto accepted = spec->feed(sampler, id, max_tokens - static_cast<int>(out.size()) - 1, finishes, &out);
      if (!accepted.ok()) return report_failure(accepted.status());
      ++decode_steps;
      if (accepted->finished) {  // a draft ended the generation: plain decoding stops there too
        if (save) {
          const int32_t eos_one[1] = {out.back()};
          if (Status s = session.feed(eos_one); !s.ok()) return report_failure(s);
          ++decode_steps;
        }
        break;
      }
    }
    const double decode_s = seconds_since(t_decode);
    // Tokens whose logits decoding computed (a pass may compute several with speculation).
    const double decoded = static_cast<double>(out.size()) - (save || out.empty() ? 0 : 1);
    nlohmann::json saved;
    if (save) {
      auto t_save = Clock::now();
      StateFileWriter writer(*Env::posix(), a->save_state);
      if (Status s = writer.save(**model, session.state(), {sampler.params(), sampler.rng()});
          !s.ok())
        return report_failure(s);
      const StateSaveStats& st = writer.last_save();
      saved = {{"path", a->save_state},
               {"position", session.position()},
               {"head_bytes", st.head_bytes},
               {"segment_bytes", st.segment_total_bytes},
               {"save_s", seconds_since(t_save)}};
    }
    if (a->output == "json") {
      nlohmann::json j;
      j["output_ids"] = out;
      if (tokenizer) j["output_text"] = tokenizer->decode(out);
      j["stopped_at_eos"] = !out.empty() && out.back() == eos;
      if (reply) {
        const jobs::ChatReply r = reply->reply();
        j["content"] = r.content ? nlohmann::json(*r.content) : nlohmann::json(nullptr);
        if (r.reasoning) j["reasoning_content"] = *r.reasoning;
        j["finish_reason"] = reply->ended() ? "stop" : "length";
      }
      j["prompt_tokens"] = prompt.size();
      j["generated_tokens"] = out.size();
      if (resume) j["resumed_from_position"] = resume_info.position;
      if (save) j["saved_state"] = saved;
      if (spec) {
        const SpeculationStats& st = spec->stats();
        j["speculation"] = {{"max_draft_tokens", planned_drafts},
                            {"passes", st.passes},
                            {"drafted", st.drafted},
                            {"accepted", st.accepted},
                            {"tokens_per_pass", st.tokens_per_pass()}};
      }
      j["timings"] = {{"load_s", load_s}, {"prefill_s", prefill_s}, {"decode_s", decode_s},
                      {"decode_tokens_per_s", decoded > 0 ? decoded / decode_s : 0.0}};
      j["run"] = run_info(session.stats());
      j["stats"] = stats_json(**model, session.stats());
      print_json(j);
    } else {
      if (reply) {
        // The reply's channels, never its envelope: the reasoning first (with --thinking),
        // then the answer ("(none)" when the reply never reached it).
        const jobs::ChatReply r = reply->reply();
        if (r.reasoning) {
          std::printf("[reasoning]\n");
          std::fwrite(r.reasoning->data(), 1, r.reasoning->size(), stdout);
          std::printf("\n[answer]\n");
        }
        const std::string text = r.content.value_or(r.reasoning ? "(none)" : "");
        std::fwrite(text.data(), 1, text.size(), stdout);
      } else if (tokenizer) {
        const std::string text = tokenizer->decode(out);
        std::fwrite(text.data(), 1, text.size(), stdout);
      } else {
        for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? " " : "", out[i]);
      }
      std::printf("\n");
      spdlog::info("prefill {} tokens in {:.3f} s; {} decode steps in {:.3f} s", prompt.size(),
                   prefill_s, decode_steps, decode_s);
      if (save) spdlog::info("state at position {} saved to {}", session.position(), a->save_state);
      if (spec)
        spdlog::info("speculation: {} passes, {} drafted, {} accepted ({:.2f} tokens per pass)", spec->stats().passes,
                     spec->stats().drafted, spec->stats().accepted, spec->stats().tokens_per_pass());
    }
    if (a->model.stats) std::fprintf(stderr, "stats: %s\n", stats_text(stats_json(**model, session.stats())).c_str());
    if (!a->save_routing.empty()) {
      std::ofstream f(a->save_routing, std::ios::trunc);
      f << session.routing_profile().to_json((*model)->fingerprint());
      if (!f) return report_failure(io_error(a->save_routing + ": cannot write the routing profile"));
    }
    return kExitOk;
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
