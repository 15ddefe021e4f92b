// Options shared by every command that runs the model, and how they open it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/util/status.h"

namespace CLI {
class App;
}

namespace nj::runner {

struct ModelArgs {
  std::string model;       // --model DIR
  int threads = 0;         // --threads N; 0 = all cores
  std::string simd;        // --simd LEVEL; empty = detected (or NIGHTJAR_SIMD)
  int prefill_chunk = 64;  // --prefill-chunk N
};

// Adds --model (required), --threads, --simd, --prefill-chunk.
void add_model_options(CLI::App& sub, ModelArgs& args);

// Adds --threads and --simd only (for `run`, whose models come from the jobs).
void add_compute_options(CLI::App& sub, ModelArgs& args);

// Applies --threads and --simd to the process. InvalidArgument naming the flag.
Status apply_compute_options(const ModelArgs& args);

// Applies --threads and --simd to the process, then opens the model. Usage errors come back
// as InvalidArgument naming the flag.
Result<std::unique_ptr<Model>> open_model(const ModelArgs& args);

// "3,7,11" → {3, 7, 11}. InvalidArgument naming the text otherwise.
Result<std::vector<int32_t>> parse_id_list(const std::string& text);

}  // namespace nj::runner
