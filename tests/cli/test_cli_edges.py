#!/usr/bin/env python3
"""The command line's rough edges (issue 34), each a regression test: "did you mean" for
commands and options and unexpected arguments in the order given; a repeatable option does
not swallow the positional after it; `results --write` refuses --out/--format; sizes need a
unit; `run --memory` says why not; `--until` states the date and refuses more than 24 h; a
truncated model file fails the item at once naming the file and offset; the run's end names
failed items' jobs by id and name, in the singular where one; `run --output json`.
The second round: `merge` and `slurm` with `--output json`; flags that would be silently
ignored are refused naming both; the run's log lines name jobs by id and name; `run --stats`;
an `--until HH:MM` that has just passed is refused; `status` keeps the attempts a retry
reset; an option before the command is named as such (CLI11 reported `--temp 0.5` there as
the command '0.5', and its own message listed unexpected arguments last first)."""
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import time
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
        later = time.strftime("%H:%M", time.localtime(time.time() + 2 * 3600))  # never "just passed"
        p = self.nj.run("run", "--drain", "--until", later, *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, rf"until {later} \(\d{{4}}-\d\d-\d\d {later} \S+, in ")
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


    def test_until_refuses_a_time_that_has_just_passed(self):
        self.nj.submit(self.spec())
        now = time.time()
        passed = time.strftime("%H:%M", time.localtime(now - 120))
        p = self.nj.run("run", "--drain", "--until", passed, *RUN)
        self.assertEqual(p.returncode, 2, p.stderr)
        tomorrow = time.strftime("%Y-%m-%d %H:%M", time.localtime(now - 120 + 24 * 3600))
        self.assertIn(f"--until: '{passed}' passed", p.stderr)
        self.assertIn(f"give the date: --until '{tomorrow}'", p.stderr)
        self.assertEqual(self.nj.status()["jobs"][0]["items"]["queued"], 1, "nothing ran")
        # The date and time it suggests is taken.
        p = self.nj.run("run", "--drain", "--until", tomorrow, *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_merge_and_slurm_answer_output_json(self):
        spec = self.spec(n=3)
        arr = os.path.join(self.dir, "arr")
        p = nightjar("slurm", spec, "--tasks", "1", "--out", arr, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.endswith("}\n"))
        s = json.loads(p.stdout)
        self.assertEqual(s, {"script": os.path.join(arr, "job.sbatch"), "array": arr, "name": "job",
                             "tasks": 1, "items": 3, "submitted": False, "slurm_job_id": None})
        out = os.path.join(self.dir, "merged.jsonl")
        # Without --out the records would go to stdout beside the summary.
        p = nightjar("merge", arr, "--output", "json")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--output json: needs --out", p.stderr)
        with open(os.path.join(arr, "results", "task-0.jsonl"), "w") as f:
            f.write(json.dumps({"custom_id": "i0", "status": "done", "output_ids": [1]}) + "\n")
            f.write(json.dumps({"custom_id": "i1", "status": "failed", "error": "boom"}) + "\n")
        p = nightjar("merge", arr, "--out", out, "--output", "json")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(p.stdout.endswith("}\n"))
        m = json.loads(p.stdout)
        self.assertEqual((m["items"], m["done"], m["complete"], m["written"], m["out"]), (3, 1, False, 0, None))
        self.assertEqual(m["gaps"], [{"task": 0, "no_file": False, "missing": ["i2"],
                                      "not_done": [{"custom_id": "i1", "status": "failed", "error": "boom"}]}])
        self.assertFalse(os.path.exists(out))
        with open(os.path.join(arr, "results", "task-0.jsonl"), "w") as f:
            for k in range(3):
                f.write(json.dumps({"custom_id": f"i{k}", "status": "done", "output_ids": [k]}) + "\n")
        p = nightjar("merge", arr, "--out", out, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        m = json.loads(p.stdout)
        self.assertEqual((m["done"], m["complete"], m["written"], m["out"], m["gaps"]), (3, True, 3, out, []))
        with open(out) as f:
            self.assertEqual([json.loads(line)["custom_id"] for line in f], ["i0", "i1", "i2"])

    def test_results_output_json_says_what_was_written(self):
        # (--write with --output json: cli_openai_batch, on a job with an --output-file)
        job = self.nj.submit(self.spec(n=2))
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        out = os.path.join(self.dir, "out.csv")
        p = self.nj.run("results", str(job), "--out", out, "--format", "csv", "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.endswith("}\n"))
        self.assertEqual(json.loads(p.stdout), {"job": {"id": job, "name": "job"}, "written": [out], "records": 2})
        p = self.nj.run("results", str(job), "--output", "json")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--output json: needs --out FILE or --write", p.stderr)
        self.assertIn("error", json.loads(p.stdout))

    def test_flags_that_would_be_ignored_are_refused_naming_both(self):
        spec = self.spec()
        batch = os.path.join(self.dir, "batch.jsonl")
        with open(batch, "w") as f:
            f.write(json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}) + "\n")
        prompts = os.path.join(self.dir, "prompts.jsonl")
        with open(prompts, "w") as f:
            f.write(json.dumps({"id": "p", "prompt_ids": [1, 2]}) + "\n")
        home = ["--home", self.nj.home]
        cases = [
            (["submit", spec, "--model", MODEL, *home], "--model", "--openai-batch"),
            (["submit", spec, "--max-tokens", "5", *home], "--max-tokens", "--openai-batch"),
            (["submit", "--openai-batch", batch, "--model", MODEL, "--allow-outputs", self.dir, *home],
             "--allow-outputs", "--openai-batch"),
            (["plan", spec, "--model", MODEL], "--model", "job spec"),
            (["plan", spec, "--decode-gbps", "4"], "--decode-gbps", "job spec"),
            (["plan", "--model", MODEL, "--schedule", "sweep"], "--schedule", "--model"),
            (["plan", "--model", MODEL, *home], "--home", "--model"),
            (["generate", "--model", MODEL, "--prompt-ids", "1", "--kda-rollback", "snapshots"],
             "--kda-rollback", "--speculative"),
            (["generate", "--model", MODEL, "--prompts-file", prompts, "--override-sampling"],
             "--override-sampling", "--prompts-file"),
            (["report", "--output", "json", "--items", "5", *home], "--items", "--output json"),
            (["results", "1", "--write", "--format", "csv", *home], "--format", "--write"),
            (["validate", "--openai-batch", batch, "--model", MODEL, "--allow-outputs", self.dir],
             "--allow-outputs", "--openai-batch"),
        ]
        self.nj.submit(spec)
        for args, flag, other in cases:
            with self.subTest(args=args):
                p = nightjar(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
                line = next((l for l in p.stderr.splitlines() if flag + ":" in l), "")
                self.assertIn(other, line, p.stderr)

    def test_run_log_lines_name_jobs_by_id_and_name(self):
        job = self.nj.submit(self.spec("named", n=1))
        p = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"job {job} (named) item i0: starting", p.stderr)
        self.assertIn(f"job {job} (named) item i0: done", p.stderr)
        self.assertNotIn(f"job {job} 'named'", p.stderr)
        p = self.nj.run("submit", self.spec("second", n=2))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"queued job {job + 1} (second): 2 items", p.stderr)

    def test_run_stats(self):
        self.nj.submit(self.spec(n=2))
        p = self.nj.run("run", "--drain", "--stats", *RUN, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        summary = json.loads(p.stdout)
        (line,) = [l for l in p.stderr.splitlines() if l.startswith("stats: ")]
        self.assertRegex(line, rf"read \S+ \S+ in {summary['passes']} pass(es)?, ")
        self.assertIn(f"{summary['rows']} rows fed, up to {summary['max_batch']} item", line)
        self.assertIn(f"{summary['tokens']} output tokens", line)
        self.assertIn("peak RSS", line)

    def test_status_keeps_the_attempts_a_retry_reset(self):
        model = os.path.join(self.dir, "model-cut")
        shutil.copytree(MODEL, model)
        job = self.nj.submit(self.spec("cut", model=model, n=1, max_attempts=3))
        (shard,) = glob.glob(os.path.join(model, "*.safetensors"))
        saved = os.path.join(self.dir, "whole.safetensors")
        shutil.copy(shard, saved)
        os.truncate(shard, os.path.getsize(shard) // 2)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 4)
        p = self.nj.run("retry", str(job))
        self.assertEqual(p.returncode, 0, p.stderr)
        (item,) = self.nj.status(job)["items"]
        self.assertEqual((item["state"], item["attempts"], item["failed_attempts"], item["retries"]),
                         ("queued", 0, 1, 1))
        p = self.nj.run("status", str(job))
        self.assertEqual(p.returncode, 0, p.stderr)
        header, row = [l for l in p.stdout.splitlines() if l.startswith(("ITEM", "i0"))]
        self.assertEqual(row.split()[3:5], ["1", "1"], header)  # ATTEMPTS, RETRIES
        shutil.copy(saved, shard)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        (item,) = self.nj.status(job)["items"]
        self.assertEqual((item["state"], item["failed_attempts"], item["retries"]), ("done", 1, 1))

    def test_generate_at_a_temperature_prints_the_tokens_in_order(self):
        args = ["generate", "--model", MODEL, "--prompt-ids", "3,5,7", "--temperature", "0.5", "--seed", "9",
                "--max-tokens", "8", "--threads", "1"]
        text = nightjar(*args)
        js = nightjar(*args, "--output", "json")
        self.assertEqual((text.returncode, js.returncode), (0, 0), text.stderr + js.stderr)
        self.assertEqual([int(t) for t in text.stdout.split()], json.loads(js.stdout)["output_ids"])

    def test_an_option_before_the_command_is_named(self):
        p = nightjar("--temp", "0.5", "generate", "--model", MODEL, "--prompt-ids", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown option --temp", p.stderr)
        self.assertNotIn("'0.5'", p.stderr)

if __name__ == "__main__":
    njtest.main(globals())
