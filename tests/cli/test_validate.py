#!/usr/bin/env python3
"""`nightjar validate SPEC`: the checks of `submit` (syntax, keys, the model, prompt
tokenization), printing OK with the item count or the errors with file:line:col, and never
touching a job store. (tests/schema/test_schema.py runs it over the bad-spec corpus.)"""
import json
import os
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = TOK_MODEL = None


def setUpModule():
    global WORK, MODEL, TOK_MODEL
    WORK = njtest.scratch_dir("validate-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-tok"), extra=["--tokenizer"])


class Validate(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.env = dict(os.environ, NIGHTJAR_HOME=self.home)

    def validate(self, spec, *extra):
        return subprocess.run([ARGS.bin, "validate", spec, *extra], capture_output=True, text=True,
                              timeout=300, env=self.env)

    def spec(self, model, items, **job):
        return njtest.write_spec(os.path.join(self.dir, "job.yaml"), "nightly", model, items, **job)

    def test_a_valid_spec_prints_ok_with_its_item_count(self):
        spec = self.spec(TOK_MODEL, [{"id": "a", "prompt": "Once upon a time"}, {"id": "b", "prompt_ids": [1, 2]},
                                     {"id": "c", "prompt": "The end"}])
        p = self.validate(spec)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"OK {spec}: job 'nightly' (generate), 3 items\n")
        p = self.validate(spec, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual((out["ok"], out["items"], out["kind"], out["model"]), (True, 3, "generate", TOK_MODEL))
        self.assertFalse(os.path.exists(self.home), "validate creates no home or store")

    def test_model_checks_run_like_submit(self):
        # Parses fine; only the model shows the text prompt cannot be tokenized.
        spec = self.spec(MODEL, [{"id": "a", "prompt": "hello"}])
        p = self.validate(spec)
        self.assertEqual(p.returncode, 3)
        self.assertIn(f"{spec}:6:", p.stderr)
        self.assertIn("has none (no tiktoken.model)", p.stderr)
        self.assertEqual(p.stdout, "")
        spec = self.spec(os.path.join(self.dir, "absent"), [{"id": "a", "prompt_ids": [1]}])
        p = self.validate(spec)
        self.assertEqual(p.returncode, 3)
        self.assertIn("absent", p.stderr)

    def test_errors_as_json(self):
        path = os.path.join(self.dir, "bad.yaml")
        with open(path, "w") as f:
            f.write("name: x\nmodel: m\nkind: generate\ncolour: red\nitems:\n  - id: a\n    prompt_ids: []\n")
        p = self.validate(path, "--output", "json")
        self.assertEqual(p.returncode, 3)
        out = json.loads(p.stdout)
        self.assertFalse(out["ok"])
        self.assertEqual(len(out["errors"]), 2, out)
        self.assertEqual(sorted(e[:len(path) + 3] for e in out["errors"]), [f"{path}:4:", f"{path}:7:"], out)

    def test_an_existing_store_is_left_alone(self):
        spec = self.spec(MODEL, [{"id": "a", "prompt_ids": [1, 2]}])
        nj = njtest.Nightjar(ARGS.bin, self.home)
        nj.submit(spec)
        before = nj.dump()
        mtime = os.stat(nj.db()).st_mtime_ns
        self.assertEqual(self.validate(spec).returncode, 0)
        self.assertEqual(nj.dump(), before)
        self.assertEqual(os.stat(nj.db()).st_mtime_ns, mtime)

    def test_missing_file_and_usage(self):
        p = self.validate(os.path.join(self.dir, "absent.yaml"))
        self.assertEqual(p.returncode, 3)
        self.assertIn("absent.yaml", p.stderr)
        p = subprocess.run([ARGS.bin, "validate"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    njtest.main(globals())
