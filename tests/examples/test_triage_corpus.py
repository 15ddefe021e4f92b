#!/usr/bin/env python3
"""The triage model's training corpus (examples/triage/training/corpus.py) keeps the
evaluation tickets out and is reproducible:

  * every evaluation ticket (the 24 example tickets, heldout.jsonl) mentions at least one of
    the subject patterns exclusions.py lists for it, so the list describes those tickets;
  * the corpus the model was trained on (seed 3, 40,000 tickets, 30 % plain, as train.py makes it) has no
    ticket that mentions any of those subjects or shares five consecutive words with an
    evaluation or development ticket, and no evaluation ticket appears in it;
  * the same seed gives the same corpus; labels are balanced.

Runs on Debian's python3 (no PyTorch).
"""
import collections
import os
import re
import sys
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "examples", "triage", "training"))

import corpus  # noqa: E402
import exclusions  # noqa: E402

TRAIN_SEED, TRAIN_COUNT = 3, 40000          # the committed model's run (training README)
TRAIN_PLAIN, TRAIN_CASUAL = 0.3, 0.5         # its --plain-corpus and --plain-casual


class TriageCorpus(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = corpus.generate(TRAIN_SEED, TRAIN_COUNT, plain=TRAIN_PLAIN, casual=TRAIN_CASUAL)
        cls.evaluation = corpus.evaluation_texts()

    def test_every_evaluation_ticket_matches_its_own_subject_patterns(self):
        by_id = collections.defaultdict(list)
        for tid, pats in exclusions.SUBJECTS:
            by_id[tid] += pats
        names = {k.split("-")[0]: v for k, v in self.evaluation.items() if not k.startswith("d")}
        self.assertEqual(sorted(names), sorted(by_id), "one subject entry per test and held-out ticket")
        for tid, text in names.items():
            low = text.lower()
            self.assertTrue(any(re.search(p, low) for p in by_id[tid]),
                            f"{tid}: none of its subject patterns matches {text!r}")

    def test_the_training_corpus_avoids_the_evaluation_tickets(self):
        grams = {}
        for tid, text in self.evaluation.items():
            for g in exclusions.ngrams(text):
                grams[g] = tid
        texts = {t.strip().lower() for t, _ in self.data}
        for tid, text in self.evaluation.items():
            self.assertNotIn(text.strip().lower(), texts, tid)
        for text, label in self.data:
            self.assertIsNone(exclusions.subject_hit(text), text)
            shared = [g for g in exclusions.ngrams(text) if g in grams]
            self.assertEqual(shared, [], f"{text!r} shares words with {[grams[g] for g in shared]}")

    def test_the_wide_corpus_avoids_the_evaluation_tickets_too(self):
        # train.py --wide-corpus: lexicon_wide.py's structures pass the same guards, and the
        # same seed gives the same tickets; it differs from the default corpus
        wide = corpus.generate(TRAIN_SEED, 2000, wide=True)
        self.assertEqual(corpus.generate(TRAIN_SEED, 2000, wide=True), wide)
        self.assertNotEqual(wide, corpus.generate(TRAIN_SEED, 2000))
        grams = {g for text in self.evaluation.values() for g in exclusions.ngrams(text)}
        for text, label in wide:
            self.assertIsNone(exclusions.subject_hit(text), text)
            self.assertFalse(exclusions.ngrams(text) & grams, text)

    def test_the_plain_corpus_avoids_the_evaluation_tickets_too(self):
        # train.py --plain-corpus F --plain-casual C: lexicon_plain.py's tickets pass the same
        # guards, and the same seed gives the same tickets; they differ from the default corpus
        plain = corpus.generate(TRAIN_SEED, 2000, plain=0.5, casual=0.5)
        self.assertEqual(corpus.generate(TRAIN_SEED, 2000, plain=0.5, casual=0.5), plain)
        self.assertNotEqual(plain, corpus.generate(TRAIN_SEED, 2000))
        grams = {g for text in self.evaluation.values() for g in exclusions.ngrams(text)}
        for text, label in plain:
            self.assertIsNone(exclusions.subject_hit(text), text)
            self.assertFalse(exclusions.ngrams(text) & grams, text)

    def test_same_seed_same_corpus_and_balanced_labels(self):
        self.assertEqual(corpus.generate(TRAIN_SEED, TRAIN_COUNT, plain=TRAIN_PLAIN, casual=TRAIN_CASUAL), self.data)
        counts = collections.Counter(label for _, label in self.data)
        self.assertEqual(set(counts.values()), {TRAIN_COUNT // 4})
        self.assertNotEqual(corpus.generate(TRAIN_SEED + 1, 50), corpus.generate(TRAIN_SEED, 50))


if __name__ == "__main__":
    unittest.main(verbosity=2)
