"""The triage task as the engine runs it: examples/triage/triage.yaml's template and labels,
the prompt's token ids, and label scoring over the labels' token trie (jobs/spec/label_trie.h).

  prompt  = ids(prefix) + ids(document) + ids(suffix)     each part tokenized on its own
  label   = ids(suffix + " " + label) after ids(suffix)   its tokens as the continuation
  p(label) = prod over the branching nodes of its path of softmax(logits)[token], normalized
"""
import json
import math
import os

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
TRIAGE_DIR = os.path.normpath(os.path.join(HERE, ".."))
SPEC = os.path.join(TRIAGE_DIR, "triage.yaml")


def read_spec(path=SPEC):
    with open(path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    return spec["template"], list(spec["labels"])


class Task:
    def __init__(self, tokenizer, spec_path=SPEC):
        template, self.labels = read_spec(spec_path)
        before, after = template.replace("{labels}", ", ".join(self.labels)).split("{document}")
        self.prefix_text, self.suffix_text = before, after.rstrip()
        self.tok = tokenizer
        self.prefix_ids = tokenizer.encode(self.prefix_text)
        self.suffix_ids = tokenizer.encode(self.suffix_text)
        self.label_ids = []
        for label in self.labels:
            full = tokenizer.encode(self.suffix_text + " " + label)
            assert full[:len(self.suffix_ids)] == self.suffix_ids, label
            self.label_ids.append(full[len(self.suffix_ids):])
        # the trie: a node is a tuple of tokens from the root; it branches with >= 2 children
        children = {}
        for ids in self.label_ids:
            for j in range(len(ids)):
                children.setdefault(tuple(ids[:j]), set()).add(ids[j])
        self.branching = {node for node, ch in children.items() if len(ch) >= 2}
        # feed paths: the branching nodes below the root not a prefix of another
        below = sorted(n for n in self.branching if n)
        self.feed_paths = [list(n) for n in below
                           if not any(m != n and m[:len(n)] == n for m in below)]

    def document_ids(self, text):
        return self.tok.encode(text) + self.suffix_ids

    def scored_positions(self):
        """For each label, [(node, token)] of the branching nodes on its path."""
        return [[(tuple(ids[:j]), ids[j]) for j in range(len(ids)) if tuple(ids[:j]) in self.branching]
                for ids in self.label_ids]

    def probabilities(self, log_softmax_at):
        """Label probabilities from log_softmax_at(node) -> the log-softmax row (indexable by
        token id) after the prompt followed by the node's tokens."""
        logs = [sum(float(log_softmax_at(node)[tok]) for node, tok in path)
                for path in self.scored_positions()]
        m = max(logs)
        e = [math.exp(x - m) for x in logs]
        return [x / sum(e) for x in e]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
