// Constrained classification over a fixed label set: the labels' token sequences as a trie,
// and the label probabilities from the model's logits at the trie's branching points.
//
// Scoring. A label's score is the product of its tokens' probabilities (full softmax over
// the vocabulary) at the branching nodes of its path: the nodes with two or more children,
// where the model chooses between labels. A token below a node with one child is forced by
// the constraint and is not scored (factor 1), so it needs no forward pass. The scores are
// then normalized over the labels:
//
//   p(label) = prod_{branching n on path} softmax(logits_n)[token_n] / sum over all labels
//
// Consequences: when the labels' first tokens are all distinct only the root (the logits
// after the prompt) branches, and classification costs zero decode steps. Otherwise each
// branching node below the root needs the logits after feeding the tokens that lead to it
// (teacher forcing along the label paths): branch_paths() lists them.
//
// Pure and deterministic (the log-softmax sums in double, in vocabulary order); no engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/util/status.h"

namespace nj::jobs {

struct LabelScores {
  std::vector<double> probabilities;  // [labels], normalized, sums to 1
  std::vector<double> log_scores;     // [labels], unnormalized natural-log scores
  size_t best = 0;                    // highest probability; the first label on a tie
  double margin = 0;                  // best minus the runner-up (1 with a single label)
};

class LabelTrie {
 public:
  // Builds the trie of `labels` (token sequences, in label order; `names` only for messages).
  // InvalidArgument naming the label when a sequence is empty, two labels have the same
  // tokens, or one label's tokens are a prefix of another's (its score would never be
  // lower: the product of fewer factors).
  static Result<LabelTrie> build(const std::vector<std::vector<int32_t>>& labels,
                                 const std::vector<std::string>& names);

  size_t num_labels() const { return label_leaf_.size(); }

  // The branching nodes below the root, each as the tokens leading to it from the root, in
  // depth-first label order. Empty when the first tokens are distinct (zero decode steps).
  const std::vector<std::vector<int32_t>>& branch_paths() const { return branch_paths_; }

  // The token paths to feed after the prompt, one restore of the prompt state each, so that
  // every branching node's logits are seen on the way: the branch paths that are not a
  // prefix of another branch path. Their total length is the decode steps a document costs.
  std::vector<std::vector<int32_t>> feed_paths() const;

  // Index into branch_paths() of the node reached by `path`, or -1 when that node does not
  // branch (or does not exist).
  int branch_index(std::span<const int32_t> path) const;

  // Scores the labels. `root` holds the logits after the prompt; branch[i] the logits at
  // branch_paths()[i]. REQUIRES: every row has the same size and holds every label token;
  // branch.size() == branch_paths().size().
  LabelScores score(std::span<const float> root,
                    std::span<const std::span<const float>> branch) const;

 private:
  struct Node {
    int32_t token = -1;         // the token leading here (-1 at the root)
    std::vector<int> children;  // node indices, in label order of first use
    int branch = -1;            // -2 root, >= 0 index into branch_paths_, -1 none
  };
  std::vector<Node> nodes_;                   // [0] is the root
  std::vector<std::vector<int>> label_path_;  // [labels] node indices below the root
  std::vector<int> label_leaf_;               // [labels] node index of the last token
  std::vector<std::vector<int32_t>> branch_paths_;
};

// log softmax(row)[token], computed in double: row[token] - max - log(sum exp(row - max)).
double log_softmax_at(std::span<const float> row, int32_t token);

}  // namespace nj::jobs
