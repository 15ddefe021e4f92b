// `nightjar generate` and `nightjar logits`: one-shot runs of the model.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <spdlog/spdlog.h>

#include "engine/model/sampler.h"
#include "engine/model/session.h"
#include "engine/ops/cpu.h"
#include "runner/commands.h"
#include "runner/exit_codes.h"
#include "runner/model_args.h"
#include "runner/output.h"

namespace nj::runner {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

nlohmann::json run_info(const ForwardStats& fs) {
  return {{"simd", simd_level_name(active_simd_level())},
          {"threads", omp_get_max_threads()},
          {"compute_s", fs.compute_s},
          {"weight_wait_s", fs.wait_s},
          {"forward_passes", fs.passes},
          {"expert_computations", fs.expert_computations}};
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
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("generate", "Generate tokens after a prompt");
  add_model_options(*sub, a->model);
  sub->add_option("--prompt-ids", a->prompt_ids, "Prompt as token ids, e.g. 3,7,11")->required();
  sub->add_option("--max-tokens", a->max_tokens, "Tokens to generate (default 16)")->check(CLI::NonNegativeNumber);
  sub->add_option("--temperature", a->temperature, "0 = greedy (default)");
  sub->add_option("--top-k", a->top_k, "Sample among the k most likely tokens (0 = all)");
  sub->add_option("--top-p", a->top_p, "Nucleus sampling mass (default 1 = off)");
  sub->add_option("--seed", a->seed, "RNG seed for sampling (default 0)");
  sub->add_option("--save-routing-profile", a->save_routing,
                  "Write which experts decoding used, for `plan --routing-profile` (predicts the expert cache)");
  sub->add_option("--output", a->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  table.emplace_back(sub, [a]() -> int {
    auto prompt = parse_id_list(a->prompt_ids);
    if (!prompt.ok()) return report_usage_error("--prompt-ids", prompt.status());
    SamplingParams sp{a->temperature, a->top_k, a->top_p, a->seed};
    if (Status s = validate_sampling(sp); !s.ok()) return report_usage_error("sampling", s);
    auto t_load = Clock::now();
    const int prompt_len = static_cast<int>(prompt->size());
    auto model = open_model(a->model, RunShape{prompt_len + a->max_tokens, prompt_len, false});
    if (!model.ok()) return report_failure(model.status());
    const double load_s = since(t_load);
    SessionOptions so;
    so.prefill_chunk = a->model.prefill_chunk;
    so.record_routing = !a->save_routing.empty();
    Session session(**model, so);
    Sampler sampler(sp);

    auto t_prefill = Clock::now();
    if (Status s = session.feed(*prompt); !s.ok()) return report_failure(s);
    const double prefill_s = since(t_prefill);
    std::vector<int32_t> out;
    auto t_decode = Clock::now();
    for (int i = 0; i < a->max_tokens; ++i) {
      const int32_t id = sampler.sample(session.last_logits());
      out.push_back(id);
      if (i + 1 == a->max_tokens) break;  // the last token needs no forward pass
      const int32_t one[1] = {id};
      if (Status s = session.feed(one); !s.ok()) return report_failure(s);
    }
    const double decode_s = since(t_decode);
    const int decode_steps = std::max(0, a->max_tokens - 1);
    if (a->output == "json") {
      nlohmann::json j;
      j["output_ids"] = out;
      j["prompt_tokens"] = prompt->size();
      j["generated_tokens"] = out.size();
      j["timings"] = {{"load_s", load_s}, {"prefill_s", prefill_s}, {"decode_s", decode_s},
                      {"decode_tokens_per_s", decode_steps > 0 ? decode_steps / decode_s : 0.0}};
      j["run"] = run_info(session.stats());
      j["stats"] = stats_json(**model, session.stats());
      print_json(j);
    } else {
      for (size_t i = 0; i < out.size(); ++i) std::printf("%s%d", i ? " " : "", out[i]);
      std::printf("\n");
      spdlog::info("prefill {} tokens in {:.3f} s; {} decode steps in {:.3f} s", prompt->size(), prefill_s,
                   decode_steps, decode_s);
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
