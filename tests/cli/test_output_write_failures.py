#!/usr/bin/env python3
"""Issue 16, bug 5: failed output writes were invisible. When a declared output could not be
written (its path a directory, its directory a file, a full disk), the job showed `done`, `run`
exited 0, and `status` and `report` said nothing. Now the job records it (outputs_state
"failed", its error): `status` shows the job as outputs_failed and prints the error, `report`
and `results` say so too, `run` exits 1, and a later `results --write` that succeeds clears it."""
import json
import os
import shutil
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("outfail-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"), extra=["--tokenizer"])


class OutputWriteFailures(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def submit(self, outputs):
        path = os.path.join(self.dir, "job.yaml")
        with open(path, "w") as f:
            f.write(f"name: triage\nmodel: {json.dumps(MODEL)}\nkind: classify\n"
                    "template: \"Ticket: {document}\\nLabel:\\n\"\nlabels: [billing, bug]\n"
                    "items:\n  - {id: a, document: \"I was charged twice.\"}\n"
                    "  - {id: b, document: \"The app crashes.\"}\n"
                    f"outputs: {json.dumps(outputs)}\n")
        return self.nj.submit(path)

    def check_failure_shows(self, job, needle):
        st = self.nj.status(job)
        self.assertEqual(st["job"]["state"], "outputs_failed")
        self.assertEqual(st["job"]["outputs"]["state"], "failed")
        self.assertIn(needle, st["job"]["outputs"]["error"])
        p = self.nj.run("status")
        self.assertIn("outputs_failed", p.stdout)
        self.assertIn("could not be written", p.stdout)
        p = self.nj.run("report", str(job))
        self.assertIn("outputs:          NOT WRITTEN", p.stdout)
        self.assertIn(needle, p.stdout)
        p = self.nj.run("results", str(job))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("could not be written", p.stderr)
        self.assertEqual(len(p.stdout.splitlines()), 2, "the results themselves are all there")

    def test_an_output_path_that_became_a_directory(self):
        job = self.submit({"jsonl": "out/r.jsonl", "csv": "out/r.csv"})
        os.makedirs(os.path.join(self.dir, "out", "r.jsonl"))
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 1, "run says the work failed")
        self.assertIn("could not be written", p.stderr)
        self.check_failure_shows(job, "not a regular file")
        # Fixed, and written again: the failure is gone.
        os.rmdir(os.path.join(self.dir, "out", "r.jsonl"))
        p = self.nj.run("results", str(job), "--write")
        self.assertEqual(p.returncode, 0, p.stderr)
        st = self.nj.status(job)
        self.assertEqual((st["job"]["state"], st["job"]["outputs"]["state"]), ("done", "written"))
        self.assertIsNone(st["job"]["outputs"]["error"])
        self.assertTrue(os.path.isfile(os.path.join(self.dir, "out", "r.jsonl")))

    def test_an_output_directory_that_is_a_file(self):
        job = self.submit({"csv": "out/r.csv"})
        with open(os.path.join(self.dir, "out"), "w") as f:
            f.write("in the way\n")
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 1)
        self.check_failure_shows(job, "out")
        p = self.nj.run("results", str(job), "--write")
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(self.nj.status(job)["job"]["outputs"]["state"], "failed")


if __name__ == "__main__":
    njtest.main(globals())
