// Drafts: tokens that might follow a sequence, proposed for speculative verification
// (verify.h). A draft only decides how many rows a pass carries, never which tokens are
// emitted: a wrong draft costs its rows and nothing else.
//
//   NgramDrafter     prompt lookup: the most recent earlier occurrence of the sequence's
//                    last n tokens (n from max_ngram down to min_ngram), and what followed
//                    it. Free, and strong wherever the output repeats its input (extraction,
//                    documents, code) or itself.
//   ScriptedDrafter  a given continuation, position by position: an oracle (a previous
//                    run's output of the same prompt), or forced drafts in tests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace nj {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends at most `max` tokens that might follow `context` (every token of the sequence
  // so far, prompt and output, ending with the one about to be fed) to `out`; possibly
  // none. REQUIRES: max >= 0.
  virtual void propose(std::span<const int32_t> context, int max, std::vector<int32_t>* out) = 0;
};

struct NgramOptions {
  // Longest suffix looked up first: a longer match predicts its continuation better.
  int max_ngram = 4;
  // Shortest suffix that counts as a match: a single token repeats too often by chance to
  // predict what follows it.
  int min_ngram = 2;
};

class NgramDrafter : public Drafter {
 public:
  explicit NgramDrafter(NgramOptions options = {}) : options_(options) {}
  // The continuation of the most recent earlier occurrence of the longest matching suffix.
  // Where the continuation runs into the end of `context` it goes on through the draft
  // itself, so a repeating pattern is drafted as far as `max` asks.
  void propose(std::span<const int32_t> context, int max, std::vector<int32_t>* out) override;

 private:
  NgramOptions options_;
};

class ScriptedDrafter : public Drafter {
 public:
  // `script[i]` is the draft for output token i of a sequence whose prompt has
  // `prompt_length` tokens.
  ScriptedDrafter(size_t prompt_length, std::vector<int32_t> script)
      : prompt_length_(prompt_length), script_(std::move(script)) {}
  // The script from the output position after `context`, up to `max` tokens.
  void propose(std::span<const int32_t> context, int max, std::vector<int32_t>* out) override;

 private:
  size_t prompt_length_;
  std::vector<int32_t> script_;
};

}  // namespace nj
