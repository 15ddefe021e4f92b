#!/usr/bin/env python3
"""`nightjar generate --prompts-file`: many prompts decoded together, each sequence's tokens
equal to what `generate --prompt-ids` (or `--prompt`) gives it alone, greedy and sampled,
resident and under a memory budget, for several batch sizes; and the input contract (bad
lines are refused naming the file and line).

On a generated `demo` model (KDA, MLA, MXFP4 MoE, a real tokenizer), so text prompts and
the end-of-sequence stop are exercised too.
"""
import argparse, json, os, subprocess, sys, unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import njtest  # noqa: E402

BIN = None
MODEL = None


def nightjar(*args, check=True):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError("nightjar %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


PROMPTS = [
    {"id": "a", "prompt_ids": [3, 7, 11]},
    {"id": "b", "prompt": "Once upon a time", "max_tokens": 9},
    {"id": "c", "prompt_ids": list(range(5, 45)), "max_tokens": 3},
    {"id": "d", "prompt": "The billing page shows a double charge.", "temperature": 0.9, "seed": 7},
    {"id": "e", "prompt_ids": [100], "temperature": 1.2, "seed": 123, "max_tokens": 12},
    {"id": "f", "prompt": "Hello", "max_tokens": 0},
    {"id": "g", "prompt_ids": [42, 42, 42, 42, 42, 42, 42], "temperature": 0.7, "seed": 99, "max_tokens": 5},
]
DEFAULTS = {"max_tokens": 6, "top_k": 20, "top_p": 0.95}
FLAGS = [a for k, v in DEFAULTS.items() for a in ("--" + k.replace("_", "-"), str(v))]


def write_prompts(path, prompts):
    with open(path, "w") as f:
        for p in prompts:
            f.write(json.dumps(p) + "\n")
    return path


def solo(p, extra):
    """What `generate` gives one prompt alone."""
    args = ["generate", "--model", MODEL, "--output", "json", *extra]
    if "prompt_ids" in p:
        args += ["--prompt-ids", ",".join(map(str, p["prompt_ids"]))]
    else:
        args += ["--prompt", p["prompt"]]
    settings = dict(DEFAULTS)
    settings.update({k: p[k] for k in ("max_tokens", "temperature", "seed") if k in p})
    for k, v in settings.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    return json.loads(nightjar(*args).stdout)


class GenerateBatch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = njtest.scratch_dir("generate-batch-")
        cls.prompts = write_prompts(os.path.join(cls.dir, "prompts.jsonl"), PROMPTS)
        cls.alone = {p["id"]: solo(p, []) for p in PROMPTS}
        plan = json.loads(nightjar("plan", "--model", MODEL, "--max-context", "64", "--batch", "3",
                                   "--prefill-chunk", "16", "--output", "json").stdout)
        cls.min3 = plan["min_memory_bytes"]

    def batched(self, *extra):
        out = json.loads(nightjar("generate", "--model", MODEL, "--prompts-file", self.prompts, "--output", "json",
                                  *FLAGS, *extra).stdout)
        self.assertEqual([r["id"] for r in out["results"]], [p["id"] for p in PROMPTS], "results in input order")
        return out

    def check_equal(self, out):
        for r in out["results"]:
            want = self.alone[r["id"]]
            self.assertEqual(r["output_ids"], want["output_ids"], r["id"])
            self.assertEqual(r["output_text"], want["output_text"], r["id"])
            self.assertEqual(r["finish_reason"] == "stop", want["stopped_at_eos"], r["id"])

    def test_every_batch_size_gives_each_sequence_its_solo_tokens(self):
        for batch in ("1", "2", "3", "7"):
            with self.subTest(batch=batch):
                out = self.batched("--batch", batch)
                self.assertEqual(out["batch"], int(batch))
                self.check_equal(out)
                if int(batch) > 1:
                    self.assertGreater(out["stats"]["max_sequences_per_pass"], 1)

    def test_under_a_memory_budget_with_prefill_mixed_into_decode_passes(self):
        for budget in (self.min3, 2 * self.min3):
            with self.subTest(budget=budget):
                out = self.batched("--batch", "3", "--memory", f"{budget}B", "--prefill-chunk", "16")
                self.check_equal(out)
                self.assertGreater(out["stats"]["bytes_read"]["experts"], 0)

    def test_default_batch_is_what_the_budget_holds(self):
        out = self.batched("--memory", f"{self.min3}B", "--prefill-chunk", "16")
        self.assertGreaterEqual(out["batch"], 3)
        self.check_equal(out)

    def test_usage_is_shared_by_rows_and_sums_to_the_run(self):
        out = self.batched("--batch", "4")
        total = sum(r["usage"]["compute_s"] for r in out["results"])
        self.assertAlmostEqual(total, out["stats"]["compute_s"], delta=1e-6 + 1e-6 * total)
        self.assertLessEqual(max(r["usage"]["max_batch"] for r in out["results"]), 4)

    def test_bad_lines_are_refused_naming_the_file_and_line(self):
        cases = [
            ('{"id": "x", "prompt_ids": [1]}\nnot json\n', ":2: not JSON"),
            ('{"id": "x", "prompt_ids": [1]}\n{"id": "x", "prompt_ids": [2]}\n', ":2: id 'x' appears twice"),
            ('{"prompt_ids": [1]}\n', ":1: 'id' must be"),
            ('{"id": "x", "prompt_ids": [1], "prompt": "a"}\n', ":1: give exactly one"),
            ('{"id": "x", "prompt_ids": [999999]}\n', ":1: 'prompt_ids' holds 999999"),
            ('{"id": "x", "prompt_ids": [1], "colour": 1}\n', ":1: unknown key 'colour'"),
            ('\n\n', "no prompts"),
        ]
        for i, (text, message) in enumerate(cases):
            with self.subTest(message=message):
                path = os.path.join(self.dir, "bad-%d.jsonl" % i)
                with open(path, "w") as f:
                    f.write(text)
                p = nightjar("generate", "--model", MODEL, "--prompts-file", path, check=False)
                self.assertEqual(p.returncode, 3, p.stderr)
                self.assertIn(path + message if message.startswith(":") else message, p.stderr)
        p = nightjar("generate", "--model", MODEL, "--prompts-file", self.prompts, "--prompt-ids", "1", check=False)
        self.assertEqual(p.returncode, 2)
        p = nightjar("generate", "--model", MODEL, "--prompt-ids", "1", "--batch", "2", check=False)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    args, rest = ap.parse_known_args()
    BIN = args.bin
    MODEL = njtest.make_model(os.path.join(njtest.scratch_dir("models-"), "demo"), preset="demo", seed=5)
    unittest.main(argv=[sys.argv[0], *rest])
