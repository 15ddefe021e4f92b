// `generate --prompts-file`: the batched form of `generate` (cmd_generate_batch.cpp).
#pragma once

#include <optional>
#include <string>

#include "engine/session/sampler.h"
#include "engine/tokenizer/tokenizer.h"
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

// Runs it; returns the exit code (errors are reported).
int run_generate_batch(const BatchGenerateArgs& args, const std::optional<Tokenizer>& tokenizer);

}  // namespace nj::runner
