#!/usr/bin/env python3
"""`nightjar run` with many items per pass (continuous batching), end to end on a generated
tiny model: every item's output equals a solo `generate`, items join as others leave, a
cancel or a failure mid-batch leaves the others untouched, --until stops every item of the
batch with its checkpoint, each item's share of the passes adds up to the run's totals, and
a classification is the same bit for bit whether its documents run one at a time or in
windows."""
import datetime
import json
import os
import signal
import sqlite3
import subprocess
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = TOK_MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL, TOK_MODEL
    WORK = njtest.scratch_dir("run-batch-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")


def mixed_items(n, prefix="it", long_tokens=160):
    """Different prompt lengths, output lengths and sampling settings."""
    items = []
    for k in range(n):
        prompt = [(k * 31 + i * 7 + 3) % 256 for i in range(1 + (k * 37) % 90)]
        item = {"id": f"{prefix}{k}", "prompt_ids": prompt, "max_tokens": 20 + (k * 53) % long_tokens}
        if k % 2:
            item.update({"temperature": 0.8, "seed": 100 + k})
        if k % 3 == 2:
            item.update({"top_k": 30})
        items.append(item)
    return items


def run_ended(nj):
    return [d for _, _, d in nj.events("run_ended")]


class RunBatch(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def spec(self, items, name="job", model=None, **job):
        return njtest.write_spec(os.path.join(self.dir, f"{name}.yaml"), name, model or MODEL, items, **job)

    def start(self, *extra):
        log = open(os.path.join(self.dir, "run.log"), "a")
        self.addCleanup(log.close)
        return self.nj.popen("run", *RUN, *extra, stderr=log)

    def wait_for(self, proc, sql, at_least, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.assertIsNone(proc.poll(), "run ended too early")
            if self.nj.query(sql)[0][0] >= at_least:
                return
            time.sleep(0.02)
        self.fail(f"timed out waiting for {sql} >= {at_least}")

    def check_solo(self, results, items):
        by_id = {r["custom_id"]: r for r in results}
        for it in items:
            r = by_id[it["id"]]
            self.assertEqual(r["status"], "done", it["id"])
            self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, it), it["id"])

    def test_a_batch_equals_solo_runs_and_items_join_as_others_leave(self):
        items = mixed_items(7)
        job = self.nj.submit(self.spec(items))
        p = self.nj.run("run", *RUN, "--drain", "--batch", "3")
        self.assertEqual(p.returncode, 0, p.stderr)
        results = self.nj.results(job)
        self.check_solo(results, items)
        (ended,) = run_ended(self.nj)
        self.assertEqual(ended["max_batch"], 3)
        self.assertEqual(ended["done"], 7)
        batches = [r["engine"]["max_batch"] for r in results]
        self.assertTrue(all(1 <= b <= 3 for b in batches), batches)
        self.assertGreaterEqual(sum(b == 3 for b in batches), 5, f"items shared their passes: {batches}")
        # Joining: an item claimed after another finished still ran with others (the batch
        # was kept full), and fewer passes ran than the items' rows would need alone.
        steps = sum(r["engine"]["decode_steps"] for r in results)
        self.assertLess(ended["passes"], steps, "decode steps of several items shared passes")
        claims = [item for item, _, _ in self.nj.events("claimed")]
        self.assertEqual(len(claims), 7, "each item claimed once")
        self.assertEqual(self.nj.integrity(), ["ok"])

    def test_each_items_share_of_the_passes_adds_up_to_the_runs_totals(self):
        items = mixed_items(5, long_tokens=60)
        context = max(len(it["prompt_ids"]) + it["max_tokens"] for it in items)
        plan = subprocess.run([ARGS.bin, "plan", "--model", MODEL, "--batch", "5", "--max-context", str(context),
                               "--all-logits", "--output", "json"], capture_output=True, text=True, check=True)
        minimum = json.loads(plan.stdout)["min_memory_bytes"]
        job = self.nj.submit(self.spec(items, memory=str(minimum)))
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        results = self.nj.results(job)
        self.check_solo(results, items)
        (ended,) = run_ended(self.nj)
        engines = [r["engine"] for r in results]
        self.assertGreater(ended["max_batch"], 1)
        self.assertGreater(ended["bytes_read"], 0, "the budget streams the weights")
        self.assertEqual(sum(e["tokens_fed"] for e in engines), ended["rows"], "every row belongs to one item")
        feeds = sum(e["tokens_fed"] for e in engines)  # rounding: at most half a byte per feed
        self.assertLessEqual(abs(sum(e["bytes_read"] for e in engines) - ended["bytes_read"]), feeds)
        self.assertAlmostEqual(sum(e["compute_s"] for e in engines), ended["compute_s"],
                               delta=1e-9 * max(1.0, ended["compute_s"]) + 1e-6)
        self.assertAlmostEqual(sum(e["io_wait_s"] for e in engines), ended["io_wait_s"],
                               delta=1e-9 * max(1.0, ended["io_wait_s"]) + 1e-6)

    def test_cancel_mid_batch_leaves_the_other_items_untouched(self):
        others = mixed_items(3, prefix="keep", long_tokens=200)
        victim = {"id": "victim", "prompt_ids": [5, 6, 7], "max_tokens": 3000, "temperature": 0.7, "seed": 3}
        victim_job = self.nj.submit(self.spec([victim], name="victim"))
        job = self.nj.submit(self.spec(others, name="others"))
        proc = self.start("--batch", "4")  # without --drain: stays up after the cancel
        self.wait_for(proc, "SELECT count(*) FROM items WHERE tokens_done > 0", 4)
        p = self.nj.run("cancel", str(victim_job))
        self.assertEqual(p.returncode, 0, p.stderr)
        deadline = time.time() + 300
        while time.time() < deadline:
            states = dict(self.nj.query("SELECT custom_id, state FROM items"))
            if all(states[it["id"]] == "done" for it in others):
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=120), 0)
        self.check_solo(self.nj.results(job), others)
        (r,) = self.nj.results(victim_job)
        self.assertEqual(r["status"], "cancelled")
        self.assertEqual(self.nj.integrity(), ["ok"])

    def test_a_failure_mid_batch_leaves_the_other_items_untouched(self):
        bad = {"id": "bad", "prompt_ids": [9, 9, 9], "max_tokens": 2000, "temperature": 0.9, "seed": 8}
        bad_job = self.nj.submit(self.spec([bad], name="bad", max_attempts=1))
        proc = self.start("--drain")
        self.wait_for(proc, "SELECT coalesce(sum(tokens_done), 0) FROM items", 30)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=120), 0)
        con = sqlite3.connect(self.nj.db())
        con.execute("UPDATE tokens SET token_id = (token_id + 1) % 256 WHERE pos = 0")
        con.execute("DELETE FROM checkpoints")
        con.commit()
        con.close()
        others = mixed_items(3, prefix="good")
        job = self.nj.submit(self.spec(others, name="good"))
        p = self.nj.run("run", *RUN, "--drain", "--batch", "4")
        self.assertEqual(p.returncode, 4, "an item failed for good: exit 4\n" + p.stderr)
        (item,) = self.nj.status(bad_job)["items"]
        self.assertEqual(item["state"], "failed")
        self.assertIn("replay diverged at output token 0", item["last_error"])
        self.check_solo(self.nj.results(job), others)
        (ended,) = run_ended(self.nj)[-1:]
        self.assertEqual((ended["done"], ended["failed"]), (3, 1))
        self.assertGreater(ended["max_batch"], 1, "the failing item shared passes with the others")

    def test_until_stops_every_item_of_the_batch_with_its_checkpoint(self):
        items = [{"id": f"long{k}", "prompt_ids": [k + 1, 40 + k], "max_tokens": 20000,
                  "temperature": 0.5 * k, "seed": k} for k in range(3)]
        job = self.nj.submit(self.spec(items))
        # A deadline at the next minute, a few seconds away.
        while not 52 <= datetime.datetime.now().second <= 57:
            time.sleep(0.2)
        until = (datetime.datetime.now() + datetime.timedelta(seconds=10)).strftime("%H:%M")
        proc = self.start("--drain", "--until", until)
        self.assertEqual(proc.wait(timeout=600), 0, "a stop at the deadline exits 0")
        released = {item: d for item, _, d in self.nj.events("released")}
        self.assertEqual(len(released), 3, "every item of the batch was put back")
        for d in released.values():
            self.assertEqual(d["reason"], f"deadline {until}")
        rows = self.nj.query("SELECT i.custom_id, i.state, i.tokens_done, c.tokens_done FROM items i "
                             "JOIN checkpoints c ON c.item_id = i.id")
        self.assertEqual(len(rows), 3, "every item checkpointed")
        by_id = {it["id"]: it for it in items}
        for custom_id, state, done, cp_done in rows:
            self.assertEqual(state, "queued")
            self.assertGreater(done, 0)
            self.assertLess(done, 20000)
            self.assertEqual(cp_done, done, f"{custom_id}: the stop checkpointed its last token")
            stored = [t for (t,) in self.nj.query(
                "SELECT t.token_id FROM tokens t JOIN items i ON i.id = t.item_id WHERE i.custom_id = ? "
                "ORDER BY t.pos", (custom_id,))]
            solo = njtest.reference_output(ARGS.bin, MODEL, {**by_id[custom_id], "max_tokens": done})
            self.assertEqual(stored, solo, custom_id)
        (ended,) = run_ended(self.nj)
        self.assertEqual(ended["reason"], f"deadline {until}")
        self.assertEqual(ended["max_batch"], 3)

    def test_a_classification_is_the_same_one_at_a_time_and_in_windows(self):
        labels = ["billing", "bug", "feature request", "feature idea", "question"]
        docs = ["I was charged twice for my March subscription.",
                "The app crashes when I open the settings page.",
                "Please add a dark mode to the dashboard.",
                "What are your opening hours on holidays?",
                "My invoice shows the wrong company address.",
                "Sync fails with error 504 since this morning, and the export button is greyed out too."]
        template = "Classify the ticket as one of: {labels}.\nTicket: {document}\nLabel:\n"
        lines = ["name: triage", f"model: {json.dumps(TOK_MODEL)}", "kind: classify",
                 f"template: {json.dumps(template)}", f"labels: {json.dumps(labels)}", "items:"]
        lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(docs)]
        spec = os.path.join(self.dir, "triage.yaml")
        with open(spec, "w") as f:
            f.write("\n".join(lines) + "\n")
        outcomes = {}
        for batch in ("1", "6"):
            nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, f"home-{batch}"))
            job = nj.submit(spec)
            # Token-major windows (the layer sweep has its own tests: test_sweep.py).
            p = nj.run("run", *RUN, "--drain", "--batch", batch, "--schedule", "passes")
            self.assertEqual(p.returncode, 0, p.stderr)
            results = nj.results(job)
            self.assertEqual(len(nj.events("prefix_prefilled")), 1, "the prefix is prefilled once per job")
            outcomes[batch] = results
            (ended,) = run_ended(nj)
            self.assertEqual(ended["max_batch"], int(batch))
        one, window = outcomes["1"], outcomes["6"]
        self.assertTrue(any(r["details"]["decode_steps"] > 0 for r in one), "the label trie is walked")
        for a, b in zip(one, window):
            self.assertEqual(a["custom_id"], b["custom_id"])
            self.assertEqual(a["status"], "done")
            # Bit for bit: the JSON numbers are the doubles' shortest round-trip forms.
            self.assertEqual(a["details"]["probabilities"], b["details"]["probabilities"], a["custom_id"])
            self.assertEqual(a["details"]["margin"], b["details"]["margin"])
            self.assertEqual(a["details"]["label"], b["details"]["label"])
            self.assertEqual(a["output_ids"], b["output_ids"])
            self.assertEqual(a["engine"]["decode_steps"], b["engine"]["decode_steps"])
            self.assertEqual(a["engine"]["max_batch"], 1)
        self.assertGreater(max(r["engine"]["max_batch"] for r in window), 1, "documents shared passes")


if __name__ == "__main__":
    njtest.main(globals())
