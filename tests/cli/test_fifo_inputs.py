#!/usr/bin/env python3
"""Issue 16, bug 4: opening a FIFO blocked forever in open(2). Every file Nightjar reads (a
spec, a glob-matched or JSON Lines document input, an OpenAI batch file, config.json,
`generate --load-state`, an item's state checkpoint under `run`) is refused at once when it
is not a regular file, naming it; none of these commands may hang."""
import json
import os
import shutil
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
TIMEOUT_S = 60  # far beyond what any of these commands needs; a blocked open never returns


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("fifo-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"), extra=["--tokenizer"])


def fifo(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mkfifo(path)
    return path


class FifosAreRefusedWithoutBlocking(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.nj = njtest.Nightjar(ARGS.bin, self.home)

    def nightjar(self, *args):
        try:
            return subprocess.run([ARGS.bin, *args], capture_output=True, text=True, timeout=TIMEOUT_S,
                                  env=dict(os.environ, NIGHTJAR_HOME=self.home))
        except subprocess.TimeoutExpired:
            self.fail(f"nightjar {' '.join(args)} blocked for {TIMEOUT_S} s")

    def assert_refused(self, p, path):
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(path, p.stderr)
        self.assertIn("not a regular file", p.stderr)

    def classify_spec(self, inputs):
        path = os.path.join(self.dir, "job.yaml")
        with open(path, "w") as f:
            f.write(f"name: triage\nmodel: {json.dumps(MODEL)}\nkind: classify\n"
                    f"template: \"Ticket: {{document}}\\nLabel:\\n\"\nlabels: [billing, bug]\n"
                    f"inputs: {json.dumps(inputs)}\n")
        return path

    def test_a_spec_that_is_a_fifo(self):
        spec = fifo(os.path.join(self.dir, "job.yaml"))
        for cmd in ("validate", "submit"):
            self.assert_refused(self.nightjar(cmd, spec), spec)

    def test_document_inputs_that_are_fifos(self):
        tickets = os.path.join(self.dir, "tickets")
        os.makedirs(tickets)
        with open(os.path.join(tickets, "a.txt"), "w") as f:
            f.write("I was charged twice.")
        pipe = fifo(os.path.join(tickets, "b.txt"))
        p = self.nightjar("validate", self.classify_spec({"glob": "tickets/*.txt"}))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("tickets/b.txt", p.stderr)
        self.assertIn("not a regular file", p.stderr)
        os.remove(pipe)
        fifo(os.path.join(self.dir, "docs.jsonl"))
        p = self.nightjar("submit", self.classify_spec({"jsonl": "docs.jsonl"}))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("docs.jsonl", p.stderr)
        self.assertIn("not a regular file", p.stderr)

    def test_an_openai_batch_file_that_is_a_fifo(self):
        batch = fifo(os.path.join(self.dir, "requests.jsonl"))
        self.assert_refused(self.nightjar("validate", "--openai-batch", batch, "--model", MODEL), batch)

    def test_a_config_json_that_is_a_fifo(self):
        model = os.path.join(self.dir, "model")
        shutil.copytree(MODEL, model)
        os.remove(os.path.join(model, "config.json"))
        config = fifo(os.path.join(model, "config.json"))
        self.assert_refused(self.nightjar("generate", "--model", model, "--prompt-ids", "1,2", "--max-tokens", "2"),
                            config)

    def test_load_state_from_a_fifo(self):
        state = fifo(os.path.join(self.dir, "state.bin"))
        self.assert_refused(self.nightjar("generate", "--model", MODEL, "--load-state", state, "--max-tokens", "2"),
                            state)

    def test_run_with_a_fifo_where_an_item_checkpoint_belongs(self):
        spec = njtest.write_spec(os.path.join(self.dir, "gen.yaml"), "gen", MODEL,
                                 [{"id": "a", "prompt_ids": [3, 7, 11], "max_tokens": 6}])
        job = self.nj.submit(spec)
        (item_id,), = self.nj.query("SELECT id FROM items")
        fifo(os.path.join(self.home, "checkpoints", f"item-{item_id}", "state"))
        p = self.nightjar("run", *RUN, "--drain", "--home", self.home)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("not a regular file", p.stderr)
        (r,) = self.nj.results(job)
        self.assertEqual(r["status"], "done")
        item = {"prompt_ids": [3, 7, 11], "max_tokens": 6}
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, item))


if __name__ == "__main__":
    njtest.main(globals())
