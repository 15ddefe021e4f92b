#!/usr/bin/env python3
"""`nightjar submit`: valid specs are queued; bad specs are rejected with the file and line,
a non-zero exit, and the store left exactly as it was."""
import json
import os
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = None


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("submit-")
    MODEL = njtest.make_model(os.path.join(WORK, "models", "tiny"))


GOOD = """\
name: good
model: models/tiny
kind: generate
defaults: {max_tokens: 5, temperature: 0.5, seed: 9}
items:
  - id: a
    prompt_ids: [3, 7, 11]
  - id: b
    prompt_ids: [5]
    max_tokens: 8
    temperature: 0
"""

# (name, spec text, 1-based line the error must name, text the message must contain)
BAD = [
    ("malformed YAML", "name: x\nmodel: models/tiny\nkind: generate\nitems: [{id: a, prompt_ids: [1, 2]\n",
     5, "end of"),
    ("unknown key", "name: x\nmodel: models/tiny\nkind: generate\ncolour: red\nitems:\n  - id: a\n    prompt_ids: [1]\n",
     4, "unknown key 'colour'"),
    ("unknown item key", "name: x\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n    promt: hi\n"
     "    prompt_ids: [1]\n", 6, "unknown key 'promt'"),
    ("missing model", "name: x\nmodel: models/nope\nkind: generate\nitems:\n  - id: a\n    prompt_ids: [1]\n",
     2, "models/nope"),
    ("duplicate ids", "name: x\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n    prompt_ids: [1]\n"
     "  - id: a\n    prompt_ids: [2]\n", 7, "duplicate id 'a' (first used at line 5)"),
    ("empty items", "name: x\nmodel: models/tiny\nkind: generate\nitems: []\n", 4, "no items"),
    ("missing items", "name: x\nmodel: models/tiny\nkind: generate\n", 1, "missing required key 'items'"),
    ("both prompts", "name: x\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n    prompt: hi\n"
     "    prompt_ids: [1]\n", 7, "not both"),
    ("token id outside the vocabulary", "name: x\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n"
     "    prompt_ids: [1, 256]\n", 6, "outside the model's vocabulary"),
    ("text prompt without a tokenizer", "name: x\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n"
     "    prompt: Once upon a time\n", 6, "has none (no tiktoken.model); give prompt_ids instead"),
    ("bad type", "name: x\nmodel: models/tiny\nkind: generate\ndefaults:\n  max_tokens: lots\nitems:\n"
     "  - id: a\n    prompt_ids: [1]\n", 5, "expected a whole number"),
    ("bad memory", "name: x\nmodel: models/tiny\nkind: generate\nmemory: 8 furlongs\nitems:\n  - id: a\n"
     "    prompt_ids: [1]\n", 4, "8 furlongs"),
    ("unknown kind", "name: x\nmodel: models/tiny\nkind: summarize\nitems:\n  - id: a\n    prompt_ids: [1]\n",
     3, "unknown kind 'summarize'"),
    ("duplicate key", "name: x\nname: y\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n    prompt_ids: [1]\n",
     2, "duplicate key 'name'"),
    ("top_p out of range", "name: x\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n    prompt_ids: [1]\n"
     "    top_p: 1.5\n", 7, "out of range"),
]


