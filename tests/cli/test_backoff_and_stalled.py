#!/usr/bin/env python3
"""Issue 16, item 12: a missing model failed the queue's items in milliseconds, every attempt
at once; now an item whose model cannot be opened waits before its next attempt, the wait
doubling each time (`run --retry-seconds`, default 60). And `status` shows an item whose
lease expired (or whose run process on this host is gone) as stalled, not running."""
import os
import shutil
import sqlite3
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("backoff-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))


class MissingModelBackoff(Base):
    def test_items_whose_model_is_missing_are_retried_with_a_doubling_wait(self):
        model = os.path.join(self.dir, "model")
        shutil.copytree(MODEL, model)
        items = [{"id": f"i{k}", "prompt_ids": [k + 1], "max_tokens": 2} for k in range(2)]
        job = self.nj.submit(njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", model, items,
                                               max_attempts=3))
        shutil.rmtree(model)
        p = self.nj.run("run", *RUN, "--drain", "--retry-seconds", "0.5")
        self.assertEqual(p.returncode, 4, p.stderr)
        for r in self.nj.results(job):
            self.assertEqual((r["status"], r["attempts"]), ("failed", 3))
        rows = self.nj.query("SELECT item_id, at FROM events WHERE kind = 'claimed' ORDER BY id")
        claims = {}
        for item_id, at in rows:
            claims.setdefault(item_id, []).append(at)
        self.assertEqual(sorted(len(v) for v in claims.values()), [3, 3])
        for times in claims.values():
            gaps = [b - a for a, b in zip(times, times[1:])]
            self.assertGreaterEqual(gaps[0], 0.5, f"first wait 0.5 s: {gaps}")
            self.assertGreaterEqual(gaps[1], 1.0, f"then doubled: {gaps}")
        waits = [d["retry_at"] for _, k, d in self.nj.events("attempt_failed")]
        self.assertEqual(len(waits), 4, "two waits per item before its last attempt")


class Stalled(Base):
    def test_status_shows_an_item_with_an_expired_lease_as_stalled(self):
        items = [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 50}]
        job = self.nj.submit(njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", MODEL, items))
        con = sqlite3.connect(self.nj.db())
        now = time.time()
        # Another host's run that stopped heartbeating ten seconds ago.
        con.execute("UPDATE items SET state = 'running', lease_owner = 'otherhost/4242/1', lease_expires = ?, "
                    "tokens_done = 0, decode_s = 1", (now - 10,))
        con.commit()
        (item,) = self.nj.status(job)["items"]
        self.assertEqual(item["state"], "stalled")
        self.assertIsNone(item["eta_s"])
        p = self.nj.run("status", str(job))
        self.assertIn("stalled", p.stdout)
        # A live lease is running.
        con.execute("UPDATE items SET lease_expires = ?", (now + 600,))
        con.commit()
        (item,) = self.nj.status(job)["items"]
        self.assertEqual(item["state"], "running")
        # A lease of a process on this host that is gone is stalled too.
        con.execute("UPDATE items SET lease_owner = ?", (f"{os.uname().nodename}/999999999/1",))
        con.commit()
        con.close()
        (item,) = self.nj.status(job)["items"]
        self.assertEqual(item["state"], "stalled")


if __name__ == "__main__":
    njtest.main(globals())
