#!/usr/bin/env python3
"""Issue 35: the second adversarial probe's findings, one test each (the crash cases are in
tests/crash/test_crash_attempts.py).
  1. an item a run takes over from a dead run and fails for good counts as failed (exit 4)
     and ends its job (declared outputs written), also when the run that failed it died;
  3. `generate --prompts-file` and `--prompt-file` apply the job paths' input limits;
  4. `run --batch N` without `memory:` is cut to what free memory holds;
  5. `generate --threads 100000` does not crash;
  6. `results --format csv` writes invalid UTF-8 as U+FFFD, as the JSON forms do;
  7. an output symlinked into the home that this submit creates is refused;
  8. a budget below the minimum fails the item for good at once (a lossless pack made after
     submit, `run --schedule sweep`), naming the minimum and what needs less;
  9. `generate --seed -1` is refused; `generate --memory 1` exits 3 like a spec's budget;
 10. the smaller points: a done item keeps no stale error; status's columns hold
     outputs_failed; a log file that cannot be written is said once; multi-line errors
     carry the prefix on every line; a YAML nesting bomb is named; a damaged raw pack names
     its unit (tests/unit/weights/pack_test.cpp).
"""
import csv
import io
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = TOK_MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
GEN = ["--threads", "1"]
TIMEOUT_S = 60  # far beyond what any command here needs once fixed
BIG = 16 * 2**20 + 1  # one byte over the 16 MiB a prompt may have
TEMPLATE = "Ticket: {document}\nLabel:"


def setUpModule():
    global WORK, MODEL, TOK_MODEL
    WORK = njtest.scratch_dir("round2-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-tok"), extra=["--tokenizer"])


def nightjar(*args, timeout=TIMEOUT_S, **kw):
    return subprocess.run([ARGS.bin, *args], capture_output=True, text=True, timeout=timeout, **kw)


