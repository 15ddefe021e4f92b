#!/usr/bin/env python3
"""`speculative:` in `run` and `generate --prompts-file --speculative ngram`, end to end on a
generated tiny model: a job with `speculative: ngram` and the same job with `off` give every
item the same tokens, which are also a solo plain `generate`'s (greedy and seeded sampling,
different prompt and output lengths, in one batch); the items' `engine.speculation` counts
passes, drafted and accepted tokens (each token after the first comes from a pass or an
accepted draft), the off job's are zero, and the run's `run_ended` totals add up the items';
`auto` never speculates with every weight resident (speculation_pays); and the batched
`generate --prompts-file` gives each prompt its plain tokens with speculation on.

The model's weights are random, so its output seldom repeats: with a vocabulary of 8 tokens
prompt lookup still finds n-grams to draft from, and by chance some of its drafts are what
the model draws. The test checks that some drafts were accepted, so that it exercises
verification (accepted, rejected and partly accepted passes), not only plain passes."""
import json
import os
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000", "--drain"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("run-spec-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"), extra=("--vocab", "8"))


def items():
    """Greedy and seeded items of different prompt and output lengths."""
    out = []
    for k in range(6):
        prompt = [(k * 29 + i * 13 + 5) % 8 for i in range(2 + (k * 7) % 11)]
        item = {"id": f"it{k}", "prompt_ids": prompt, "max_tokens": 40 + (k * 17) % 50}
        if k % 3 == 1:
            item.update({"temperature": 0.8, "seed": 300 + k})
        out.append(item)
    return out


def speculation(result):
    return result["engine"]["speculation"]


class RunSpeculative(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def spec(self, name, its, **job):
        return njtest.write_spec(os.path.join(self.dir, f"{name}.yaml"), name, MODEL, its, **job)

    def test_ngram_and_off_give_every_item_its_plain_tokens(self):
        its = items()
        on = self.nj.submit(self.spec("on", its, speculative="ngram"))
        off = self.nj.submit(self.spec("off", its, speculative="off"))
        p = self.nj.run("run", *RUN, "--batch", "4")
        self.assertEqual(p.returncode, 0, p.stderr)
        on_results = {r["custom_id"]: r for r in self.nj.results(on)}
        off_results = {r["custom_id"]: r for r in self.nj.results(off)}
        for it in its:
            with self.subTest(item=it["id"]):
                a, b = on_results[it["id"]], off_results[it["id"]]
                self.assertEqual(a["status"], "done")
                self.assertEqual(b["status"], "done")
                self.assertEqual(a["output_ids"], b["output_ids"])
                self.assertEqual(a["output_ids"], njtest.reference_output(ARGS.bin, MODEL, it))
                s = speculation(a)
                self.assertGreater(s["passes"], 0)
                self.assertLessEqual(s["accepted"], s["drafted"])
                # Every token but the first is a pass's or an accepted draft's (no end-of-
                # sequence token: the model has no tokenizer).
                self.assertEqual(s["passes"] + s["accepted"] + 1, len(a["output_ids"]))
                self.assertEqual(a["engine"]["decode_steps"], s["passes"])
                self.assertEqual(speculation(b), {"passes": 0, "drafted": 0, "accepted": 0})
                self.assertEqual(b["engine"]["decode_steps"], len(b["output_ids"]) - 1)
        accepted = sum(speculation(r)["accepted"] for r in on_results.values())
        drafted = sum(speculation(r)["drafted"] for r in on_results.values())
        self.assertGreater(accepted, 0, "some drafts were accepted (the test exercises verification)")
        (ended,) = [d for _, _, d in self.nj.events("run_ended")]
        self.assertEqual(ended["speculation"], {
            "passes": sum(speculation(r)["passes"] for r in on_results.values()),
            "drafted": drafted, "accepted": accepted})
        # Drafts are rows of the passes: every row belongs to one item.
        fed = sum(r["engine"]["tokens_fed"] for r in list(on_results.values()) + list(off_results.values()))
        self.assertEqual(fed, ended["rows"])

    def test_auto_does_not_speculate_with_every_weight_resident(self):
        its = items()[:2]
        job = self.nj.submit(self.spec("auto", its))  # speculative: auto is the default
        p = self.nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        for r in self.nj.results(job):
            self.assertEqual(speculation(r), {"passes": 0, "drafted": 0, "accepted": 0})

    def test_generate_prompts_file_speculates_with_plain_tokens(self):
        its = items()
        path = os.path.join(self.dir, "prompts.jsonl")
        with open(path, "w") as f:
            for it in its:
                line = {"id": it["id"], "prompt_ids": it["prompt_ids"], "max_tokens": it["max_tokens"]}
                if "seed" in it:
                    line.update({"temperature": it["temperature"], "seed": it["seed"]})
                f.write(json.dumps(line) + "\n")
        base = [ARGS.bin, "generate", "--model", MODEL, "--prompts-file", path, "--batch", "3", "--threads", "1",
                "--output", "json"]
        plain = json.loads(njtest.subprocess.run(base, capture_output=True, text=True, check=True).stdout)
        spec = json.loads(njtest.subprocess.run(base + ["--speculative", "ngram", "--draft-tokens", "4"],
                                                capture_output=True, text=True, check=True).stdout)
        self.assertEqual(spec["max_draft_tokens"], 4)
        accepted = 0
        for a, b in zip(spec["results"], plain["results"]):
            with self.subTest(item=a["id"]):
                self.assertEqual(a["id"], b["id"])
                self.assertEqual(a["output_ids"], b["output_ids"])
                s = a["speculation"]
                self.assertEqual(s["passes"] + s["accepted"] + 1, len(a["output_ids"]))
                accepted += s["accepted"]
                self.assertNotIn("speculation", b)
        self.assertGreater(accepted, 0)
        self.assertLess(spec["stats"]["passes"], plain["stats"]["passes"], "accepted drafts save passes")


if __name__ == "__main__":
    njtest.main(globals())
