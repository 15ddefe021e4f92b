#!/usr/bin/env python3
"""Issue 16, bug 7: a full disk left the item looking crashed. When `run` exited 1 on ENOSPC it
kept its lease, so `status` showed the item running (with an ETA) and the next run charged an
attempt as if the process had died. Now every orderly exit releases the lease, failures
included: the item is queued again with its attempts unchanged, and the next run resumes it
to the output an uninterrupted run gives.

The disk fills up through tests/cli/faults/enospc_once.c (LD_PRELOAD): one write to the store's
WAL fails with ENOSPC once the test creates a flag file, and space is free again after."""
import os
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000", "--commit-tokens", "4"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("diskfull-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


class DiskFullReleasesTheLease(unittest.TestCase):
    def test_run_failing_on_a_full_disk_releases_the_lease(self):
        home = os.path.join(WORK, "home")
        nj = njtest.Nightjar(ARGS.bin, home)
        item = {"id": "long", "prompt_ids": [(i * 13 + 5) % 256 for i in range(40)], "max_tokens": 600,
                "temperature": 0.7, "seed": 5}
        job = nj.submit(njtest.write_spec(os.path.join(WORK, "job.yaml"), "job", MODEL, [item]))
        flag = os.path.join(WORK, "disk-full")
        env = dict(os.environ, LD_PRELOAD=ARGS.shim, NJ_TEST_ENOSPC_FLAG=flag)
        log = open(os.path.join(WORK, "run.log"), "w")
        self.addCleanup(log.close)
        import subprocess
        proc = subprocess.Popen(nj.cmd("run", *RUN, "--drain"), stderr=log, stdout=subprocess.DEVNULL, env=env)
        deadline = time.time() + 120
        while nj.query("SELECT tokens_done FROM items")[0][0] < 8:
            self.assertIsNone(proc.poll(), "run ended before the disk filled up")
            self.assertLess(time.time(), deadline, "no tokens stored")
            time.sleep(0.02)
        with open(flag, "w"):
            pass
        rc = proc.wait(timeout=120)
        self.assertFalse(os.path.exists(flag), "the full disk was hit")
        self.assertEqual(rc, 1, "run fails on a full disk")
        with open(os.path.join(WORK, "run.log")) as f:
            self.assertIn("full", f.read().lower())

        (state, owner, attempts) = nj.query("SELECT state, lease_owner, attempts FROM items")[0]
        self.assertEqual((state, owner, attempts), ("queued", None, 0), "released, not charged")
        (st_item,) = nj.status(job)["items"]
        self.assertEqual(st_item["state"], "queued")
        released = [d for _, k, d in nj.events("released")]
        self.assertEqual(len(released), 1)
        self.assertIn("full", released[0]["reason"].lower())

        p = nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = nj.results(job)
        self.assertEqual((r["status"], r["attempts"]), ("done", 0))
        self.assertEqual(nj.events("lease_reclaimed"), [], "no attempt charged as a crash")
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, item))
        self.assertEqual(nj.integrity(), ["ok"])


if __name__ == "__main__":
    njtest.main(globals(), extra_args=[("--shim", {"required": True})])
