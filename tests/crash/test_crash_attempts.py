#!/usr/bin/env python3
"""Crash tests of who pays for a process death (issue 35, items 1 and 2; docs/design/jobs.md, "Attempts").

A `run` killed with SIGKILL (the OOM killer, a power cut) takes every item of its batch down
with it. The rule: an item alone in its process when it died is charged an attempt; the
items of a batch are not (each counts a batch death), and an item whose batches died twice
runs alone from then on, so that a poison item is found and charged while healthy items
never are. These cases kill real `run` processes:
  - a kill while a taken-over item is failed: a run takes over a dead run's item that has
    used its last attempt and fails it; killed right after (while it waits for the outputs'
    directory, whose lock the test holds) and at instants around that, the next run must
    still end the job (its declared outputs written, the failed item in them);
  - three process deaths in a row with a batch of healthy items: none fails, and every
    output equals plain `generate`'s;
  - one poison item (the process dies whenever it runs it) among healthy items: only it
    fails, after its max_attempts deaths alone; the others are done, never charged.
"""
import fcntl
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402

ARGS = None
WORK = MODEL = TOK_MODEL = None
RUN = ["--drain", "--threads", "1", "--commit-tokens", "7", "--checkpoint-tokens", "45",
       "--log-seconds", "1000"]
POLL_S = 0.005
LIFE_TIMEOUT_S = 120  # far beyond any life here; a run that never gets there is a failure


def setUpModule():
    global WORK, MODEL, TOK_MODEL
    WORK = njtest.scratch_dir("crash-attempts-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-tok"), extra=["--tokenizer"])


def healthy_items(n, max_tokens=260):
    return [{"id": f"item-{k}", "prompt_ids": [3 + k, 7, 11 + 2 * k], "max_tokens": max_tokens}
            for k in range(n)]


