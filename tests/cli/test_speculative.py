#!/usr/bin/env python3
"""`nightjar generate --speculative ngram|oracle [--draft-tokens K]`: the output is exactly
plain decoding's, greedy and sampled, resident and under a memory budget, for several K,
with drafts that are right (an oracle: a previous run's output), wrong, and whatever prompt
lookup finds; `"speculation": {"passes", "drafted", "accepted"}` counts what happened; a
state saved mid-generation with speculation on continues like the uninterrupted run; and
the flags' usage errors.

On a generated `demo` model (KDA, MLA, MXFP4 MoE, a real tokenizer).
"""
import argparse, json, os, subprocess, sys, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import njtest  # noqa: E402

BIN = None
MODEL = None

# A repetitive prompt (prompt lookup finds its continuations) and a plain one.
REPETITIVE = "The cat sat on the mat. The cat sat on the mat. The cat sat on the mat. The cat"
PLAIN = "Once upon a time"


def nightjar(*args, check=True):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError("nightjar %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


def generate(*args):
    return json.loads(nightjar("generate", "--model", MODEL, "--output", "json", "--ignore-eos", *args).stdout)


SAMPLED = ["--temperature", "0.9", "--top-k", "40", "--seed", "11"]


class Speculative(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = njtest.scratch_dir("speculative-")
        plan = json.loads(nightjar("plan", "--model", MODEL, "--max-context", "128", "--output", "json").stdout)
        cls.min = plan["min_memory_bytes"]
        with open(os.path.join(MODEL, "config.json")) as f:
            config = json.load(f)
        cls.vocab = config.get("vocab_size") or config["text_config"]["vocab_size"]

    def test_ngram_drafts_give_plain_decodings_tokens(self):
        for prompt in (REPETITIVE, PLAIN):
            for sampling in ([], SAMPLED):
                plain = generate("--prompt", prompt, "--max-tokens", "40", *sampling)
                self.assertNotIn("speculation", plain)
                for k in ("1", "8"):
                    with self.subTest(prompt=prompt, sampling=sampling, k=k):
                        spec = generate("--prompt", prompt, "--max-tokens", "40", *sampling,
                                        "--speculative", "ngram", "--draft-tokens", k)
                        self.assertEqual(spec["output_ids"], plain["output_ids"])
                        s = spec["speculation"]
                        self.assertLessEqual(s["accepted"], s["drafted"])
                        # Every token but the first comes from a pass or an accepted draft.
                        self.assertEqual(s["passes"] + s["accepted"] + 1, len(plain["output_ids"]))
        # (A model with random weights seldom repeats itself, so prompt lookup may find nothing
        # to draft here; the oracle test below is the one that exercises accepted drafts.)

    def test_oracle_and_wrong_drafts_under_a_budget(self):
        for sampling in ([], SAMPLED):
            plain = generate("--prompt", PLAIN, "--max-tokens", "30", *sampling)
            truth = plain["output_ids"]
            wrong = [(t + 1) % self.vocab for t in truth]
            # (k = 1..8 and 2x the minimum budget are covered by tests/unit/spec.)
            for budget in ([], ["--memory", f"{self.min}B"]):
                for k in ("1", "8"):
                    with self.subTest(sampling=sampling, budget=budget, k=k):
                        right = generate("--prompt", PLAIN, "--max-tokens", "30", *sampling, *budget,
                                         "--speculative", "oracle", "--draft-tokens", k,
                                         "--draft-ids", ",".join(map(str, truth)))
                        self.assertEqual(right["output_ids"], truth)
                        self.assertEqual(right["speculation"]["accepted"], right["speculation"]["drafted"])
                        # All the drafts asked for when resident; under a budget, what is left over.
                        most = right["speculation"]["max_draft_tokens"]
                        if budget:
                            self.assertLessEqual(most, int(k))
                        else:
                            self.assertEqual(most, int(k))
                        bad = generate("--prompt", PLAIN, "--max-tokens", "30", *sampling, *budget,
                                       "--speculative", "oracle", "--draft-tokens", k,
                                       "--draft-ids", ",".join(map(str, wrong)))
                        self.assertEqual(bad["output_ids"], truth)
                        self.assertEqual(bad["speculation"]["accepted"], 0)

    def test_a_state_saved_mid_generation_continues_like_the_uninterrupted_run(self):
        whole = generate("--prompt", REPETITIVE, "--max-tokens", "40", *SAMPLED)
        state = os.path.join(self.dir, "mid.njstate")
        first = generate("--prompt", REPETITIVE, "--max-tokens", "17", *SAMPLED, "--speculative", "ngram",
                         "--save-state", state)
        rest = generate("--load-state", state, "--max-tokens", "23", "--speculative", "ngram")
        self.assertEqual(first["output_ids"] + rest["output_ids"], whole["output_ids"])

    def test_usage_errors(self):
        for args in (["--draft-tokens", "4"], ["--speculative", "oracle"],
                     ["--speculative", "ngram", "--draft-ids", "1,2"], ["--speculative", "ngram", "--draft-tokens", "0"],
                     ["--speculative", "sometimes"]):
            with self.subTest(args=args):
                p = nightjar("generate", "--model", MODEL, "--prompt-ids", "1,2", *args, check=False)
                self.assertEqual(p.returncode, 2, p.stderr)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args, rest = ap.parse_known_args()
    BIN = args.bin
    MODEL = njtest.make_model(os.path.join(njtest.scratch_dir("models-"), "demo"), preset="demo", seed=5)
    unittest.main(argv=[sys.argv[0], *rest])