class Submit(unittest.TestCase):
    def nj(self, name):
        return njtest.Nightjar(ARGS.bin, os.path.join(WORK, "home-" + name))

    def spec(self, name, text):
        path = os.path.join(WORK, name.replace(" ", "_") + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_valid_spec_is_queued_with_defaults_and_overrides(self):
        nj = self.nj("good")
        p = nj.run("submit", self.spec("good", GOOD))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "1")
        st = nj.status(1)
        self.assertEqual(st["job"]["items"]["queued"], 2)
        self.assertEqual(st["job"]["tokens_planned"], 13)
        self.assertEqual([i["custom_id"] for i in st["items"]], ["a", "b"])
        params = {cid: json.loads(p) for cid, p in nj.query("SELECT custom_id, params FROM items")}
        self.assertEqual(params["a"], {"max_tokens": 5, "temperature": 0.5, "top_k": 0, "top_p": 1.0, "seed": 9,
                                       "ignore_eos": False})
        self.assertEqual(params["b"]["max_tokens"], 8)
        self.assertEqual(params["b"]["temperature"], 0)
        self.assertEqual(params["b"]["seed"], 9)
        (model_dir,) = nj.query("SELECT model_dir FROM jobs")[0]
        self.assertEqual(model_dir, MODEL, "a relative model path resolves against the spec's directory")

    def test_relative_model_path_does_not_depend_on_the_working_directory(self):
        nj = self.nj("cwd")
        spec = self.spec("cwd", GOOD)
        p = subprocess.run(nj.cmd("submit", spec, "--output", "json"), capture_output=True, text=True, cwd="/")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["items"], 2)

    def test_bad_specs_name_file_and_line_and_change_nothing(self):
        nj = self.nj("bad")
        nj.submit(self.spec("good-first", GOOD))
        before = nj.dump()
        for name, text, line, needle in BAD:
            with self.subTest(name):
                path = self.spec(name, text)
                p = nj.run("submit", path)
                self.assertEqual(p.returncode, 3, f"{name}: exit code (stderr: {p.stderr})")
                self.assertIn(f"{path}:{line}:", p.stderr, f"{name}: names the file and line")
                self.assertIn(needle, p.stderr, name)
                self.assertEqual(p.stdout, "", name)
                self.assertEqual(nj.dump(), before, f"{name}: the store is unchanged")

    def test_all_errors_of_a_spec_are_reported_together(self):
        nj = self.nj("many")
        path = self.spec("many", "name: x\nmodel: models/tiny\nkind: generate\nitems:\n  - id: a\n    bogus: 1\n"
                                 "    prompt_ids: [1]\n  - id: a\n    prompt_ids: []\n")
        p = nj.run("submit", path)
        self.assertEqual(p.returncode, 3)
        for line in (6, 8, 9):
            self.assertIn(f"{path}:{line}:", p.stderr)

    def test_rejected_spec_does_not_create_a_home(self):
        nj = self.nj("never")
        p = nj.run("submit", self.spec("dup", BAD[4][1]))
        self.assertEqual(p.returncode, 3)
        self.assertFalse(os.path.exists(nj.home))

    def test_missing_spec_file_is_named(self):
        nj = self.nj("nofile")
        p = nj.run("submit", os.path.join(WORK, "absent.yaml"))
        self.assertEqual(p.returncode, 3)
        self.assertIn("absent.yaml", p.stderr)

    def test_empty_spec(self):
        nj = self.nj("empty")
        path = self.spec("empty", "")
        p = nj.run("submit", path)
        self.assertEqual(p.returncode, 3)
        self.assertIn(path, p.stderr)

    def test_home_from_environment(self):
        home = os.path.join(WORK, "home-env")
        env = dict(os.environ, NIGHTJAR_HOME=home)
        p = subprocess.run([ARGS.bin, "submit", self.spec("env", GOOD)], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(os.path.join(home, "nightjar.db")))

    def test_commands_on_a_home_without_store_fail_clearly(self):
        nj = self.nj("nothing")
        for cmd in (["status"], ["results", "1"], ["cancel", "1"], ["retry", "1"]):
            p = nj.run(*cmd)
            self.assertEqual(p.returncode, 3, cmd)
            self.assertIn("no job store", p.stderr)

    def test_only_submit_creates_a_home(self):
        """Issue 34: a mistyped home must not run an empty night and exit 0. run and report
        refuse a home with no job store (exit 3, naming the path and NIGHTJAR_HOME) and
        create nothing; --home and NIGHTJAR_HOME alike."""
        missing = os.path.join(WORK, "no", "such", "dir")
        for cmd in (["run", "--drain"], ["run", "--drain", "--exclusive"], ["report"],
                    ["report", "--out", os.path.join(WORK, "r.html")]):
            p = subprocess.run([ARGS.bin, *cmd, "--home", missing], capture_output=True, text=True)
            self.assertEqual(p.returncode, 3, (cmd, p.stderr))
            self.assertIn(missing, p.stderr)
            self.assertIn("NIGHTJAR_HOME", p.stderr)
            self.assertFalse(os.path.exists(missing), cmd)
        env = dict(os.environ, NIGHTJAR_HOME=missing)
        p = subprocess.run([ARGS.bin, "run", "--drain"], capture_output=True, text=True, env=env)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(missing, p.stderr)
        self.assertFalse(os.path.exists(missing))
        # An existing directory without a store is refused too, and left as it was.
        empty = os.path.join(WORK, "empty-home")
        os.makedirs(empty, exist_ok=True)
        p = subprocess.run([ARGS.bin, "run", "--drain", "--home", empty], capture_output=True, text=True)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(os.listdir(empty), [])

    def test_unknown_job_is_named(self):
        nj = self.nj("unknown")
        nj.submit(self.spec("u", GOOD))
        p = nj.run("results", "nightly-xyz")
        self.assertEqual(p.returncode, 3)
        self.assertIn("nightly-xyz", p.stderr)


if __name__ == "__main__":
    njtest.main(globals())