def dead_owner():
    """A lease owner naming a process of this host that has exited (and was reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return f"{socket.gethostname()}/{p.pid}/1"


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        self.log = os.path.join(self.dir, "runs.log")

    def start(self, *extra):
        return self.start_in(self.nj, *extra)

    def start_in(self, nj, *extra):
        with open(self.log, "a") as log:
            return nj.popen("run", *RUN, *extra, stderr=log)

    def kill_when(self, proc, condition):
        """SIGKILLs `proc` once `condition()` holds; False when the run ended first."""
        deadline = time.monotonic() + LIFE_TIMEOUT_S
        while proc.poll() is None:
            if condition():
                proc.kill()
                proc.wait()
                return True
            self.assertLess(time.monotonic(), deadline, f"the run neither ended nor got there ({self.log})")
            time.sleep(POLL_S)
        return False

    def running(self, proc):
        """The items `proc` holds now (a dead run's stale leases are not its)."""
        owner = f"{socket.gethostname()}/{proc.pid}/%"
        return [cid for (cid,) in self.nj.query(
            "SELECT custom_id FROM items WHERE state = 'running' AND lease_owner LIKE ?", (owner,))]

    def items(self):
        rows = self.nj.query("SELECT custom_id, state, attempts FROM items ORDER BY seq")
        return {cid: {"state": s, "attempts": a} for cid, s, a in rows}


class TakenOverItemFailed(Base):
    TEMPLATE = "Ticket: {document}\nLabel:"

    def write_spec(self):
        lines = ["name: takeover", f"model: {json.dumps(TOK_MODEL)}", "kind: classify", "max_attempts: 1",
                 f"template: {json.dumps(self.TEMPLATE)}", 'labels: ["billing", "bug"]',
                 'outputs: {jsonl: "out/labels.jsonl"}', "items:",
                 '  - {id: d0, document: "I was charged twice."}']
        path = os.path.join(self.dir, "job.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def taken_over_home(self, name):
        """A home whose only item a dead run held on its last attempt."""
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, name))
        job = nj.submit(self.spec)
        self.assertEqual(len(nj.query("SELECT id FROM items")), 1)
        con = sqlite3.connect(nj.db(), timeout=30)
        con.execute("UPDATE items SET state = 'running', lease_owner = ?, lease_expires = ?, claims = 1",
                    (dead_owner(), time.time() + 600))
        con.commit()
        con.close()
        if os.path.exists(self.out):
            os.remove(self.out)
        return nj, job

    def assert_job_ended(self, nj, job):
        """The next run (exit 0, or 4 when it is the one that failed the item) ends the job:
        the item failed on its one attempt, the outputs written with it."""
        p = nj.run("run", *RUN)
        self.assertIn(p.returncode, (0, 4), p.stderr)
        self.assertEqual(p.returncode == 4, "failed for good" in p.stderr, p.stderr)
        (state, attempts), = nj.query("SELECT state, attempts FROM items")
        self.assertEqual((state, attempts), ("failed", 1))
        (outputs_state,), = nj.query("SELECT outputs_state FROM jobs")
        self.assertEqual(outputs_state, "written", "the job's outputs are written")
        with open(self.out) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        self.assertEqual([(r["custom_id"], r["status"]) for r in lines], [("d0", "failed")])
        self.assertEqual(nj.results(job)[0]["status"], "failed")

    def test_a_kill_while_a_taken_over_item_is_failed_still_ends_its_job(self):
        self.spec = self.write_spec()
        self.out = os.path.join(self.dir, "out", "labels.jsonl")
        os.makedirs(os.path.dirname(self.out), exist_ok=True)
        # Exactly in the window: the run has failed the item (committed) and waits for the
        # lock of the outputs' directory, which this test holds, when it is killed.
        nj, job = self.taken_over_home("home-window")
        fd = os.open(os.path.dirname(self.out), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            proc = self.start_in(nj)
            self.assertTrue(self.kill_when(proc, lambda: nj.query("SELECT state FROM items") == [("failed",)]),
                            f"the run ended while the outputs' directory was locked ({self.log})")
        finally:
            os.close(fd)
        self.assertEqual(nj.query("SELECT outputs_state FROM jobs"), [(None,)])
        self.assert_job_ended(nj, job)
        # And at instants from before the take-over to after the outputs are written.
        for delay in (0.0, 0.01, 0.02, 0.04, 0.08, 0.16):
            with self.subTest(delay=delay):
                nj, job = self.taken_over_home(f"home-{delay}")
                proc = self.start_in(nj)
                time.sleep(delay)
                if proc.poll() is None:
                    proc.kill()
                rc = proc.wait()
                self.assertIn(rc, (-signal.SIGKILL, 4), f"({self.log})")
                self.assert_job_ended(nj, job)


class HealthyBatchSurvivesDeaths(Base):
    def test_three_process_deaths_in_a_row_fail_no_healthy_item(self):
        items = healthy_items(4)
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "healthy", MODEL, items)  # max_attempts 3
        expected = {it["id"]: njtest.reference_output(ARGS.bin, MODEL, it) for it in items}
        job = self.nj.submit(spec)
        for life in range(3):
            proc = self.start()
            # The first two lives hold the whole batch when they die; by the third every item
            # has died in a batch twice and runs alone.
            want = 4 if life < 2 else 1
            held = []

            def holds_them():
                held[:] = self.running(proc)
                return len(held) >= want
            killed = self.kill_when(proc, holds_them)
            self.assertTrue(killed, f"life {life} ended before it held {want} items ({self.log})")
            self.assertEqual(len(held), want, f"life {life} held {held}")
        p = self.nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        state = self.items()
        self.assertEqual({cid: s["state"] for cid, s in state.items()}, {cid: "done" for cid in expected})
        self.assertEqual(sum(s["attempts"] for s in state.values()), 1, f"only the death alone is charged: {state}")
        out = {r["custom_id"]: r["output_ids"] for r in self.nj.results(job)}
        self.assertEqual(out, expected)


class PoisonItem(Base):
    def test_only_the_poison_item_fails(self):
        items = healthy_items(2) + [{"id": "poison", "prompt_ids": [9, 9, 9], "max_tokens": 260}] + \
            [{"id": "item-2", "prompt_ids": [5, 6, 7], "max_tokens": 260}]
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "poisoned", MODEL, items, max_attempts=3)
        expected = {it["id"]: njtest.reference_output(ARGS.bin, MODEL, it) for it in items if it["id"] != "poison"}
        job = self.nj.submit(spec)
        kills = 0
        for life in range(20):
            proc = self.start()
            # The poison brings its process down whenever it runs.
            if self.kill_when(proc, lambda: "poison" in self.running(proc)):
                kills += 1
                continue
            last_rc = proc.returncode
            break
        else:
            self.fail(f"still killing after 20 lives ({self.log})")
        self.assertEqual(last_rc, 4, f"the run that failed the poison exits 4 ({self.log})")
        state = self.items()
        self.assertEqual(state["poison"]["state"], "failed")
        self.assertEqual(state["poison"]["attempts"], 3)
        for cid in expected:
            self.assertEqual(state[cid]["state"], "done", f"{cid}: {state}")
            self.assertEqual(state[cid]["attempts"], 0, f"{cid} was never charged: {state}")
        # Two deaths in a batch, then three alone.
        self.assertEqual(kills, 5, state)
        out = {r["custom_id"]: r["output_ids"] for r in self.nj.results(job) if r["custom_id"] != "poison"}
        self.assertEqual(out, expected)


if __name__ == "__main__":
    njtest.main(globals())
