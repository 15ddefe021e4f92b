#!/usr/bin/env python3
"""Per-item control (issue 34): `cancel JOB --item ID...` and `retry JOB [ITEM...]` move only
the named items, refuse an unknown id or an item in the wrong state without changing
anything, name the job by id and name, and answer `--output json`. A retried item resumes
and ends as it would have uninterrupted; the events keep what the retry reset."""
import json
import os
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000", "--drain"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("item-control-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


def item(i):
    return {"id": f"i{i}", "prompt_ids": [3 + i, 7, 11], "max_tokens": 4, "temperature": 0.8, "seed": i}


class ItemControl(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "night", MODEL,
                                 [item(i) for i in range(4)])
        self.job = self.nj.submit(spec)

    def states(self):
        return {i["custom_id"]: i["state"] for i in self.nj.status(self.job)["items"]}

    def json_of(self, *args):
        p = self.nj.run(*args, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.endswith("\n"), "JSON on stdout ends with a newline")
        return json.loads(p.stdout)

    def test_cancel_and_retry_named_items(self):
        out = self.json_of("cancel", str(self.job), "--item", "i1", "--item", "i2")
        self.assertEqual(out, {"job": {"id": self.job, "name": "night"}, "cancelled": 2,
                               "items": [{"custom_id": "i1", "from": "queued"},
                                         {"custom_id": "i2", "from": "queued"}]})
        self.assertEqual(self.states(), {"i0": "queued", "i1": "cancelled", "i2": "cancelled", "i3": "queued"})
        # --item repeated, and the job by name; text names the job by id and name, in the singular.
        p = self.nj.run("cancel", "night", "--item", "i0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"cancelled 1 item of job {self.job} (night): i0\n")
        out = self.json_of("retry", str(self.job), "i1", "i0")
        self.assertEqual(out["requeued"], 2)
        self.assertEqual([m["custom_id"] for m in out["items"]], ["i1", "i0"])
        self.assertEqual(self.states(), {"i0": "queued", "i1": "queued", "i2": "cancelled", "i3": "queued"})
        retried = [e for e in self.nj.events("retried") if e[0] is not None]
        self.assertEqual(len(retried), 2)
        self.assertEqual({e[2]["from"] for e in retried}, {"cancelled"})

        p = self.nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.states(), {"i0": "done", "i1": "done", "i2": "cancelled", "i3": "done"})
        out = self.json_of("retry", str(self.job), "i2")
        self.assertEqual(out["items"], [{"custom_id": "i2", "from": "cancelled"}])
        p = self.nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        results = {r["custom_id"]: r["output_ids"] for r in self.nj.results(self.job)}
        for i in range(4):
            self.assertEqual(results[f"i{i}"], njtest.reference_output(ARGS.bin, MODEL, item(i)), i)

    def test_wrong_ids_and_states_change_nothing(self):
        self.json_of("cancel", str(self.job), "--item", "i1")
        before = self.nj.dump()
        cases = [
            (["cancel", str(self.job), "--item", "i0", "--item", "nope"], ["'nope'", "nothing changed"]),
            # options before the job as after it
            (["cancel", "--item", "i0", "--item", "i1", str(self.job)], ["'i1' is cancelled", "queued or running"]),
            (["retry", str(self.job), "i1", "i0"], ["'i0' is queued", "failed or cancelled"]),
            (["retry", str(self.job), "ghost"], ["'ghost'"]),
        ]
        for args, needles in cases:
            p = self.nj.run(*args)
            self.assertEqual(p.returncode, 3, (args, p.stderr))
            self.assertIn(f"job {self.job} (night)", p.stderr, args)
            for n in needles:
                self.assertIn(n, p.stderr, args)
            self.assertEqual(self.nj.dump(), before, args)
            p = self.nj.run(*args, "--output", "json")
            self.assertEqual(json.loads(p.stdout)["error"]["code"], 3, args)

    def test_whole_job_still_works_with_json(self):
        out = self.json_of("cancel", str(self.job))
        self.assertEqual(out["cancelled"], 4)
        out = self.json_of("retry", str(self.job))
        self.assertEqual(out["requeued"], 4)
        self.assertEqual(self.json_of("retry", str(self.job))["requeued"], 0)
        p = self.nj.run("retry", str(self.job))
        self.assertEqual(p.stdout, f"requeued 0 items of job {self.job} (night)\n")


if __name__ == "__main__":
    njtest.main(globals())
