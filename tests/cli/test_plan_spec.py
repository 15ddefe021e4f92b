#!/usr/bin/env python3
"""`nightjar plan SPEC.yaml`: a job predicted as `run` would do it. Its fields and their
types, the deadline, usage errors, and the replay itself: the passes it predicts are the
passes `run` then makes, for a generate job one at a time and batched, and for a
classification in windows (the pass count is exact; bytes and seconds are the cost model's)."""
import json
import os
import subprocess
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = TOK_MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000", "--drain"]
FIELDS = {"job": str, "items": int, "batch": int, "passes": int, "predicted_bytes": (int, float),
          "predicted_seconds": (int, float)}


def setUpModule():
    global WORK, MODEL, TOK_MODEL
    WORK = njtest.scratch_dir("plan-spec-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")


def generate_items(n, longest=80):
    return [{"id": f"g{k}", "prompt_ids": [(k * 13 + i * 5 + 1) % 256 for i in range(3 + (k * 29) % longest)],
             "max_tokens": 5 + (k * 7) % 19} for k in range(n)]


class PlanSpec(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)

    def plan(self, spec, *args, ok=True):
        p = subprocess.run([ARGS.bin, "plan", spec, *args], capture_output=True, text=True, timeout=600)
        if ok:
            self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def plan_json(self, spec, *args):
        return json.loads(self.plan(spec, *args, "--output", "json").stdout)

    def run_passes(self, spec, *args):
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-" + "-".join(args or ("default",))))
        job = nj.submit(spec)
        p = nj.run("run", *RUN, *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(all(r["status"] == "done" for r in nj.results(job)))
        (ended,) = [d for _, _, d in nj.events("run_ended")]
        report = nj.run("report", str(job))
        self.assertEqual(report.returncode, 0, report.stderr)
        # The morning report shows the batch over the night once items shared passes.
        self.assertEqual("batch over time:" in report.stdout, ended["max_batch"] > 1, report.stdout)
        return ended

    def test_fields_and_deadline(self):
        spec = njtest.write_spec(os.path.join(self.dir, "g.yaml"), "gen", MODEL, generate_items(3))
        j = self.plan_json(spec)
        for key, kind in FIELDS.items():
            self.assertIsInstance(j[key], kind, key)
        self.assertEqual(j["job"], "gen")
        self.assertEqual(j["items"], 3)
        self.assertIsNone(j["finishes_by_deadline"])
        self.assertGreater(j["predicted_seconds"], 0)
        self.assertGreater(j["predicted_bytes"], 0)  # the model is read when it opens
        until = self.plan_json(spec, "--until", "07:00")
        self.assertIs(until["finishes_by_deadline"], True, "a tiny job ends before the next 07:00")
        self.assertEqual(until["until"], "07:00")
        text = self.plan(spec, "--until", "07:00").stdout
        self.assertIn("finishes before it", text)
        self.assertIn("passes", text)
        # Compute counts the work outside the products, from probed element rates.
        self.assertGreater(j["predicted_element_seconds"], 0)
        self.assertLess(j["predicted_element_seconds"], j["predicted_compute_seconds"])
        for key in ("situ", "sigmoid", "exp", "norm", "axpy", "dot", "matvec", "kda", "top_k"):
            self.assertGreater(j["kernel_rates"]["element_ns"][key], 0, key)
        self.assertEqual(j["bandwidth_source"], "given")
        self.assertIsNone(j["disk_probe"])

    def test_the_disk_rate_measured_on_the_model_files(self):
        spec = njtest.write_spec(os.path.join(self.dir, "g.yaml"), "gen", MODEL, generate_items(2))
        j = self.plan_json(spec, "--measure-disk", "0.5")
        self.assertEqual(j["bandwidth_source"], "measured")
        probe = j["disk_probe"]
        self.assertGreaterEqual(probe["seconds"], 0.5)
        self.assertGreaterEqual(probe["passes"], 1, "a small model is read whole, and again")
        size = sum(os.path.getsize(os.path.join(MODEL, f)) for f in os.listdir(MODEL) if f.endswith(".safetensors"))
        self.assertGreaterEqual(probe["bytes"], size)
        self.assertEqual(j["bandwidth_gbps"], probe["second_half_gbps"])
        self.assertGreater(j["bandwidth_gbps"], 0)
        # The prediction's reads are at that rate.
        self.assertAlmostEqual(j["predicted_io_seconds"], j["predicted_bytes"] / (j["bandwidth_gbps"] * 1e9),
                               delta=1e-6 * j["predicted_io_seconds"] + 1e-9)
        text = self.plan(spec, "--measure-disk", "0.5").stdout
        self.assertIn("reading the model's files", text)

    def test_the_predicted_passes_are_the_passes_run_makes(self):
        # Prompts of at most 15 tokens: four items' chunks always fit one pass of 64 rows. (When
        # they do not, which waiter goes first among those a pass woke together is up to the
        # threads, and the count may differ by a pass or so.)
        items = generate_items(6, longest=13)
        spec = njtest.write_spec(os.path.join(self.dir, "g.yaml"), "gen", MODEL, items)
        one = self.plan_json(spec, "--batch", "1")
        chunks = sum((len(it["prompt_ids"]) + 63) // 64 for it in items)
        self.assertEqual(one["passes"], chunks + sum(it["max_tokens"] - 1 for it in items))
        self.assertEqual(self.run_passes(spec, "--batch", "1")["passes"], one["passes"])
        four = self.plan_json(spec, "--batch", "4")
        self.assertEqual(four["batch"], 4)
        self.assertLess(four["passes"], one["passes"])
        ended = self.run_passes(spec, "--batch", "4")
        self.assertEqual(ended["passes"], four["passes"])
        self.assertEqual(ended["rows"], four["rows"])

    def test_a_classification_in_windows(self):
        docs = ["I was charged twice for my March subscription.",
                "The app crashes when I open the settings page, every single time since the update.",
                "Please add a dark mode.", "What are your opening hours on holidays?",
                "My invoice shows the wrong company address."]
        labels = ["billing", "bug", "feature request", "question"]
        lines = ["name: triage", f"model: {json.dumps(TOK_MODEL)}", "kind: classify",
                 "template: \"Classify the ticket as one of: {labels}.\\nTicket: {document}\\nLabel:\\n\"",
                 f"labels: {json.dumps(labels)}", "items:"]
        lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(docs)]
        spec = os.path.join(self.dir, "triage.yaml")
        with open(spec, "w") as f:
            f.write("\n".join(lines) + "\n")
        for batch in ("1", "5"):
            j = self.plan_json(spec, "--batch", batch)
            self.assertEqual(j["items"], len(docs))
            ended = self.run_passes(spec, "--batch", batch)
            self.assertEqual(ended["passes"], j["passes"], f"--batch {batch}")
            self.assertEqual(ended["rows"], j["rows"], f"--batch {batch}")
        report = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home---batch-5")).run("report", "triage")
        self.assertRegex(report.stdout, r"per document: .* read,")

    def test_status_of_a_running_job_uses_the_cost_model(self):
        items = [{"id": f"s{k}", "prompt_ids": [k + 1, 7, 9], "max_tokens": 400} for k in range(4)]
        spec = njtest.write_spec(os.path.join(self.dir, "s.yaml"), "slow", MODEL, items)
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        job = nj.submit(spec)
        queued = nj.status(job)["job"]
        self.assertIsNone(queued["eta_s"], "nothing ran yet: no rate and no running item")
        proc = nj.popen("run", "--threads", "1", "--log-seconds", "1000", "--batch", "2")
        try:
            deadline = time.time() + 300
            while nj.query("SELECT COALESCE(MAX(tokens_done), 0) FROM items")[0][0] < 5:
                self.assertIsNone(proc.poll(), "run ended too early")
                self.assertLess(time.time(), deadline, "no tokens within 300 s")
                time.sleep(0.05)
            st = nj.status(job)["job"]
            self.assertEqual(st["state"], "running")
            self.assertEqual(st["eta_basis"], "plan")
            self.assertGreater(st["eta_s"], 0)
            text = nj.run("status")
            self.assertEqual(text.returncode, 0, text.stderr)
        finally:
            proc.terminate()
            proc.wait(timeout=120)

    def test_a_job_in_the_store_is_planned_as_its_spec(self):
        """Issue 34: `plan JOB` (a queued job, from the store) gives plan SPEC's JSON, for the
        work the job has left; a finished job, an unknown one and a missing home say so."""
        items = generate_items(4)
        spec = njtest.write_spec(os.path.join(self.dir, "g.yaml"), "gen", MODEL, items)
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        job = nj.submit(spec)
        want = self.plan_json(spec, "--threads", "1")
        for ref in (str(job), "gen"):
            got = json.loads(self.plan(ref, "--home", nj.home, "--threads", "1", "--output", "json").stdout)
            self.assertEqual(set(got), set(want), "the same JSON as plan SPEC")
            for key in ("job", "kind", "model", "memory_bytes", "items", "batch", "passes", "rows",
                        "prompt_tokens", "decode_tokens", "predicted_bytes"):
                self.assertEqual(got[key], want[key], key)
        # The global --home works too, and text.
        p = subprocess.run([ARGS.bin, "--home", nj.home, "plan", str(job)], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("gen", p.stdout)
        # Part of the job done: the plan covers what is left.
        p = nj.run("run", *RUN, "--max-items", "1", "--batch", "1")
        self.assertIn(p.returncode, (0,), p.stderr)
        left = json.loads(self.plan(str(job), "--home", nj.home, "--output", "json").stdout)
        self.assertEqual(left["items"], 3)
        p = nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.plan(str(job), "--home", nj.home, ok=False)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("no queued or running items", p.stderr)
        self.assertIn(f"job {job} (gen)", p.stderr)
        p = self.plan("nosuch", "--home", nj.home, ok=False)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("nosuch", p.stderr)
        missing = os.path.join(self.dir, "no-home")
        p = self.plan("gen", "--home", missing, ok=False)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(missing, p.stderr)
        self.assertFalse(os.path.exists(missing))
        p = self.plan(str(job), "--home", nj.home, "--memory", "1GiB", ok=False)
        self.assertEqual(p.returncode, 2, p.stderr)

    def test_an_openai_batch_file_is_planned_as_submit_would_queue_it(self):
        """Issue 34: `plan --openai-batch FILE --model DIR [--memory SIZE]` gives plan SPEC's
        JSON for the job `submit --openai-batch` would queue, equal to `plan JOB` of that job."""
        path = os.path.join(self.dir, "requests.jsonl")
        with open(path, "w") as f:
            for k in range(3):
                f.write(json.dumps({"custom_id": f"r{k}", "method": "POST", "url": "/v1/chat/completions",
                                    "body": {"messages": [{"role": "user", "content": "hello " * (k + 1)}],
                                             "max_tokens": 6 + k}}) + "\n")
        spec_like = json.loads(self.plan(
            njtest.write_spec(os.path.join(self.dir, "g.yaml"), "gen", MODEL, generate_items(1)),
            "--output", "json").stdout)
        p = subprocess.run([ARGS.bin, "plan", "--openai-batch", path, "--model", TOK_MODEL, "--memory", "1GiB",
                            "--threads", "1", "--output", "json"], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        self.assertEqual(set(got), set(spec_like), "the same JSON as plan SPEC")
        self.assertEqual((got["job"], got["kind"], got["items"], got["memory_bytes"]),
                         ("requests", "generate", 3, 1 << 30))
        self.assertEqual(got["decode_tokens"], 5 + 6 + 7, "max_tokens 6, 7, 8: the first from the prompt's pass")
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        p = nj.run("submit", "--openai-batch", path, "--model", TOK_MODEL, "--memory", "1GiB")
        self.assertEqual(p.returncode, 0, p.stderr)
        stored = json.loads(self.plan("requests", "--home", nj.home, "--threads", "1", "--output", "json").stdout)
        for key in ("items", "passes", "rows", "prompt_tokens", "decode_tokens", "predicted_bytes", "memory_bytes"):
            self.assertEqual(stored[key], got[key], key)
        for args in (["--openai-batch", path], ["--openai-batch", path, "--model", TOK_MODEL, "g.yaml"],
                     ["--openai-batch", path, "--model", TOK_MODEL, "--memory", "lots"]):
            p = subprocess.run([ARGS.bin, "plan", *args], capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
        bad = os.path.join(self.dir, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"custom_id": "a", "body": {}}\n')
        p = subprocess.run([ARGS.bin, "plan", "--openai-batch", bad, "--model", TOK_MODEL],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("bad.jsonl:1", p.stderr)

    def test_usage_errors(self):
        spec = njtest.write_spec(os.path.join(self.dir, "g.yaml"), "gen", MODEL, generate_items(1))
        for args, flag in ((["--memory", "1GiB"], "--memory"), (["--until", "25:00"], "--until"),
                           (["--model", MODEL], "--model"),
                           (["--measure-disk", "1", "--bandwidth", "2"], "--measure-disk"),
                           (["--measure-disk", "0"], "--measure-disk"), (["--threads", "0"], "--threads")):
            p = self.plan(spec, *args, ok=False)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(flag, p.stderr)
        p = subprocess.run([ARGS.bin, "plan"], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 2, p.stderr)
        bad = os.path.join(self.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write(f"name: x\nmodel: {json.dumps(MODEL)}\nkind: generate\nitems:\n  - {{id: a, prompt_ids: [1], colour: red}}\n")
        p = self.plan(bad, ok=False)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("bad.yaml:5", p.stderr)
        self.assertIn("colour", p.stderr)


if __name__ == "__main__":
    njtest.main(globals())
