// Options shared by every command that runs the model, and how they open it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/runtime/model.h"
#include "engine/session/session.h"
#include "engine/util/status.h"
#include "jobs/inputs/document_inputs.h"

namespace CLI {
class App;
}

namespace nj::runner {

struct ModelArgs {
  std::string model;       // --model DIR
  int threads = 0;         // --threads N; 0 = all cores
  std::string simd;        // --simd LEVEL; empty = detected (or NIGHTJAR_SIMD)
  int prefill_chunk = kDefaultPrefillChunk;  // --prefill-chunk N
  std::string memory;      // --memory SIZE; empty = everything resident
  int max_context =
      0;  // --max-context N: positions the budget reserves state for; 0 = what the command needs
  int io_threads = kDefaultIoThreads;   // --io-threads N
  std::string pin_compressed = "auto";  // --pin-compressed auto|yes|no
  bool stats = false;                   // --stats
  std::string pack_dir;                 // --pack DIR: a packed trunk written elsewhere
  bool no_pack = false;                 // --no-pack: read the shards even if a pack exists
};

// Adds --model (required), --threads, --simd, --prefill-chunk, --memory, --max-context,
// --io-threads, --stats.
void add_model_options(CLI::App& sub, ModelArgs& args);

// What a command will run: the sequence length it needs (prompt + generated tokens), the
// tokens fed per pass, and whether it keeps logits for every position.
struct RunShape {
  int context = 0;
  int longest_feed = 0;
  bool all_logits = false;
  int batch = 1;  // sequences decoding together
  int draft_tokens = 0;  // speculative decoding: the most drafts a sequence feeds per pass
  KdaRollback kda_rollback = kDefaultKdaRollback;
};

// The ModelOptions the flags describe for a run of `shape`: the budget reserves sequence
// state for the run's context (or --max-context) and scratch for its largest pass.
// InvalidArgument naming the flag for a bad value.
Result<ModelOptions> model_options(const ModelArgs& args, const RunShape& shape);

// Adds --pin-compressed auto|yes|no (lossless packs: keep trunk units compressed in RAM).
void add_pin_compressed_option(CLI::App& sub, std::string& value);
Result<PinCompressed> parse_pin_compressed(const std::string& value);

// The largest batch the --memory budget holds for runs of `shape` (from the model's headers;
// no weights are read). ResourceExhausted when not even one sequence fits.
Result<int> max_batch_for(const ModelArgs& args, const RunShape& shape);

// The most compute threads --threads accepts: more than the cores of any machine this runs
// on, few enough that OpenMP can start a team of them (100000 crashed `generate`).
inline constexpr int kMaxComputeThreads = 1024;

// Adds --threads and --simd only (for `run`, whose models and budgets come from the jobs).
void add_compute_options(CLI::App& sub, ModelArgs& args);

// Applies --threads (without it: calibrated) and --simd to the process. InvalidArgument
// naming the flag.
Status apply_compute_options(const ModelArgs& args);

// Applies --threads and --simd to the process, then opens the model. Usage errors come back
// as InvalidArgument naming the flag.
Result<std::unique_ptr<Model>> open_model(const ModelArgs& args, const RunShape& shape);

// The run's I/O and compute figures ("stats" in --output json; --stats prints them as text).
nlohmann::json stats_json(Model& model, const ForwardStats& forward);
std::string stats_text(const nlohmann::json& stats);

// "3,7,11" → {3, 7, 11} (spaces allowed around commas). InvalidArgument naming the bad item
// otherwise; an empty list is an error unless `allow_empty`.
Result<std::vector<int32_t>> parse_id_list(const std::string& text, bool allow_empty = false);

// A byte size typed on a command line (`--memory 8GiB`): parse_bytes (engine/util/units.h),
// but a bare number is refused, since `--memory 16` meant as 16 GiB would be 16 bytes; bytes
// are written with B ("4096B"). InvalidArgument naming the text and how to write it.
Result<uint64_t> parse_size_flag(const std::string& text);

// The contents of a text file, or of standard input for "-", at most `max_bytes` (a prompt's
// limit, jobs/inputs/document_inputs.h, unless told otherwise). InvalidArgument naming the
// file and its size when it holds more (standard input: read no further than that); the
// file errors of read_small_file (not a regular file, unreadable).
Result<std::string> read_text_input(const std::string& path,
                                    size_t max_bytes = jobs::kMaxDocumentBytes);

}  // namespace nj::runner
