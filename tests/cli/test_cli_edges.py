#!/usr/bin/env python3
"""The command line's rough edges (issue 34), each a regression test: "did you mean" for
commands and options and unexpected arguments in the order given; a repeatable option does
not swallow the positional after it; `results --write` refuses --out/--format; sizes need a
unit; `run --memory` says why not; `--until` states the date and refuses more than 24 h; a
truncated model file fails the item at once naming the file and offset; the run's end names
failed items' jobs by id and name, in the singular where one; `run --output json`."""
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("cli-edges-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


def nightjar(*args, env=None):
    return subprocess.run([ARGS.bin, *args], capture_output=True, text=True, timeout=300, env=env)


class CliEdges(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def spec(self, name="job", model=None, n=1, **job):
        return njtest.write_spec(os.path.join(self.dir, f"{name}.yaml"), name, model or MODEL,
                                 [{"id": f"i{k}", "prompt_ids": [3 + k, 5], "max_tokens": 3} for k in range(n)],
                                 **job)

    def test_did_you_mean_a_command(self):
        p = nightjar("stauts")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown command 'stauts' (did you mean 'status'?)", p.stderr)
        p = nightjar("--home", self.nj.home, "sbumit", "x.yaml")
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean 'submit'?", p.stderr)
        p = nightjar("stauts", "--output", "json")
        self.assertEqual(json.loads(p.stdout)["error"]["code"], 2)
        self.assertIn("did you mean 'status'?", json.loads(p.stdout)["error"]["message"])

    def test_did_you_mean_an_option_and_arguments_in_order(self):
        p = nightjar("generate", "--model", MODEL, "--prompt-ids", "1,2", "--temp", "0.5")
        self.assertEqual(p.returncode, 2)
        self.assertIn("generate: unknown option --temp (did you mean --temperature?)", p.stderr)
        spec = self.spec()
        p = nightjar("validate", spec, "first", "second")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unexpected arguments: first second", p.stderr, "in the order given")

    def test_a_repeatable_option_does_not_swallow_the_positional(self):
        spec = self.spec()
        p = nightjar("validate", "--allow-outputs", self.dir, spec)
        self.assertEqual(p.returncode, 0, p.stderr)
        job = self.nj.submit(spec)
        p = nightjar("report", "--home", self.nj.home, str(job))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("job 1 'job'", p.stdout)

    def test_results_write_refuses_out_and_format(self):
        job = self.nj.submit(self.spec())
        for extra in (["--out", os.path.join(self.dir, "x.jsonl")], ["--format", "csv"]):
            p = self.nj.run("results", str(job), "--write", *extra)
            self.assertEqual(p.returncode, 2, (extra, p.stderr))
            self.assertIn("does not go with --write", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "x.jsonl")))

    def test_sizes_need_a_unit(self):
        for args in (["generate", "--model", MODEL, "--prompt-ids", "1", "--memory", "16"],
                     ["plan", "--model", MODEL, "--memory", "16"],
                     ["submit", "--openai-batch", "x.jsonl", "--model", MODEL, "--memory", "2.5",
                      "--home", self.nj.home]):
            p = nightjar(*args)
            # As for any other bad --memory value: generate reports it as invalid input (3).
            self.assertEqual(p.returncode, 3 if args[0] == "generate" else 2, (args, p.stderr))
            self.assertIn("has no unit", p.stderr)
        p = nightjar("plan", "--model", MODEL, "--memory", "1073741824B", "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_run_memory_says_why_not(self):
        self.nj.submit(self.spec())
        p = self.nj.run("run", "--drain", "--memory", "1GiB")
        self.assertEqual(p.returncode, 2)
        self.assertIn("memory budget is part of the job", p.stderr)

    def test_until_states_its_date_and_refuses_more_than_a_day(self):
        self.nj.submit(self.spec())
        p = self.nj.run("run", "--drain", "--until", "07:00", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, r"until 07:00 \(\d{4}-\d\d-\d\d 07:00 \S+, in ")
        for when in ("2099-01-01 07:00", "2001-01-01 07:00", "tomorrow"):
            p = self.nj.run("run", "--drain", "--until", when)
            self.assertEqual(p.returncode, 2, (when, p.stderr))
            self.assertIn("--until", p.stderr)

    def test_a_truncated_model_file_fails_the_item_at_once(self):
        model = os.path.join(self.dir, "model-cut")
        shutil.copytree(MODEL, model)
        job = self.nj.submit(self.spec("cut", model=model, n=2, max_attempts=3))
        (shard,) = glob.glob(os.path.join(model, "*.safetensors"))
        with open(shard, "rb") as f:
            header = 8 + struct.unpack("<Q", f.read(8))[0]
        size = os.path.getsize(shard)
        os.truncate(shard, header + (size - header) // 2)
        p = self.nj.run("run", "--drain", "--retry-seconds", "30", *RUN, "--output", "json")
        self.assertEqual(p.returncode, 4, p.stderr)
        items = self.nj.status(job)["items"]
        self.assertEqual([(i["state"], i["attempts"]) for i in items], [("failed", 1), ("failed", 1)],
                         "no backoff, no second attempt")
        self.assertIn(os.path.basename(shard), items[0]["last_error"])
        self.assertRegex(items[0]["last_error"], r"offset|past the file|truncated")
        # The run's end names the items and their job by id and name.
        self.assertIn(f"2 items failed for good during this run: job {job} (cut): i0, i1", p.stderr)
        summary = json.loads(p.stdout)
        self.assertEqual((summary["done"], summary["failed"]), (0, 2))
        self.assertEqual(summary["failed_items"][0]["job"], {"id": job, "name": "cut"})

    def test_doctor_checks_a_model_directory(self):
        p = nightjar("doctor", "--dir", self.dir, "--probe-size", "4MiB", "--no-memory-probe", "--model", MODEL,
                     "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        m = json.loads(p.stdout)["model"]
        with open(os.path.join(MODEL, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(m["vocab"], config.get("text_config", config)["vocab_size"])
        self.assertGreater(m["tensors"], 0)
        self.assertGreater(m["min_memory_bytes"], 0)
        cut = os.path.join(self.dir, "model-cut")
        shutil.copytree(MODEL, cut)
        (shard,) = glob.glob(os.path.join(cut, "*.safetensors"))
        os.truncate(shard, os.path.getsize(shard) - 100)
        p = nightjar("doctor", "--dir", self.dir, "--probe-size", "4MiB", "--no-memory-probe", "--model", cut)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(shard, p.stderr)

    def test_run_output_json_and_plurals(self):
        job = self.nj.submit(self.spec(n=1))
        p = self.nj.run("run", "--drain", "--batch", "1", *RUN, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.endswith("}\n"))
        s = json.loads(p.stdout)
        self.assertEqual((s["end_reason"], s["done"], s["failed"], s["tokens"]), ("queue empty", 1, 0, 3))
        for key in ("passes", "bytes_read", "seconds", "max_batch", "failed_items"):
            self.assertIn(key, s)
        self.assertIn("1 item done", p.stderr)
        self.assertIn("up to 1 item per pass", p.stderr)
        self.assertNotIn("1 items", p.stderr)
        p = self.nj.run("run", "--help")
        self.assertNotIn("one sequence at a time", p.stdout)
        self.assertEqual(self.nj.results(job)[0]["status"], "done")


if __name__ == "__main__":
    njtest.main(globals())
