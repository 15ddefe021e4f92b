#!/usr/bin/env python3
"""Issue 16, item 10: the engine numerics version. A state checkpoint written by a binary whose
arithmetic differs (a changed canonical order) must not be silently continued with different
arithmetic. State files record the version (format 2; format 1 files predate it and count as
unrecorded), and so does the store, per item (migration 007). The policy, for an item whose
stored output came from other arithmetic: its checkpoint is never restored; the stored tokens
are replayed from the prompt with this binary's arithmetic and kept only if it draws every one
of them again; otherwise the item restarts from its prompt, with a `numerics_restart` event.
Either way the output is the one this binary gives uninterrupted."""
import ctypes
import json
import os
import signal
import sqlite3
import struct
import subprocess
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
XXH = ctypes.CDLL("libxxhash.so.0")
XXH.XXH3_64bits_withSeed.restype = ctypes.c_uint64
XXH.XXH3_64bits_withSeed.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("numerics-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


def rewrite_head(path, format_version, numerics):
    """The head as another binary would have written it: its format version (u32 at 8) and
    numerics version (u32 at 44, reserved 0 in format 1), with the header checksum redone."""
    with open(path, "r+b") as f:
        head = bytearray(f.read(56))
        struct.pack_into("<I", head, 8, format_version)
        struct.pack_into("<I", head, 44, numerics)
        struct.pack_into("<Q", head, 48, XXH.XXH3_64bits_withSeed(bytes(head[:48]), 48, 0))
        f.seek(0)
        f.write(head)


def long_item():
    return {"id": "long", "prompt_ids": [(i * 13 + 5) % 256 for i in range(60)], "max_tokens": 400,
            "temperature": 0.7, "seed": 11}


class NumericsVersion(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def test_generate_refuses_a_state_of_other_numerics(self):
        state = os.path.join(self.dir, "state.bin")
        p = subprocess.run([ARGS.bin, "generate", "--model", MODEL, "--prompt-ids", "3,7,11", "--max-tokens", "4",
                            "--save-state", state], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        for fmt, numerics, said in ((2, 999, "numerics version 999"), (1, 0, "before numerics versions")):
            rewrite_head(state, fmt, numerics)
            p = subprocess.run([ARGS.bin, "generate", "--model", MODEL, "--load-state", state, "--max-tokens", "4"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn(said, p.stderr)
            self.assertIn("this binary computes with version", p.stderr)

    def stopped_item(self):
        """An item stopped mid-way (tokens and a checkpoint stored), as an older binary would have
        left it: no numerics version in the store, a format 1 checkpoint."""
        job = self.nj.submit(njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", MODEL, [long_item()]))
        proc = self.nj.popen("run", *RUN, "--drain")
        deadline = time.time() + 120
        while self.nj.query("SELECT tokens_done FROM items")[0][0] < 20:
            self.assertIsNone(proc.poll())
            self.assertLess(time.time(), deadline)
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=120), 0)
        ((item_id, done, version),) = self.nj.query("SELECT id, tokens_done, numerics_version FROM items")
        self.assertIsNotNone(version, "this binary records its numerics version")
        self.assertEqual(len(self.nj.query("SELECT * FROM checkpoints")), 1)
        con = sqlite3.connect(self.nj.db())
        con.execute("UPDATE items SET numerics_version = NULL")
        con.commit()
        con.close()
        rewrite_head(os.path.join(self.nj.home, "checkpoints", f"item-{item_id}", "state"), 1, 0)
        return job, done, version

    def test_an_item_spanning_an_upgrade_keeps_its_tokens_when_the_replay_draws_them_all(self):
        job, done, version = self.stopped_item()
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        (changed,) = [d for _, k, d in self.nj.events("numerics_changed")]
        self.assertEqual((changed["stored"], changed["current"], changed["tokens_done"]), (None, version, done))
        (resumed,) = [d for _, k, d in self.nj.events("resumed")]
        self.assertEqual(resumed["from"], "start", "the checkpoint of other arithmetic is never restored")
        self.assertEqual(resumed["replayed_tokens"], done)
        self.assertEqual(self.nj.events("numerics_restart"), [])
        (r,) = self.nj.results(job)
        self.assertEqual((r["status"], r["attempts"]), ("done", 0))
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, long_item()))
        self.assertEqual(r["engine"]["numerics_version"], version)
        self.assertEqual(self.nj.query("SELECT numerics_version FROM items")[0][0], version)

    def test_an_item_whose_stored_tokens_this_arithmetic_does_not_draw_restarts_from_its_prompt(self):
        job, done, version = self.stopped_item()
        con = sqlite3.connect(self.nj.db())  # what other arithmetic drew after position 5
        con.execute("UPDATE tokens SET token_id = (token_id + 1) % 256 WHERE pos >= 5")
        con.commit()
        con.close()
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        (restart,) = [d for _, k, d in self.nj.events("numerics_restart")]
        self.assertEqual(restart["dropped_tokens"], done)
        self.assertIn("replay diverged at output token 5", restart["error"])
        (r,) = self.nj.results(job)
        self.assertEqual((r["status"], r["attempts"]), ("done", 0))
        self.assertEqual(r["output_ids"], njtest.reference_output(ARGS.bin, MODEL, long_item()))
        self.assertEqual(self.nj.integrity(), ["ok"])

    def test_the_same_numerics_still_fail_a_diverging_replay(self):
        job, done, version = self.stopped_item()
        con = sqlite3.connect(self.nj.db())  # this binary's own tokens, tampered with
        con.execute("UPDATE items SET numerics_version = ?", (version,))
        con.execute("UPDATE tokens SET token_id = (token_id + 1) % 256 WHERE pos >= 5")
        con.execute("UPDATE jobs SET max_attempts = 1")
        con.commit()
        con.close()
        p = self.nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 4, p.stderr)
        (r,) = self.nj.results(job)
        self.assertEqual(r["status"], "failed")
        self.assertIn("replay diverged", r["error"])
        self.assertEqual(self.nj.events("numerics_restart"), [])


if __name__ == "__main__":
    njtest.main(globals())
