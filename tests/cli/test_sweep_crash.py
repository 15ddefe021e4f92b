#!/usr/bin/env python3
"""A layer sweep survives crashes and stops (issue 32, crash safety): `run` saves a window's
layer boundaries (runner/durable/sweep_boundaries.h) and a sweep of the same window starts at
the last one saved. A SIGKILL right after each layer boundary is saved, and SIGKILLs and SIGTERMs
at random instants, give the uninterrupted run's labels, probabilities, margins and output_ids,
one result per item; the boundary files are gone once the job has finished."""
import glob
import json
import os
import random
import signal
import subprocess
import time
import unittest

import njtest
from test_sweep import DOCS, LABELS, answer  # the same triage window as cli_sweep

ARGS = None
WORK = MODEL = None
# A boundary at every layer (--checkpoint-seconds 0.001), one thread (slower sweeps: more instants
# inside them), all documents in one window unless a life says otherwise.
RUN = ["--drain", "--schedule", "sweep", "--threads", "1", "--checkpoint-seconds", "0.001", "--log-seconds", "1000"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("sweep-crash-")
    MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")


def layers():
    with open(os.path.join(MODEL, "config.json")) as f:
        c = json.load(f)
    return c.get("text_config", c)["num_hidden_layers"]


def end_life(test, nj, proc, rng, log_path):
    """Ends a run's life: a SIGTERM (a graceful stop, saving and exiting 0) three times in ten
    while it runs, else a SIGKILL; the store stays intact either way."""
    if proc.poll() is None and rng.random() < 0.3:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)
        except Exception:
            proc.kill()
            rc = proc.wait()
        test.assertIn(rc, (0, -signal.SIGTERM), f"a stopped run exited with {rc} (see {log_path})")
    else:
        proc.kill()
        rc = proc.wait()
        test.assertIn(rc, (0, -signal.SIGKILL), f"run exited with {rc} (see {log_path})")
    test.assertEqual(nj.query("PRAGMA integrity_check")[0][0], "ok")


class SweepCrash(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.spec = os.path.join(self.dir, "triage.yaml")
        lines = ["name: triage", f"model: {json.dumps(MODEL)}", "kind: classify",
                 "template: \"Classify the ticket as one of: {labels}.\\nTicket: {document}\\nLabel:\\n\"",
                 f"labels: {json.dumps(LABELS)}", "max_attempts: 1000", "items:"]
        lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(DOCS)]
        with open(self.spec, "w") as f:
            f.write("\n".join(lines) + "\n")
        calm = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-calm"))
        job = calm.submit(self.spec)
        p = calm.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.reference = [answer(r) for r in calm.results(job)]
        self.assertEqual(len(self.reference), len(DOCS))

    def boundary_files(self, nj):
        return glob.glob(os.path.join(nj.home, "checkpoints", "sweep-*"))

    def check_finished(self, nj, job):
        results = nj.results(job)
        self.assertEqual([answer(r) for r in results], self.reference)
        (n_results,) = nj.query("SELECT count(*) FROM results")[0]
        self.assertEqual(n_results, len(DOCS), "one result per item")
        self.assertEqual(self.boundary_files(nj), [], "the job's boundary files are removed")

    def test_a_sigkill_after_each_layer_boundary_resumes_there(self):
        for layer in range(1, layers()):
            with self.subTest(layer=layer):
                nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, f"home-{layer}"))
                job = nj.submit(self.spec)
                env = dict(os.environ, NIGHTJAR_TEST_SWEEP_KILL_AT=str(layer))
                p = nj.run("run", *RUN, env=env)
                self.assertEqual(p.returncode, -signal.SIGKILL, p.stderr)
                self.assertEqual(len(self.boundary_files(nj)), 1, "the boundary was saved before the kill")
                p = nj.run("run", *RUN)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"the window resumes at layer {layer} ", p.stderr)
                self.check_finished(nj, job)

    def test_sigkills_and_sigterms_at_random_instants_lose_nothing(self):
        seed = ARGS.seed if ARGS.seed is not None else int(time.time() * 1000) % 1000000
        print(f"seed {seed}", flush=True)
        rng = random.Random(seed)
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        job = nj.submit(self.spec)
        log_path = os.path.join(self.dir, "runs.log")
        resumed = 0
        for life in range(ARGS.lives):
            with open(log_path, "a") as log:
                batch = ["--batch", "3"] if life % 3 == 2 else []  # windows of 3 in some lives
                proc = nj.popen("run", *RUN, *batch, stderr=log)
            time.sleep(rng.uniform(0.05, ARGS.max_delay))
            end_life(self, nj, proc, rng, log_path)
            done = nj.query("SELECT count(*) FROM items WHERE state = 'done'")[0][0]
            if done == len(DOCS):
                break
        with open(log_path) as f:
            resumed = f.read().count("the window resumes at layer")
        print(f"{life + 1} lives, {resumed} sweeps resumed at a saved layer", flush=True)
        p = nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_finished(nj, job)


