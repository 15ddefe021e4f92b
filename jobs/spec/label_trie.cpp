// LabelTrie: building, the paths that need decode steps, and scoring (see label_trie.h).
#include "jobs/spec/label_trie.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <functional>

namespace nj::jobs {

double log_softmax_at(std::span<const float> row, int32_t token) {
  assert(token >= 0 && static_cast<size_t>(token) < row.size());
  double max = -INFINITY;
  for (float v : row) max = std::max<double>(max, v);
  double sum = 0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  return static_cast<double>(row[static_cast<size_t>(token)]) - max - std::log(sum);
}

Result<LabelTrie> LabelTrie::build(const std::vector<std::vector<int32_t>>& labels,
                                   const std::vector<std::string>& names) {
  auto name = [&](size_t i) {
    return "'" + (i < names.size() ? names[i] : "#" + std::to_string(i)) + "'";
  };
  LabelTrie t;
  t.nodes_.push_back(Node{});
  std::vector<int> owner;  // [nodes] the first label whose path ends at the node, -1 none
  owner.push_back(-1);
  for (size_t l = 0; l < labels.size(); ++l) {
    if (labels[l].empty()) return invalid_argument("label " + name(l) + " tokenizes to nothing");
    std::vector<int> path;
    int node = 0;
    for (int32_t token : labels[l]) {
      int next = -1;
      for (int c : t.nodes_[static_cast<size_t>(node)].children)
        if (t.nodes_[static_cast<size_t>(c)].token == token) next = c;
      if (next < 0) {
        next = static_cast<int>(t.nodes_.size());
        t.nodes_.push_back(Node{token, {}, -1});
        owner.push_back(-1);
        t.nodes_[static_cast<size_t>(node)].children.push_back(next);
      }
      path.push_back(next);
      node = next;
    }
    t.label_path_.push_back(std::move(path));
    t.label_leaf_.push_back(node);
    if (owner[static_cast<size_t>(node)] >= 0)
      return invalid_argument("labels " +
                              name(static_cast<size_t>(owner[static_cast<size_t>(node)])) +
                              " and " + name(l) + " have the same tokens");
    owner[static_cast<size_t>(node)] = static_cast<int>(l);
  }
  // A label ending at a node that has children is a token prefix of another label.
  for (size_t l = 0; l < labels.size(); ++l) {
    const Node& leaf = t.nodes_[static_cast<size_t>(t.label_leaf_[l])];
    if (leaf.children.empty()) continue;
    for (size_t m = 0; m < labels.size(); ++m) {
      const auto& p = t.label_path_[m];
      if (m != l && std::find(p.begin(), p.end(), t.label_leaf_[l]) != p.end())
        return invalid_argument("label " + name(l) + " is a token prefix of label " + name(m) +
                                " (its score could never be lower); rename one of them");
    }
  }
  // Branching nodes below the root, depth first in label order.
  t.nodes_[0].branch = -2;
  std::vector<int32_t> prefix;
  std::function<void(int)> walk = [&](int n) {
    Node& node = t.nodes_[static_cast<size_t>(n)];
    if (n != 0 && node.children.size() >= 2) {
      node.branch = static_cast<int>(t.branch_paths_.size());
      t.branch_paths_.push_back(prefix);
    }
    for (int c : std::vector<int>(node.children)) {
      prefix.push_back(t.nodes_[static_cast<size_t>(c)].token);
      walk(c);
      prefix.pop_back();
    }
  };
  walk(0);
  return t;
}

std::vector<std::vector<int32_t>> LabelTrie::feed_paths() const {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < branch_paths_.size(); ++i) {
    const auto& p = branch_paths_[i];
    bool extended = false;
    for (size_t j = 0; j < branch_paths_.size() && !extended; ++j) {
      const auto& q = branch_paths_[j];
      extended = j != i && q.size() > p.size() && std::equal(p.begin(), p.end(), q.begin());
    }
    if (!extended) out.push_back(p);
  }
  return out;
}

int LabelTrie::branch_index(std::span<const int32_t> path) const {
  int node = 0;
  for (int32_t token : path) {
    int next = -1;
    for (int c : nodes_[static_cast<size_t>(node)].children)
      if (nodes_[static_cast<size_t>(c)].token == token) next = c;
    if (next < 0) return -1;
    node = next;
  }
  return node == 0 ? -1 : std::max(-1, nodes_[static_cast<size_t>(node)].branch);
}

LabelScores LabelTrie::score(std::span<const float> root,
                             std::span<const std::span<const float>> branch) const {
  assert(branch.size() == branch_paths_.size());
  LabelScores s;
  const size_t n = label_path_.size();
  s.log_scores.assign(n, 0.0);
  for (size_t l = 0; l < n; ++l) {
    int parent = 0;
    for (int node : label_path_[l]) {
      const Node& p = nodes_[static_cast<size_t>(parent)];
      if (p.children.size() >= 2) {
        std::span<const float> row = parent == 0 ? root : branch[static_cast<size_t>(p.branch)];
        s.log_scores[l] += log_softmax_at(row, nodes_[static_cast<size_t>(node)].token);
      }
      parent = node;
    }
  }
  const double max = *std::max_element(s.log_scores.begin(), s.log_scores.end());
  double sum = 0;
  s.probabilities.resize(n);
  for (size_t l = 0; l < n; ++l) sum += s.probabilities[l] = std::exp(s.log_scores[l] - max);
  for (double& p : s.probabilities) p /= sum;
  s.best = 0;
  for (size_t l = 1; l < n; ++l)
    if (s.probabilities[l] > s.probabilities[s.best]) s.best = l;
  double second = 0;
  for (size_t l = 0; l < n; ++l)
    if (l != s.best) second = std::max(second, s.probabilities[l]);
  s.margin = s.probabilities[s.best] - second;
  return s;
}

}  // namespace nj::jobs
