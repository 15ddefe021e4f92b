#!/usr/bin/env python3
"""Issue 16, bug 6: non-finite logits were sampled. With `routed_scaling_factor: 1e308` the
logits are NaN; `generate` emitted token 0 and exited 0, and a run would have written
garbage all night. Now every pass checks its logits: `generate` exits 1 with "non-finite
logits at position P", and under `run` the item fails at once (the arithmetic is
deterministic: another attempt would only repeat it) with that error."""
import json
import os
import shutil
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("nonfinite-")
    good = njtest.make_model(os.path.join(WORK, "model"))
    MODEL = os.path.join(WORK, "model-nan")
    shutil.copytree(good, MODEL)
    path = os.path.join(MODEL, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["text_config"]["routed_scaling_factor"] = 1e308
    with open(path, "w") as f:
        json.dump(config, f)


class NonFiniteLogits(unittest.TestCase):
    def test_generate_exits_1_naming_the_position(self):
        p = subprocess.run([ARGS.bin, "generate", "--model", MODEL, "--prompt-ids", "3,7,11", "--max-tokens", "4",
                            "--threads", "1", "--output", "json"], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("non-finite logits at position", p.stderr)
        self.assertNotIn("output_ids", p.stdout, "no tokens are reported")

    def test_a_run_fails_the_item_with_the_error_at_once(self):
        home = os.path.join(WORK, "home")
        nj = njtest.Nightjar(ARGS.bin, home)
        spec = njtest.write_spec(os.path.join(WORK, "job.yaml"), "nan", MODEL,
                                 [{"id": "a", "prompt_ids": [3, 7, 11], "max_tokens": 8},
                                  {"id": "b", "prompt_ids": [5], "max_tokens": 8}], max_attempts=3)
        job = nj.submit(spec)
        p = nj.run("run", *RUN, "--drain")
        self.assertNotEqual(p.returncode, 0, "items failed during the run")
        results = nj.results(job)
        for r in results:
            self.assertEqual(r["status"], "failed", r)
            self.assertIn("non-finite logits at position", r["error"])
            self.assertEqual(r["attempts"], 1, "one attempt: another would only repeat it")
            self.assertEqual(r["output_ids"], None)
        self.assertEqual(nj.query("SELECT count(*) FROM tokens")[0][0], 0, "no token was stored")


if __name__ == "__main__":
    njtest.main(globals())