class GenerateSweepCrash(unittest.TestCase):
    """A generation whose prompts go through layer sweeps (run --schedule sweep under a budget):
    SIGKILLs and SIGTERMs at random instants, inside the prompts' sweeps and the passes after,
    give the uninterrupted run's tokens, one result per item."""

    def test_sigkills_and_sigterms_at_random_instants_lose_nothing(self):
        self.dir = os.path.join(WORK, "generate")
        os.makedirs(self.dir)
        items = [{"id": f"g{k}", "prompt": " ".join((DOCS[k % len(DOCS)] + " " + DOCS[-1]).split()[: 6 + 3 * k]),
                  "max_tokens": 4 + (k * 5) % 11} for k in range(12)]

        def spec(memory):
            path = os.path.join(self.dir, f"gen-{memory}.yaml")
            lines = ["name: gen", f"model: {json.dumps(MODEL)}", "kind: generate", "max_attempts: 1000"]
            lines += [f"memory: {memory}B"] if memory else []
            lines += ["items:"] + [f"  - {json.dumps(it)}" for it in items]
            with open(path, "w") as f:
                f.write("\n".join(lines) + "\n")
            return path

        # Twice the model's least budget for one item: the weights stream, and the prompt window fits.
        least = json.loads(subprocess.run([ARGS.bin, "plan", "--model", MODEL, "--memory", "1KiB", "--output", "json"],
                                          capture_output=True, text=True).stdout)["min_memory_bytes"]
        budget = spec(2 * least)
        calm = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-calm"))
        job = calm.submit(budget)
        p = calm.run("run", "--drain", "--schedule", "passes", "--batch", "1", "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        reference = [(r["custom_id"], r["output_ids"]) for r in calm.results(job)]
        swept = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-swept"))
        job = swept.submit(budget)
        p = swept.run("run", "--drain", "--schedule", "sweep", "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([(r["custom_id"], r["output_ids"]) for r in swept.results(job)], reference)
        (ended,) = [d for _, _, d in swept.events("run_ended")]
        self.assertGreater(ended["sweeps"], 0, "the prompts go through sweeps at this budget")

        seed = ARGS.seed if ARGS.seed is not None else int(time.time() * 1000) % 1000000
        print(f"seed {seed}", flush=True)
        rng = random.Random(seed)
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        job = nj.submit(budget)
        run = ["run", "--drain", "--schedule", "sweep", "--threads", "1", "--checkpoint-seconds", "0.001",
               "--log-seconds", "1000"]
        log_path = os.path.join(self.dir, "runs.log")
        for life in range(ARGS.lives):
            with open(log_path, "a") as log:
                proc = nj.popen(*run, stderr=log)
            time.sleep(rng.uniform(0.02, ARGS.max_delay / 3))
            end_life(self, nj, proc, rng, log_path)
            if nj.query("SELECT count(*) FROM items WHERE state = 'done'")[0][0] == len(items):
                break
        print(f"{life + 1} lives", flush=True)
        p = nj.run(*run)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([(r["custom_id"], r["output_ids"]) for r in nj.results(job)], reference)
        self.assertEqual(nj.query("SELECT count(*) FROM results")[0][0], len(items), "one result per item")


if __name__ == "__main__":
    njtest.main(globals(), [("--seed", {"type": int, "default": None}),
                            ("--lives", {"type": int, "default": 12}),
                            ("--max-delay", {"type": float, "default": 1.5})])
