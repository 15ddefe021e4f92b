#!/usr/bin/env python3
"""`nightjar run` end to end on a generated tiny model: graceful stops, resume from the
state checkpoint, damaged checkpoints, a tampered token log, concurrent runs, cancel and
retry, failing models, --max-items, status, results and the log file."""
import json
import os
import signal
import subprocess
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = TOK_MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL, TOK_MODEL
    WORK = njtest.scratch_dir("run-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-tok"), extra=["--tokenizer"])


def long_item(item_id="long", max_tokens=1000, **extra):
    prompt = [(i * 13 + 5) % 256 for i in range(120)]
    return {"id": item_id, "prompt_ids": prompt, "max_tokens": max_tokens, "temperature": 0.7, "seed": 11, **extra}


class Run(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def spec(self, items, **job):
        return njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", MODEL, items, **job)

    def start(self, *extra):
        log = open(os.path.join(self.dir, "run.log"), "a")
        self.addCleanup(log.close)
        return self.nj.popen("run", *RUN, *extra, stderr=log)

    def wait_for_tokens(self, proc, at_least=1, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.assertIsNone(proc.poll(), "run ended before producing tokens")
            rows = self.nj.query("SELECT coalesce(sum(tokens_done), 0) FROM items")
            if rows[0][0] >= at_least:
                return
            time.sleep(0.02)
        self.fail("no tokens produced")

    def stop_mid_item(self, items, **job):
        """Submits, starts run, SIGTERMs it once tokens flow; returns (job id, run's exit code)."""
        job_id = self.nj.submit(self.spec(items, **job))
        proc = self.start("--drain")
        self.wait_for_tokens(proc)
        proc.send_signal(signal.SIGTERM)
        return job_id, proc.wait(timeout=120)

    def log_text(self):
        with open(os.path.join(self.dir, "run.log")) as f:
            return f.read()

    def test_sigterm_stops_within_a_token_and_the_next_run_restores_the_checkpoint(self):
        item = long_item()
        job, rc = self.stop_mid_item([item])
        self.assertEqual(rc, 0, "a graceful stop exits 0")
        (released,) = [d for _, k, d in self.nj.events("released")]
        self.assertEqual(released["reason"], "SIGTERM")
        self.assertLessEqual(released["tokens_done"] - released["tokens_at_signal"], 1,
                             "only the token in flight is finished after the signal")
        (state, done) = self.nj.query("SELECT state, tokens_done FROM items")[0]
        self.assertEqual(state, "queued")
        self.assertLess(done, item["max_tokens"])
        (position, cp_done) = self.nj.query("SELECT position, tokens_done FROM checkpoints")[0]
        self.assertEqual((position, cp_done), (len(item["prompt_ids"]) + done, done),
                         "the stop checkpointed the state after its last token")

        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        (resumed,) = [d for _, k, d in self.nj.events("resumed")]
        self.assertEqual(resumed["from"], "checkpoint")
        self.assertEqual(resumed["prompt_tokens_fed"], 0, "the prompt is not recomputed")
        self.assertEqual(resumed["replayed_tokens"], 0)
        (r,) = self.nj.results(job)
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, item))
        self.assertEqual(self.nj.query("SELECT count(*) FROM checkpoints")[0][0], 0, "done items keep no checkpoint")
        self.assertEqual(os.listdir(os.path.join(self.nj.home, "checkpoints")), [], "nor checkpoint files")

    def test_results_carry_what_the_engine_did(self):
        items = [{"id": "a", "prompt_ids": [5, 6, 7, 8, 9], "max_tokens": 12},
                 {"id": "b", "prompt_ids": [3] * 40, "max_tokens": 1}]
        job = self.nj.submit(self.spec(items))
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        for item, r in zip(items, self.nj.results(job)):
            e = r["engine"]
            n = r["output_tokens"]
            self.assertEqual(n, item["max_tokens"])
            self.assertEqual(e["decode_steps"], n - 1, "the last token needs no forward pass")
            self.assertEqual(e["tokens_fed"], len(item["prompt_ids"]) + n - 1)
            self.assertEqual(e["bytes_read"], 0, "a resident model reads nothing while it runs")
            self.assertGreater(e["compute_s"], 0)
            self.assertGreaterEqual(e["io_wait_s"], 0)

    def test_damaged_checkpoint_falls_back_to_prefill_with_a_warning(self):
        item = long_item()
        job, rc = self.stop_mid_item([item])
        self.assertEqual(rc, 0)
        (path, done) = self.nj.query("SELECT c.path, i.tokens_done FROM checkpoints c JOIN items i "
                                     "ON i.id = c.item_id")[0]
        head = os.path.join(self.nj.home, path)
        data = bytearray(open(head, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(head, "wb").write(bytes(data))
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("unusable", p.stderr)
        self.assertEqual(len(self.nj.events("checkpoint_unusable")), 1)
        (resumed,) = [d for _, k, d in self.nj.events("resumed")]
        self.assertEqual((resumed["from"], resumed["prompt_tokens_fed"], resumed["replayed_tokens"]),
                         ("start", len(item["prompt_ids"]), done))
        (r,) = self.nj.results(job)
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, item))

    def test_missing_checkpoint_file_falls_back_to_prefill_with_a_warning(self):
        item = long_item()
        job, rc = self.stop_mid_item([item])
        self.assertEqual(rc, 0)
        (path,) = self.nj.query("SELECT path FROM checkpoints")[0]
        os.remove(os.path.join(self.nj.home, path))
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("missing", p.stderr)
        (r,) = self.nj.results(job)
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, item))

    def test_a_tampered_token_log_is_detected_by_the_replay(self):
        job, rc = self.stop_mid_item([long_item()], max_attempts=1)
        self.assertEqual(rc, 0)
        self.nj.query("SELECT 1")  # the store is readable
        import sqlite3
        con = sqlite3.connect(self.nj.db())
        con.execute("UPDATE tokens SET token_id = (token_id + 1) % 256 WHERE pos = 0")
        con.execute("DELETE FROM checkpoints")
        con.commit()
        con.close()
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 4, "the item failed for good during the run: " + p.stderr)
        st = self.nj.status(job)
        (item,) = st["items"]
        self.assertEqual(item["state"], "failed")
        self.assertIn("replay diverged at output token 0", item["last_error"])

    def test_two_concurrent_runs_run_every_item_once(self):
        items = [{"id": f"doc-{k}", "prompt_ids": [k + 1, 2 * k + 3], "max_tokens": 300,
                  "temperature": 0.9 if k % 2 else 0, "seed": k} for k in range(8)]
        job = self.nj.submit(self.spec(items))
        procs = [self.start("--drain") for _ in range(2)]
        for proc in procs:
            self.assertEqual(proc.wait(timeout=300), 0)
        claims = {}
        for item_id, kind, d in self.nj.events("claimed"):
            claims.setdefault(item_id, []).append(d["owner"])
        self.assertEqual(len(claims), len(items))
        self.assertTrue(all(len(c) == 1 for c in claims.values()), f"every item claimed once: {claims}")
        self.assertEqual(self.nj.events("lease_reclaimed"), [])
        owners = {c[0] for c in claims.values()}
        print(f"\n  two runs: items per process {[sum(1 for c in claims.values() if c[0] == o) for o in owners]}")
        results = self.nj.results(job)
        self.assertEqual([r["custom_id"] for r in results], [it["id"] for it in items])
        for r, it in zip(results, items):
            self.assertEqual(r["status"], "done")
            self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, it), it["id"])
        self.assertEqual(self.nj.integrity(), ["ok"])

    def test_cancel_reaches_a_running_item_and_retry_resumes_it(self):
        item = long_item()
        job = self.nj.submit(self.spec([item]))
        proc = self.start()  # without --drain: stays up, idle, after the cancel
        self.wait_for_tokens(proc)
        p = self.nj.run("cancel", str(job))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("cancelled 1 item of job", p.stdout)
        deadline = time.time() + 60
        while "cancelled or taken over" not in self.log_text() and time.time() < deadline:
            time.sleep(0.05)
        self.assertIn("cancelled or taken over", self.log_text(), "the run leaves the cancelled item")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=60), 0)
        (state, done) = self.nj.query("SELECT state, tokens_done FROM items")[0]
        self.assertEqual(state, "cancelled")
        (r,) = self.nj.results(job)
        self.assertEqual((r["status"], r["output_ids"]), ("cancelled", None))

        p = self.nj.run("retry", str(job))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("requeued 1 item of job", p.stdout)
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        (resumed,) = [d for _, k, d in self.nj.events("resumed")]
        self.assertGreaterEqual(resumed["tokens_done"], done, "retry keeps the tokens generated before")
        (r,) = self.nj.results(job)
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, item))

    def test_an_item_whose_model_disappears_fails_after_max_attempts(self):
        import shutil
        model = os.path.join(self.dir, "model-copy")
        shutil.copytree(MODEL, model)
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", model,
                                 [{"id": "a", "prompt_ids": [1], "max_tokens": 4}], max_attempts=2)
        job = self.nj.submit(spec)
        shutil.rmtree(model)
        p = self.nj.run("run", *RUN, "--drain", "--retry-seconds", "0.1")
        self.assertEqual(p.returncode, 4, "the item failed for good during the run: " + p.stderr)
        (item,) = self.nj.status(job)["items"]
        self.assertEqual((item["state"], item["attempts"]), ("failed", 2))
        self.assertIn("model-copy", item["last_error"])
        (r,) = self.nj.results(job)
        self.assertEqual(r["status"], "failed")
        self.assertIn("model-copy", r["error"])

    def test_max_items_status_results_and_log_file(self):
        items = [{"id": f"i{k}", "prompt_ids": [k + 1], "max_tokens": 20} for k in range(3)]
        job = self.nj.submit(self.spec(items, priority=1))
        p = self.nj.run("run", *RUN, "--drain", "--max-items", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        st = self.nj.status(job)
        self.assertEqual([i["state"] for i in st["items"]], ["done", "queued", "queued"])
        self.assertEqual(st["job"]["state"], "queued")
        self.assertGreater(st["job"]["rate_tokens_per_s"], 0)
        self.assertGreater(st["job"]["eta_s"], 0)
        text = self.nj.run("status")
        self.assertEqual(text.returncode, 0)
        self.assertIn("tok/s", text.stdout)
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        st = self.nj.status(job)
        self.assertEqual(st["job"]["state"], "done")
        self.assertIsNone(st["job"]["eta_s"])
        out = os.path.join(self.dir, "results.jsonl")
        p = self.nj.run("results", str(job), "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(lines, self.nj.results("job"), "--out writes what stdout shows; the name finds the job")
        for line, it in zip(lines, items):
            self.assertEqual(line["output_ids"], njtest.reference_output(ARGS.bin, MODEL, it))
            self.assertEqual(line["output_tokens"], 20)
            self.assertEqual(line["prompt_tokens"], 1)
            self.assertIn("decode_s", line["timings"])
        with open(os.path.join(self.nj.home, "logs", "nightjar.log")) as f:
            log = f.read()
        self.assertIn("run ended (queue empty)", log)
        self.assertIn("run ended (--max-items 1)", log)

    def test_priority_runs_first(self):
        low = njtest.write_spec(os.path.join(self.dir, "low.yaml"), "low", MODEL,
                                [{"id": "l", "prompt_ids": [1], "max_tokens": 2}])
        high = njtest.write_spec(os.path.join(self.dir, "high.yaml"), "high", MODEL,
                                 [{"id": "h", "prompt_ids": [1], "max_tokens": 2}], priority=5)
        self.nj.submit(low)
        self.nj.submit(high)
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        order = [self.nj.query("SELECT custom_id FROM items WHERE id = ?", (i,))[0][0]
                 for i, _, _ in self.nj.events("claimed")]
        self.assertEqual(order, ["h", "l"])

    def test_second_signal_exits_at_once_and_the_store_stays_consistent(self):
        item = long_item()
        job = self.nj.submit(self.spec([item]))
        proc = self.start("--drain")
        self.wait_for_tokens(proc)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        self.assertIn(rc, (0, 128 + signal.SIGTERM), "graceful if it finished first, else at once")
        self.assertEqual(self.nj.integrity(), ["ok"])
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = self.nj.results(job)
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, item))

    def test_text_prompts_are_tokenized_at_submit_and_results_carry_the_text(self):
        text = "Once upon a time, a nightjar sang."
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "text", TOK_MODEL,
                                 [{"id": "story", "prompt": text, "max_tokens": 16, "temperature": 0.7, "seed": 3}])
        job = self.nj.submit(spec)
        tok = subprocess.run([ARGS.bin, "tokenize", "--model", TOK_MODEL, "--text", text, "--output", "json"],
                             capture_output=True, text=True, check=True)
        ids = json.loads(tok.stdout)["ids"]
        (blob,) = self.nj.query("SELECT prompt_ids FROM items")[0]
        self.assertEqual([int.from_bytes(blob[i:i + 4], "little") for i in range(0, len(blob), 4)], ids)
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = self.nj.results(job)
        self.assertEqual(r["output_ids"], njtest.reference_output(
            ARGS.bin, TOK_MODEL, {"prompt_ids": ids, "max_tokens": 16, "temperature": 0.7, "seed": 3}))
        detok = subprocess.run([ARGS.bin, "detokenize", "--model", TOK_MODEL, "--ids",
                                ",".join(map(str, r["output_ids"])), "--output", "json"],
                               capture_output=True, text=True, check=True)
        self.assertEqual(r["output_text"], json.loads(detok.stdout)["text"])

    def test_generation_stops_at_the_end_of_sequence_token_unless_ignore_eos(self):
        base = {"prompt_ids": [5, 6], "max_tokens": 300, "temperature": 5.0}
        for seed in range(200):  # a seed whose generation samples EOS before max_tokens
            ref = njtest.reference_output(ARGS.bin, TOK_MODEL, dict(base, seed=seed))
            if len(ref) < base["max_tokens"]:
                break
        else:
            self.skipTest("no seed below 200 reaches the end-of-sequence token")
        items = [dict(base, id="stops", seed=seed), dict(base, id="ignores", seed=seed, ignore_eos=True)]
        job = self.nj.submit(njtest.write_spec(os.path.join(self.dir, "job.yaml"), "eos", TOK_MODEL, items))
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        stops, ignores = self.nj.results(job)
        self.assertEqual((stops["finish_reason"], stops["output_ids"]), ("stop", ref))
        self.assertEqual(ignores["finish_reason"], "length")
        self.assertEqual(ignores["output_ids"], njtest.reference_output(ARGS.bin, TOK_MODEL, items[1]))
        self.assertEqual(ignores["output_ids"][:len(ref)], ref)

    def test_bad_run_options_are_usage_errors(self):
        for args in (["--until", "25:00"], ["--max-items", "0"], ["--simd", "mmx"]):
            p = self.nj.run("run", *args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))


if __name__ == "__main__":
    njtest.main(globals())
