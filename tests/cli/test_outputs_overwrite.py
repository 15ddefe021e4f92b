#!/usr/bin/env python3
"""Issue 16, bug 1: `outputs:` could overwrite anything (the job store, the job's own inputs,
its spec, any absolute or `../` path), and so could `results --out`. The policy now: outputs
resolve (symlinks followed) inside the spec's directory or a directory `submit
--allow-outputs DIR` names; never inside a home, never the spec or an input, never both
outputs one file; refused at validate/submit (exit 3, naming the key and the resolved path)
and checked again right before writing."""
import json
import os
import shutil
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
TEMPLATE = "Ticket: {document}\nLabel:\n"
LABELS = ["billing", "bug"]
DOCS = ["I was charged twice.", "The app crashes on start."]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("outputs-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"), extra=["--tokenizer"])


class OutputsCannotOverwrite(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.nj = njtest.Nightjar(ARGS.bin, self.home)
        # A store with one finished job in it, whose loss the tests would see.
        first = self.spec("first", outputs=None)
        self.first = self.nj.submit(first)
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.before = self.nj.dump()

    def spec(self, name, outputs, inputs=None, spec_dir=None):
        spec_dir = spec_dir or self.dir
        os.makedirs(spec_dir, exist_ok=True)
        lines = [f"name: {name}", f"model: {json.dumps(MODEL)}", "kind: classify",
                 f"template: {json.dumps(TEMPLATE)}", f"labels: {json.dumps(LABELS)}"]
        if inputs is None:
            lines.append("items:")
            lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(DOCS)]
        else:
            lines.append(f"inputs: {json.dumps(inputs)}")
        if outputs is not None:
            lines.append(f"outputs: {json.dumps(outputs)}")
        path = os.path.join(spec_dir, f"{name}.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def assert_refused(self, spec, key, resolved, why, *extra):
        """validate and submit both refuse (exit 3) naming the key and the resolved path, and
        the store is exactly as it was."""
        for cmd in ("validate", "submit"):
            if cmd == "validate":  # validate finds the home as submit would: NIGHTJAR_HOME
                p = subprocess.run([ARGS.bin, cmd, spec, *extra], capture_output=True, text=True,
                                   timeout=300, env=dict(os.environ, NIGHTJAR_HOME=self.home))
            else:
                p = self.nj.run(cmd, spec, *extra)
            self.assertEqual(p.returncode, 3, f"{cmd}: {p.stdout}{p.stderr}")
            self.assertIn(f"outputs.{key}", p.stderr)
            self.assertIn(resolved, p.stderr)
            self.assertIn(why, p.stderr)
        self.assertEqual(self.nj.dump(), self.before)
        self.assertEqual(self.nj.integrity(), ["ok"])

    def test_an_output_naming_the_job_store_is_refused(self):
        db = os.path.join(self.home, "nightjar.db")
        spec = self.spec("evil", {"jsonl": db})
        self.assert_refused(spec, "jsonl", db, "inside the home")
        # An allowed directory that covers the home does not make it writable.
        self.assert_refused(spec, "jsonl", db, "inside the home", "--allow-outputs", self.dir)
        # Nor does a relative path from a spec that sits inside the home.
        spec = self.spec("evil2", {"csv": "nightjar.db"}, spec_dir=self.home)
        self.assert_refused(spec, "csv", db, "inside the home")

    def test_any_directory_holding_a_job_store_is_a_home(self):
        other_home = os.path.join(self.dir, "other-home")
        other = njtest.Nightjar(ARGS.bin, other_home)
        other.submit(self.spec("other", outputs=None))
        target = os.path.join(other_home, "nightjar.db")
        spec = self.spec("evil", {"jsonl": target})
        self.assert_refused(spec, "jsonl", target, "inside the home", "--allow-outputs", self.dir)

    def test_an_output_naming_an_input_or_the_spec_is_refused(self):
        docs = os.path.join(self.dir, "docs.jsonl")
        with open(docs, "w") as f:
            for k, d in enumerate(DOCS):
                f.write(json.dumps({"id": f"j{k}", "text": d}) + "\n")
        spec = self.spec("own-input", {"jsonl": "docs.jsonl"}, inputs={"jsonl": "docs.jsonl"})
        self.assert_refused(spec, "jsonl", docs, "one of the job's inputs")
        spec = self.spec("own-spec", {"csv": "own-spec.yaml"})
        self.assert_refused(spec, "csv", spec, "the job's spec")
        tickets = os.path.join(self.dir, "tickets")
        os.makedirs(tickets)
        for k, d in enumerate(DOCS):
            with open(os.path.join(tickets, f"t{k}.txt"), "w") as f:
                f.write(d)
        spec = self.spec("own-glob", {"jsonl": "tickets/t1.txt"}, inputs={"glob": "tickets/*.txt"})
        self.assert_refused(spec, "jsonl", os.path.join(tickets, "t1.txt"), "inputs glob")
        with open(docs) as f:
            self.assertIn('"j0"', f.read())

    def test_paths_outside_the_spec_directory_need_allow_outputs(self):
        outside = os.path.join(WORK, "outside-" + self.id().split(".")[-1])
        os.makedirs(outside)
        escape = os.path.join(self.dir, "sub")
        os.makedirs(escape)
        target = os.path.normpath(os.path.join(escape, "../../x.jsonl"))
        spec = self.spec("dotdot", {"jsonl": "../../x.jsonl"}, spec_dir=escape)
        self.assert_refused(spec, "jsonl", target, "outside the spec's directory")
        absolute = os.path.join(outside, "abs.csv")
        spec = self.spec("absolute", {"csv": absolute})
        self.assert_refused(spec, "csv", absolute, "outside the spec's directory")
        # A symlink inside the spec's directory that leads outside resolves outside.
        os.symlink(outside, os.path.join(self.dir, "link"))
        spec = self.spec("symlink", {"jsonl": "link/r.jsonl"})
        self.assert_refused(spec, "jsonl", os.path.join(outside, "r.jsonl"), "outside the spec's directory")
        # --allow-outputs covers it: accepted, and the file is written there.
        p = subprocess.run([ARGS.bin, "validate", spec, "--allow-outputs", outside], capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        job = json.loads(self.nj.run("submit", spec, "--allow-outputs", outside, "--output", "json").stdout)["job_id"]
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(outside, "r.jsonl")) as f:
            self.assertEqual([json.loads(line) for line in f], self.nj.results(job))

    def test_both_outputs_naming_one_file_is_an_error(self):
        spec = self.spec("same", {"jsonl": "out/r.txt", "csv": "out/../out/r.txt"})
        self.assert_refused(spec, "csv", os.path.join(self.dir, "out", "r.txt"), "names the same file as outputs.jsonl")

    def test_outputs_are_checked_again_right_before_writing(self):
        os.makedirs(os.path.join(self.dir, "out"))
        spec = self.spec("later", {"jsonl": "out/nightjar.db"})
        self.nj.submit(spec)
        before = os.path.getsize(os.path.join(self.home, "nightjar.db"))
        # Overnight the output directory becomes a symlink into the home.
        shutil.rmtree(os.path.join(self.dir, "out"))
        os.symlink(self.home, os.path.join(self.dir, "out"))
        self.nj.run("run", *RUN, "--drain")
        self.assertEqual(self.nj.integrity(), ["ok"])
        self.assertGreaterEqual(os.path.getsize(os.path.join(self.home, "nightjar.db")), before)
        self.assertEqual(len(self.nj.results(self.first)), len(DOCS), "the first job survives")
        failed = self.nj.events("outputs_failed")
        self.assertEqual(len(failed), 1)
        self.assertIn("inside the home", failed[0][2]["error"])

    def test_results_out_refuses_a_path_inside_the_home(self):
        db = os.path.join(self.home, "nightjar.db")
        p = self.nj.run("results", str(self.first), "--out", db)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("inside the home", p.stderr)
        self.assertEqual(self.nj.dump(), self.before)
        self.assertEqual(self.nj.integrity(), ["ok"])
        out = os.path.join(self.dir, "results.jsonl")
        p = self.nj.run("results", str(self.first), "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(out))


if __name__ == "__main__":
    njtest.main(globals())
