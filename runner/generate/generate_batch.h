// `generate --prompts-file`: the batched form of `generate` (generate_batch.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/session/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "runner/run/lockstep.h"
#include "runner/run/model_args.h"

namespace nj::runner {

struct BatchGenerateArgs {
  ModelArgs model;
  std::string prompts_file;
  int batch = 0;  // 0: as many as the budget holds
  int max_tokens = 16;
  SamplingParams sampling;
  bool ignore_eos = false;
  std::string output = "text";
  int vocab = 0;  // of the model, for checking prompt ids before it is opened
  // --speculative ngram: the most drafts per sequence and pass (--draft-tokens; 0: off).
  int draft_tokens = 0;
  KdaRollback kda_rollback = kDefaultKdaRollback;
};

// What a batch generation produced, the results in the prompts file's order.
struct BatchGeneration {
  std::vector<GenerationRequest> requests;
  std::vector<GenerationResult> results;  // results[i] answers requests[i]
  int batch = 0;
  int max_draft_tokens = 0;  // the drafts the budget holds (speculation)
  double load_s = 0, run_s = 0;
  uint64_t generated = 0;  // output tokens, all sequences
  nlohmann::json stats;    // stats_json of the model and its Forward (model_args.h)
  uint64_t passes = 0;
  int max_sequences_per_pass = 0;
};

// Reads the prompts file, opens the model for the batch and runs it to the end.
// Errors: the prompts file's (naming file and line), the model's or a pass's.
Result<BatchGeneration> generate_batch(const BatchGenerateArgs& args,
                                       const std::optional<Tokenizer>& tokenizer);

// `--output json`'s object, and the text form: one "ID<TAB>JSON-string" line per prompt.
nlohmann::json batch_generation_json(const BatchGenerateArgs& args,
                                     const std::optional<Tokenizer>& tokenizer,
                                     const BatchGeneration& generation);
std::string batch_generation_text(const std::optional<Tokenizer>& tokenizer,
                                  const BatchGeneration& generation);

}  // namespace nj::runner