def dead_owner():
    """A lease owner naming a process of this host that has exited (and was reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return f"{socket.gethostname()}/{p.pid}/1"


def sql(db, statement, args=()):
    con = sqlite3.connect(db, timeout=30)
    try:
        con.execute(statement, args)
        con.commit()
    finally:
        con.close()


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.nj = njtest.Nightjar(ARGS.bin, self.home)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def classify_spec(self, name, docs, outputs=None, **keys):
        lines = [f"name: {name}", f"model: {json.dumps(TOK_MODEL)}", "kind: classify",
                 f"template: {json.dumps(TEMPLATE)}", 'labels: ["billing", "bug"]']
        lines += [f"{k}: {json.dumps(v)}" for k, v in keys.items()]
        if outputs:
            lines.append(f"outputs: {json.dumps(outputs)}")
        lines.append("items:")
        lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(docs)]
        return self.write(f"{name}.yaml", "\n".join(lines) + "\n")


class TakenOverItemFailedForGood(Base):
    def test_a_killed_runs_last_attempt_is_counted_by_the_run_that_takes_it_over(self):
        # The probe's repro: a one-item job with max_attempts 1, its run killed mid-item.
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "one", MODEL,
                                 [{"id": "a", "prompt_ids": [3, 7, 11], "max_tokens": 3000}], max_attempts=1)
        self.nj.submit(spec)
        proc = self.nj.popen("run", "--drain", *RUN)
        deadline = time.monotonic() + TIMEOUT_S
        while not self.nj.query("SELECT 1 FROM items WHERE state = 'running' AND tokens_done > 0"):
            self.assertIsNone(proc.poll(), "the run ended before the item made progress")
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.005)
        proc.kill()
        proc.wait()
        p = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(p.returncode, 4, p.stderr)
        self.assertIn("0 items done, 1 failed", p.stderr)
        self.assertIn("item a: failed for good", p.stderr)
        (state, attempts), = self.nj.query("SELECT state, attempts FROM items")
        self.assertEqual((state, attempts), ("failed", 1))

    def test_a_classify_job_ended_by_a_take_over_writes_its_outputs(self):
        spec = self.classify_spec("takeover", ["I was charged twice."], {"jsonl": "out/labels.jsonl"},
                                  max_attempts=1)
        job = self.nj.submit(spec)
        sql(self.nj.db(), "UPDATE items SET state = 'running', lease_owner = ?, lease_expires = ?",
            (dead_owner(), time.time() + 600))
        p = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(p.returncode, 4, p.stderr)
        (outputs_state,), = self.nj.query("SELECT outputs_state FROM jobs")
        self.assertEqual(outputs_state, "written")
        with open(os.path.join(self.dir, "out", "labels.jsonl")) as f:
            self.assertEqual([json.loads(line)["status"] for line in f], ["failed"])
        self.assertEqual(self.nj.status(job)["job"]["state"], "failed")

    def test_a_job_whose_run_died_before_writing_its_outputs_gets_them_from_the_next_run(self):
        spec = self.classify_spec("late", ["I was charged twice."], {"csv": "out/labels.csv"})
        self.nj.submit(spec)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        # As if the run had died between the item's end and the write.
        os.remove(os.path.join(self.dir, "out", "labels.csv"))
        sql(self.nj.db(), "UPDATE jobs SET outputs_state = NULL, outputs_error = NULL, outputs_at = NULL")
        p = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "out", "labels.csv")))
        (outputs_state,), = self.nj.query("SELECT outputs_state FROM jobs")
        self.assertEqual(outputs_state, "written")


class GenerateInputLimits(Base):
    def test_prompts_file_dev_zero_is_refused_at_once(self):
        p = nightjar("generate", "--model", MODEL, "--prompts-file", "/dev/zero", *GEN)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("/dev/zero", p.stderr)
        self.assertIn("not a regular file", p.stderr)

    def test_a_prompt_file_over_16_mib_is_refused(self):
        big = self.write("big.txt", "a" * BIG)
        p = nightjar("generate", "--model", TOK_MODEL, "--prompt-file", big, *GEN)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(f"{big} is {BIG} bytes, more than the 16 MiB", p.stderr)
        with open(big) as stdin:
            p = nightjar("generate", "--model", TOK_MODEL, "--prompt-file", "-", *GEN, stdin=stdin)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("standard input", p.stderr)
        self.assertIn("more than the 16 MiB", p.stderr)

    def test_a_prompt_over_16_mib_in_a_prompts_file_is_refused_naming_its_line(self):
        path = self.write("prompts.jsonl", json.dumps({"id": "ok", "prompt": "hello"}) + "\n" +
                          json.dumps({"id": "big", "prompt": "a" * BIG}) + "\n")
        p = nightjar("generate", "--model", TOK_MODEL, "--prompts-file", path, *GEN)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(f"{path}:2:", p.stderr)
        self.assertIn("more than the 16 MiB", p.stderr)


class ResidentBatchIsCapped(Base):
    # An address space the tiny model and a modest batch fit in, and a batch of 100000
    # sequences does not.
    LIMIT = 2 << 30

    def test_run_batch_without_a_budget_is_cut_to_what_memory_holds(self):
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "big-batch", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2, 3], "max_tokens": 3}])
        job = self.nj.submit(spec)

        def limited():
            resource.setrlimit(resource.RLIMIT_AS, (self.LIMIT, self.LIMIT))
        p = subprocess.run(self.nj.cmd("run", "--drain", "--batch", "100000", *RUN), capture_output=True,
                           text=True, timeout=TIMEOUT_S, preexec_fn=limited)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--batch 100000", p.stderr)
        self.assertIn("holds at most", p.stderr)
        r, = self.nj.results(job)
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL,
                                                                  {"prompt_ids": [1, 2, 3], "max_tokens": 3}))


class GenerateThreads(Base):
    # The committed story model: its products are large enough to start a team of threads
    # (the tiny model's run on one).
    STORIES = os.path.join(njtest.REPO, "examples", "stories", "model")

    def test_generate_threads_100000_is_a_usage_error_not_a_crash(self):
        for cmd in ("generate", "logits"):
            p = nightjar(cmd, "--model", self.STORIES, "--prompt-ids", "1,2,3,4,5,6,7,8", "--threads", "100000")
            self.assertNotEqual(p.returncode, -signal.SIGSEGV, p.stderr)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--threads", p.stderr)
        # The most it accepts runs.
        p = nightjar("generate", "--model", self.STORIES, "--prompt-ids", "1,2,3,4,5,6,7,8", "--max-tokens", "2",
                     "--threads", "1024")
        self.assertEqual(p.returncode, 0, p.stderr)


class CsvUtf8(Base):
    def test_results_csv_writes_invalid_utf8_as_the_json_forms_do(self):
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "cut", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 2}])
        job = self.nj.submit(spec)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        # A generation cut inside a character: "ok" and the first two bytes of "€".
        sql(self.nj.db(), "UPDATE results SET output_text = CAST(X'6F6BE282' AS TEXT)")
        p = subprocess.run(self.nj.cmd("results", str(job), "--format", "csv"), capture_output=True, timeout=TIMEOUT_S)
        self.assertEqual(p.returncode, 0, p.stderr)
        text = p.stdout.decode("utf-8")  # raises on invalid UTF-8
        row, = list(csv.DictReader(io.StringIO(text)))
        jsonl, = self.nj.results(job)
        self.assertEqual(row["output_text"], jsonl["output_text"])
        self.assertIn("\ufffd", row["output_text"])


class OutputSymlinkIntoANewHome(Base):
    def test_an_output_linked_to_the_store_of_the_home_this_submit_creates_is_refused(self):
        os.makedirs(os.path.join(self.dir, "out"))
        link = os.path.join(self.dir, "out", "labels.jsonl")
        os.symlink(os.path.join(self.home, "nightjar.db"), link)  # the home does not exist yet
        spec = self.classify_spec("evil", ["I was charged twice."], {"jsonl": "out/labels.jsonl"})
        for cmd in (["validate", spec], ["submit", spec]):
            p = subprocess.run(self.nj.cmd(*cmd), capture_output=True, text=True, timeout=TIMEOUT_S)
            self.assertEqual(p.returncode, 3, f"{cmd[0]}: {p.stderr}")
            self.assertIn("outputs.jsonl", p.stderr)
            self.assertIn("inside the home", p.stderr)
            self.assertIn(os.path.join(self.home, "nightjar.db"), p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.home, "nightjar.db")) and self.nj.query(
            "SELECT 1 FROM jobs"), "nothing was submitted")


class BudgetBelowTheMinimum(Base):
    def min_memory(self, model, *extra):
        p = nightjar("plan", "--model", model, "--max-context", "64", "--output", "json", *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)["min_memory_bytes"]

    def test_a_lossless_pack_made_after_submit_fails_the_item_at_once(self):
        model = os.path.join(self.dir, "model")
        subprocess.run(["cp", "-r", MODEL, model], check=True)
        raw_min = self.min_memory(model)
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "packed-later", model,
                                 [{"id": "a", "prompt_ids": [1, 2, 3], "max_tokens": 4},
                                  {"id": "b", "prompt_ids": [4, 5], "max_tokens": 4}],
                                 memory=str(raw_min + (1 << 20)))
        self.nj.submit(spec)
        p = nightjar("pack", model, "--codec", "lossless")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater(self.min_memory(model), raw_min + (1 << 20), "the lossless pack needs more")
        # Failed for good at once: no backoff that --drain would wait out.
        p = self.nj.run("run", "--drain", "--retry-seconds", "3600", *RUN, timeout=TIMEOUT_S)
        self.assertEqual(p.returncode, 4, p.stderr)
        for state, attempts, error, retry_at in self.nj.query(
                "SELECT state, attempts, last_error, retry_at FROM items"):
            self.assertEqual(state, "failed")
            self.assertEqual(attempts, 1)
            self.assertIsNone(retry_at)
            self.assertIn("below the minimum of", error)
            self.assertIn("--codec raw", error)
            self.assertIn("--no-pack", error)

    def test_run_schedule_sweep_below_the_sweeps_minimum_fails_the_item_at_once(self):
        docs = ["I was charged twice for one order and nobody answers my mails. " * 20, "The app crashes."]
        spec = self.classify_spec("sweep", docs)
        minimum = {}
        for schedule in ("passes", "sweep"):
            p = nightjar("plan", spec, "--schedule", schedule, "--output", "json")
            self.assertEqual(p.returncode, 0, p.stderr)
            minimum[schedule] = json.loads(p.stdout)["min_memory_bytes"]
        self.assertLess(minimum["passes"], minimum["sweep"], "the sweep needs more than passes")
        budget = (minimum["passes"] + minimum["sweep"]) // 2  # enough for passes, not for a sweep
        spec = self.classify_spec("sweep", docs, memory=str(budget))
        self.nj.submit(spec)
        p = self.nj.run("run", "--drain", "--schedule", "sweep", "--retry-seconds", "3600", *RUN,
                        timeout=TIMEOUT_S)
        self.assertEqual(p.returncode, 4, p.stderr)
        for state, error, retry_at in self.nj.query("SELECT state, last_error, retry_at FROM items"):
            self.assertEqual(state, "failed")
            self.assertIsNone(retry_at)
            self.assertIn("a layer sweep needs at least", error)


class GenerateFlags(Base):
    def test_generate_seed_minus_one_is_a_usage_error(self):
        p = nightjar("generate", "--model", MODEL, "--prompt-ids", "1", "--seed", "-1", *GEN)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--seed", p.stderr)

    def test_generate_memory_below_the_minimum_exits_3(self):
        for extra in ([], ["--prompts-file", self.write("p.jsonl", '{"id": "a", "prompt_ids": [1]}\n')]):
            args = ["--prompt-ids", "1"] if not extra else extra
            p = nightjar("generate", "--model", MODEL, *args, "--memory", "1B", *GEN)
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn("--memory", p.stderr)
            self.assertIn("below the minimum", p.stderr)


class SmallerPoints(Base):
    def test_a_done_item_keeps_no_stale_error(self):
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "j", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 3}])
        job = self.nj.submit(spec)
        sql(self.nj.db(), "UPDATE items SET state = 'running', lease_owner = ?, lease_expires = ?",
            (dead_owner(), time.time() + 600))
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        item, = self.nj.status(job)["items"]
        self.assertEqual(item["state"], "done")
        self.assertIsNone(item["last_error"])
        self.assertEqual(self.nj.events("lease_reclaimed")[0][2]["owner"].split("/")[0], socket.gethostname())

    def test_status_columns_hold_outputs_failed(self):
        spec = self.classify_spec("cols", ["I was charged twice."], {"jsonl": "out/labels.jsonl"})
        self.nj.submit(spec)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        sql(self.nj.db(), "UPDATE jobs SET outputs_state = 'failed', outputs_error = 'disk full'")
        p = self.nj.run("status")
        self.assertEqual(p.returncode, 0, p.stderr)
        header, row = p.stdout.splitlines()[:2]
        self.assertIn("outputs_failed", row)
        self.assertEqual(row.index("1/0/0/0/0"), header.index("ITEMS"), p.stdout)

    def test_a_full_disk_is_said_once_not_per_message_or_checkpoint(self):
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "j", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 120}])
        job = self.nj.submit(spec)
        # The log file on a full device; the checkpoint directory impossible to create.
        os.makedirs(os.path.join(self.home, "logs"), exist_ok=True)
        log = os.path.join(self.home, "logs", "nightjar.log")
        if os.path.exists(log):
            os.remove(log)
        os.symlink("/dev/full", log)
        shutil.rmtree(os.path.join(self.home, "checkpoints"), ignore_errors=True)
        with open(os.path.join(self.home, "checkpoints"), "w") as f:
            f.write("not a directory\n")
        p = self.nj.run("run", "--drain", "--checkpoint-tokens", "5", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("LOG ERROR", p.stderr)
        self.assertEqual(p.stderr.count("cannot write the log file"), 1, p.stderr)
        self.assertEqual(p.stderr.count("no state checkpoint"), 1, p.stderr)
        self.assertEqual(self.nj.results(job)[0]["status"], "done")

    def test_every_line_of_a_multi_line_error_carries_the_prefix(self):
        spec = self.write("bad.yaml", "name: bad\nkind: generate\nmodel: 7\nbogus: 1\nitems: []\n")
        p = nightjar("validate", spec)
        self.assertEqual(p.returncode, 3, p.stderr)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        self.assertGreater(len(lines), 1, p.stderr)
        for line in lines:
            self.assertTrue(line.startswith("nightjar: error: "), p.stderr)

    def test_a_yaml_nesting_bomb_is_named(self):
        spec = self.write("bomb.yaml", "name: " + "[" * 100000 + "]" * 100000 + "\n")
        p = nightjar("validate", spec)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("bomb.yaml", p.stderr)
        self.assertIn("nests deeper than", p.stderr)


if __name__ == "__main__":
    njtest.main(globals())
