#!/usr/bin/env python3
"""A long classify document's prefill survives a stop: it is checkpointed between its
chunks (at --checkpoint-tokens) and at the stop, and the next run resumes it there, without
feeding the document's tokens again; the label and probabilities are bit for bit those of an
uninterrupted run. A damaged checkpoint is refused (an event says why) and the document is
prefilled again."""
import json
import os
import signal
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000", "--drain", "--prefill-chunk", "16", "--checkpoint-tokens", "32"]
LABELS = ["billing", "bug", "feature request", "question"]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("classify-resume-")
    MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")


def write_spec(path, document):
    lines = ["name: long", f"model: {json.dumps(MODEL)}", "kind: classify",
             "template: \"Classify the ticket as one of: {labels}.\\nTicket: {document}\\nLabel:\\n\"",
             f"labels: {json.dumps(LABELS)}", "items:", f"  - {{id: d0, document: {json.dumps(document)}}}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


class ClassifyResume(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        with open(njtest.REPO / "tests/reference/data/bpe_sample/en.txt") as f:
            words = f.read().split()
        self.spec = write_spec(os.path.join(self.dir, "long.yaml"), " ".join(words[:600]))

    def solo(self):
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-solo"))
        job = nj.submit(self.spec)
        p = nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        (r,) = nj.results(job)
        return r

    def stop_mid_document(self, nj):
        """Starts a run and stops it (SIGTERM) once a checkpoint of the document exists."""
        proc = nj.popen("run", *RUN)
        deadline = time.time() + 300
        while not nj.query("SELECT COUNT(*) FROM checkpoints")[0][0]:
            self.assertIsNone(proc.poll(), "the run ended before any document checkpoint")
            self.assertLess(time.time(), deadline)
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=300), 0)
        (state,) = nj.query("SELECT state FROM items")[0]
        self.assertEqual(state, "queued", "the stop put the item back")
        (released,) = [d for _, _, d in nj.events("released")]
        self.assertGreater(released["checkpoint_position"], 0)
        return released["checkpoint_position"]

    def test_a_stopped_document_resumes_from_its_checkpoint(self):
        want = self.solo()
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        job = nj.submit(self.spec)
        self.stop_mid_document(nj)
        p = nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("resuming the document", p.stderr)
        (r,) = nj.results(job)
        self.assertEqual(r["status"], "done")
        for key in ("label", "probabilities", "margin"):
            self.assertEqual(r["details"][key], want["details"][key], key)
        self.assertEqual(r["output_ids"], want["output_ids"])
        # Every token of the document was fed exactly once over the two attempts.
        self.assertEqual(r["engine"]["tokens_fed"], want["engine"]["tokens_fed"])
        self.assertEqual(nj.query("SELECT COUNT(*) FROM checkpoints")[0][0], 0, "the finish drops them")
        self.assertEqual(nj.integrity(), ["ok"])

    def test_a_damaged_checkpoint_is_refused_and_the_document_fed_again(self):
        want = self.solo()
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        job = nj.submit(self.spec)
        self.stop_mid_document(nj)
        # Damage the checkpoint's head: it must be refused, and the document fed again.
        path = nj.query("SELECT path FROM checkpoints")[0][0]
        with open(os.path.join(nj.home, path), "r+b") as f:
            f.seek(64)
            f.write(b"\xff" * 16)
        p = nj.run("run", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("unusable", p.stderr)
        (r,) = nj.results(job)
        for key in ("label", "probabilities", "margin"):
            self.assertEqual(r["details"][key], want["details"][key], key)
        self.assertEqual(len(nj.events("checkpoint_unusable")), 1)


if __name__ == "__main__":
    njtest.main(globals())
