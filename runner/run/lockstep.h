// Lockstep generation: many sequences decode together, one token each per pass over the
// weights, and a queued sequence joins as soon as another leaves. A joining sequence's
// prompt is prefilled in the same passes that carry the others' decode steps (its chunk
// fills the rows the decoders leave free), so the batch stays full.
//
// Each sequence samples exactly as a solo `generate` would (its own Sampler, one draw per
// token, from logits that are bit-identical to its solo run's), so its tokens are the
// same whatever shares its passes.
//
// Speculation (engine/speculative/, BatchSpeculation): a decoding sequence's step is then the
// token just chosen and its prompt-lookup drafts, a tentative step verified after the pass
// (Speculator::verify, Forward::keep) exactly as `generate --speculative` verifies its own:
// the tokens are the same.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/session/sampler.h"
#include "engine/speculative/speculator.h"
#include "engine/util/status.h"
#include "runner/item/pass_group.h"  // BatchSpeculation

namespace nj::runner {

enum class FinishReason { kNone, kStop, kLength };
const char* finish_reason_name(FinishReason r);

// One sequence to generate.
struct GenerationRequest {
  std::string id;
  std::vector<int32_t> prompt;  // REQUIRES: non-empty
  int max_tokens = 16;
  SamplingParams sampling;
  int32_t eos = -1;  // stop after this token (-1: never)
};

struct GenerationResult {
  std::string id;
  std::vector<int32_t> output;
  FinishReason finish = FinishReason::kNone;
  SequenceUsage usage;           // its share of the passes it took part in
  SpeculationStats speculation;  // zero without speculation
};

class LockstepGenerator {
 public:
  // `batch`: sequences per pass; `max_rows`: rows per pass (decode rows first, then prefill
  // chunks of at most `prefill_chunk` tokens fill the rest). REQUIRES: batch >= 1,
  // max_rows >= batch.
  // max_rows >= batch x (1 + speculation.draft_tokens).
  LockstepGenerator(Forward& forward, int batch, int max_rows, int prefill_chunk,
                    BatchSpeculation speculation = {});

  void add(GenerationRequest request);
  bool done() const { return active_.empty() && queue_.empty(); }
  // Runs one pass. Sequences that finish during it are appended to `finished` (in the
  // order they finish). An error is the pass's: every active sequence is lost with it.
  Status step(std::vector<GenerationResult>* finished);
  int active() const { return static_cast<int>(active_.size()); }

 private:
  struct Live {
    GenerationRequest request;
    SequenceState state;
    Sampler sampler;
    size_t fed = 0;     // prompt tokens fed
    int32_t next = -1;  // the sampled token to feed in the next pass
    bool finished = false;
    GenerationResult result;
    std::optional<Speculator> spec;  // with speculation
    std::vector<float> logits;       // [rows][vocab] of its tentative step
    bool tentative = false;          // its step in this pass is tentative
  };
  // Samples the next token after the sequence's last logits; true when it finishes.
  bool sample(Live& l);
  // Whether `id`, just emitted, ends the sequence (and why).
  bool ends(Live& l, int32_t id);

  Forward& forward_;
  int batch_, max_rows_, prefill_chunk_;
  BatchSpeculation speculation_;
  std::deque<GenerationRequest> queue_;
  std::vector<std::unique_ptr<Live>> active_;
};

}  // namespace nj::runner
