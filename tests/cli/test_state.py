#!/usr/bin/env python3
"""`nightjar generate --save-state / --load-state` end to end, each step a new process.

On a generated `tiny` model (KDA, MLA, dense layer 0, MXFP4 MoE, attention-residual blocks):
for every cut point k of a 32-token generation, greedy and sampled, generate k tokens and
save; restore in a new process and generate the rest; the concatenation must equal the
uninterrupted run token for token. Plus the command-line contract: usage errors, sampling
settings on resume, damaged or foreign checkpoints refused with the reason (exit 3).
"""
import argparse, json, os, shutil, subprocess, sys, tempfile, unittest

BIN = MAKE_MODEL = WORK = None
PROMPT = "3,7,11"
TOKENS = 32
GREEDY = []
SAMPLED = ["--temperature", "0.8", "--top-p", "0.9", "--seed", "42"]


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)


def model(preset):
    """A model made by make_model.py into the work directory (once per build tree)."""
    out = os.path.join(WORK, "models", preset)
    if not os.path.exists(os.path.join(out, "config.json")):
        tmp = "%s.tmp-%d" % (out, os.getpid())
        subprocess.run([sys.executable, MAKE_MODEL, "--out", tmp, "--preset", preset, "--seed", "1", "--force"],
                       check=True, capture_output=True)
        try:
            os.rename(tmp, out)
        except OSError:  # another test process got there first
            shutil.rmtree(tmp)
    return out


def generate(m, *args):
    p = run("generate", "--model", m, "--output", "json", *args)
    if p.returncode != 0:
        raise AssertionError("nightjar generate %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return json.loads(p.stdout)


class StateCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        os.makedirs(WORK, exist_ok=True)
        cls.tiny = model("tiny")

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=WORK)
        self.addCleanup(shutil.rmtree, self.dir)
        self.state = os.path.join(self.dir, "state.bin")

    def full(self, sampling):
        return generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", str(TOKENS), *sampling)["output_ids"]

    def check_every_cut_point(self, sampling):
        expected = self.full(sampling)
        self.assertEqual(len(expected), TOKENS)
        for k in range(TOKENS + 1):
            with self.subTest(k=k):
                first = generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", str(k), *sampling,
                                 "--save-state", self.state)
                self.assertEqual(first["saved_state"]["position"], 3 + k)
                rest = generate(self.tiny, "--load-state", self.state, "--max-tokens", str(TOKENS - k))
                self.assertEqual(rest["resumed_from_position"], 3 + k)
                self.assertEqual(first["output_ids"] + rest["output_ids"], expected)
        return expected

    def test_every_cut_point_greedy(self):
        self.check_every_cut_point(GREEDY)

    def test_every_cut_point_sampled(self):
        sampled = self.check_every_cut_point(SAMPLED)
        self.assertNotEqual(sampled, self.full(GREEDY), "the sampled run must actually depend on the RNG")

    def test_chained_saves_to_one_file_continue_exactly(self):
        expected = self.full(SAMPLED)
        got = generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", "8", *SAMPLED,
                       "--save-state", self.state)["output_ids"]
        for _ in range(3):
            got += generate(self.tiny, "--load-state", self.state, "--max-tokens", "8",
                            "--save-state", self.state)["output_ids"]
        self.assertEqual(got, expected)
        names = sorted(os.listdir(self.dir))
        self.assertEqual(len(names), 2, names)  # the head and one segment: older ones removed
        self.assertTrue(names[1].startswith("state.bin.seg-"), names)

    def test_save_and_resume_under_a_streaming_budget_continue_exactly(self):
        # Memory is a latency dial: a state saved and resumed while weights stream from disk
        # continues exactly like the all-resident uninterrupted run.
        expected = self.full(SAMPLED)
        first = generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", "12", *SAMPLED, "--memory", "1MiB",
                         "--save-state", self.state)
        rest = generate(self.tiny, "--load-state", self.state, "--max-tokens", "20", "--memory", "1MiB")
        self.assertEqual(first["output_ids"] + rest["output_ids"], expected)

    def test_resume_with_the_same_sampling_flags_is_accepted(self):
        expected = self.full(SAMPLED)
        generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", "10", *SAMPLED, "--save-state", self.state)
        rest = generate(self.tiny, "--load-state", self.state, "--max-tokens", "22", *SAMPLED)
        self.assertEqual(rest["output_ids"], expected[10:])

    def test_changed_sampling_is_refused_unless_overridden(self):
        expected = self.full(SAMPLED)
        generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", "10", *SAMPLED, "--save-state", self.state)
        p = run("generate", "--model", self.tiny, "--load-state", self.state, "--temperature", "0.5")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--temperature", p.stderr)
        self.assertIn("--override-sampling", p.stderr)
        # Overridden: the new seed restarts the RNG, so the continuation changes.
        other = generate(self.tiny, "--load-state", self.state, "--max-tokens", "22", "--override-sampling",
                         "--seed", "7")
        self.assertNotEqual(other["output_ids"], expected[10:])
        greedy = generate(self.tiny, "--load-state", self.state, "--max-tokens", "5", "--override-sampling",
                          "--temperature", "0")
        self.assertEqual(len(greedy["output_ids"]), 5)

    def test_prompt_and_state_together_or_neither_are_usage_errors(self):
        generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", "2", "--save-state", self.state)
        p = run("generate", "--model", self.tiny, "--load-state", self.state, "--prompt-ids", PROMPT)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--load-state", p.stderr)
        p = run("generate", "--model", self.tiny, "--max-tokens", "2")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--prompt-ids", p.stderr)
        p = run("generate", "--model", self.tiny, "--prompt-ids", PROMPT, "--override-sampling")
        self.assertEqual(p.returncode, 2, p.stderr)

    def refused(self, reason, m=None):
        p = run("generate", "--model", m or self.tiny, "--load-state", self.state, "--max-tokens", "3")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(reason, p.stderr)
        self.assertEqual(p.stdout, "")

    def test_damaged_missing_or_foreign_checkpoints_exit_3_with_the_reason(self):
        self.refused("no such file")
        generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", "5", "--save-state", self.state)
        with open(self.state, "rb") as f:
            pristine = f.read()
        damaged = bytearray(pristine)
        damaged[len(damaged) // 2] ^= 0x40  # inside a KDA layer's state
        with open(self.state, "wb") as f:
            f.write(damaged)
        self.refused("checksum mismatch in section 'KDAS'")
        with open(self.state, "wb") as f:
            f.write(pristine[:1000])
        self.refused("truncated")
        with open(self.state, "wb") as f:
            f.write(pristine)
        self.refused("another model", model("tiny-bf16"))
        generate(self.tiny, "--load-state", self.state, "--max-tokens", "1")  # and the pristine one loads

    def test_zero_tokens_saves_the_prompt_state(self):
        expected = self.full(GREEDY)
        first = generate(self.tiny, "--prompt-ids", PROMPT, "--max-tokens", "0", "--save-state", self.state)
        self.assertEqual(first["output_ids"], [])
        again = generate(self.tiny, "--load-state", self.state, "--max-tokens", "0", "--save-state", self.state)
        self.assertEqual(again["saved_state"]["position"], 3)
        rest = generate(self.tiny, "--load-state", self.state, "--max-tokens", str(TOKENS))
        self.assertEqual(rest["output_ids"], expected)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--make-model", required=True, help="tests/reference/make_model.py")
    ap.add_argument("--work", required=True, help="directory for generated models and checkpoints")
    a, rest = ap.parse_known_args()
    BIN, MAKE_MODEL, WORK = a.bin, a.make_model, a.work
    unittest.main(argv=[sys.argv[0]] + rest)
