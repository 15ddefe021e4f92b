#!/usr/bin/env python3
"""Crash test: `nightjar run` killed with SIGKILL at random instants, restarted each time.

Proves the runner's first promise (nothing is lost; the output is byte-for-byte an
uninterrupted run's):
  - a job of 8 items on a generated tiny model (greedy and seeded-sampling items, short and
    long prompts, different lengths) is run with dense commit and checkpoint cadences so kills
    land in every phase: start-up, claim, prompt prefill, replay, token loop, commits,
    checkpoint writes, the finish transaction; some kills follow a SIGTERM (a kill during the
    graceful stop). `run` batches them (every item in one pass, items joining as others
    finish; alternate lives run --batch 3), so a kill interrupts many items at once, each at
    its own point, and each resumes from its own checkpoint;
  - after every kill: PRAGMA integrity_check is ok, and every item's stored tokens are a
    prefix of the reference output (nothing wrong is ever committed);
  - when a job completes before the kill count is reached, another copy is submitted, so
    every kill hits a live run;
  - at the end every item of every job is done, its output equals both the uninterrupted
    `run` and plain `nightjar generate`, each item has exactly one result, and the results
    list every custom_id once.

Default: 24 kills (the ctest suite). --long: 200 kills. --seed reproduces a sequence.
--max-delay S: the longest life before a kill (default 0.25 s).
--speculative MODE sets the job's `speculative:` (the suite runs a few kills with ngram:
drafts verified in the same pass must leave the same checkpoints, commits and output). The
model then has a vocabulary of 8 tokens (prompt ids taken modulo 8), where prompt lookup
finds drafts and some are accepted by chance (random weights seldom repeat themselves
otherwise), and the uninterrupted run must have accepted some, so that kills land in
speculating passes.
"""
import os
import random
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402

ARGS = None

# Cadences that make every phase frequent on a model that takes ~1 ms per token.
RUN_FLAGS = ["--drain", "--threads", "1", "--prefill-chunk", "16", "--commit-tokens", "7",
             "--checkpoint-tokens", "45", "--log-seconds", "1000"]


def job_items():
    long_prompt = [(i * 37 + 11) % 256 for i in range(150)]
    return [
        {"id": "greedy-short", "prompt_ids": [3, 7, 11], "max_tokens": 230},
        {"id": "sampled-short", "prompt_ids": [5, 9], "max_tokens": 260, "temperature": 0.8, "seed": 42},
        {"id": "greedy-long-prompt", "prompt_ids": long_prompt, "max_tokens": 120},
        {"id": "sampled-topk", "prompt_ids": [1, 2, 3, 4], "max_tokens": 200, "temperature": 1.1, "top_k": 20,
         "seed": 7},
        {"id": "sampled-long-prompt", "prompt_ids": long_prompt[::-1], "max_tokens": 150, "temperature": 0.6,
         "top_p": 0.9, "seed": 99},
        {"id": "greedy-one-token", "prompt_ids": [200], "max_tokens": 1},
        {"id": "sampled-mid", "prompt_ids": long_prompt[40:70], "max_tokens": 90, "temperature": 0.9, "seed": 5},
        {"id": "greedy-mid", "prompt_ids": [9, 8, 7, 6, 5], "max_tokens": 170},
    ]


class CrashTest(unittest.TestCase):
    def test_sigkill_at_random_instants_loses_nothing(self):
        seed = ARGS.seed if ARGS.seed is not None else int(time.time() * 1000) % 1000000
        kills_wanted = 200 if ARGS.long else ARGS.kills
        print(f"crash test: seed {seed}, {kills_wanted} kills", flush=True)
        rng = random.Random(seed)
        work = njtest.scratch_dir("crash-")
        items = job_items()
        if ARGS.speculative:
            model = njtest.make_model(os.path.join(work, "model"), extra=("--vocab", "8"))
            for it in items:
                it["prompt_ids"] = [t % 8 for t in it["prompt_ids"]]
        else:
            model = njtest.make_model(os.path.join(work, "model"))
        job_keys = {"speculative": ARGS.speculative} if ARGS.speculative else {}
        spec = njtest.write_spec(os.path.join(work, "job.yaml"), "crash", model, items, max_attempts=100000,
                                 **job_keys)
        expected = {it["id"]: njtest.reference_output(ARGS.bin, model, it) for it in items}

        # The uninterrupted run.
        calm = njtest.Nightjar(ARGS.bin, os.path.join(work, "home-calm"))
        calm_job = calm.submit(spec)
        p = calm.run("run", *RUN_FLAGS)
        self.assertEqual(p.returncode, 0, p.stderr)
        calm_results = calm.results(calm_job)
        calm_out = {r["custom_id"]: r["output_ids"] for r in calm_results}
        self.assertEqual(calm_out, expected, "an uninterrupted run must equal plain generate")
        if ARGS.speculative == "ngram":
            accepted = sum(r["engine"]["speculation"]["accepted"] for r in calm_results)
            self.assertGreater(accepted, 0, "prompt lookup's drafts were accepted in the uninterrupted run")

        nj = njtest.Nightjar(ARGS.bin, os.path.join(work, "home"))
        jobs = [nj.submit(spec)]
        log_path = os.path.join(work, "runs.log")
        kills = lives = 0
        # Mean lifetime ~ the start-up plus a few dozen tokens; short ones hit the start-up.
        max_delay = ARGS.max_delay
        while kills < kills_wanted:
            with open(log_path, "a") as log:
                batch = ["--batch", "3"] if lives % 2 else []  # alternate lives: 3 items per pass
                proc = nj.popen("run", *RUN_FLAGS, *batch, stderr=log)
            lives += 1
            time.sleep(rng.uniform(0, max_delay))
            killed = termed = False
            if proc.poll() is None and rng.random() < 0.25:
                proc.send_signal(signal.SIGTERM)  # a kill during the graceful stop
                termed = True
                time.sleep(rng.uniform(0, 0.02))
            if proc.poll() is None:
                proc.kill()
                killed = True
            rc = proc.wait()
            if killed and rc == -signal.SIGKILL:
                kills += 1
            elif termed and rc == -signal.SIGTERM:
                pass  # arrived before the handler was installed: the default action, a crash
            else:
                self.assertEqual(rc, 0, f"run exited with {rc} (see {log_path})")
            self.check_store(nj, expected, f"after life {lives} (kill {kills})")
            if all(s == "done" for (s,) in nj.query("SELECT state FROM items")):
                jobs.append(nj.submit(spec))  # keep every kill on live work

        # Run to the end without interference.
        p = nj.run("run", *RUN_FLAGS)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_store(nj, expected, "at the end")
        for job in jobs:
            results = nj.results(job)
            ids = [r["custom_id"] for r in results]
            self.assertEqual(sorted(ids), sorted(expected), f"job {job}: every custom_id exactly once")
            for r in results:
                self.assertEqual(r["status"], "done", f"job {job} item {r['custom_id']}")
                self.assertEqual(r["output_ids"], expected[r["custom_id"]],
                                 f"job {job} item {r['custom_id']}: output differs from the uninterrupted run")
        (n_results,) = nj.query("SELECT count(*) FROM results")[0]
        (n_items,) = nj.query("SELECT count(*) FROM items")[0]
        self.assertEqual(n_results, n_items, "one result per item")
        ev = nj.events()
        resumes = [d for _, k, d in ev if k == "resumed"]
        from_checkpoint = sum(1 for d in resumes if d["from"] == "checkpoint")
        reclaimed = sum(1 for _, k, _ in ev if k == "lease_reclaimed")
        unusable = sum(1 for _, k, _ in ev if k == "checkpoint_unusable")
        print(f"crash test: {kills} kills over {lives} runs, {len(jobs)} jobs; {reclaimed} leases reclaimed; "
              f"{len(resumes)} resumes ({from_checkpoint} from a checkpoint, {len(resumes) - from_checkpoint} "
              f"by prefill); {unusable} unusable checkpoints", flush=True)
        self.assertGreaterEqual(kills, kills_wanted)

    def check_store(self, nj, expected, when):
        self.assertEqual(nj.integrity(), ["ok"], f"integrity_check {when}")
        rows = nj.query("SELECT i.id, i.custom_id, i.state, i.tokens_done FROM items i")
        for item_id, cid, state, done in rows:
            toks = [t for (t,) in nj.query("SELECT token_id FROM tokens WHERE item_id = ? ORDER BY pos", (item_id,))]
            self.assertEqual(len(toks), done, f"{cid} {when}: tokens_done matches the token rows")
            self.assertEqual(toks, expected[cid][:len(toks)], f"{cid} {when}: stored tokens are the reference's prefix")
            n_res = nj.query("SELECT count(*) FROM results WHERE item_id = ?", (item_id,))[0][0]
            self.assertEqual(n_res, 1 if state == "done" else 0, f"{cid} {when}: a result exactly when done")
            if state == "done":
                self.assertEqual(toks, expected[cid], f"{cid} {when}: a done item has the whole output")


if __name__ == "__main__":
    njtest.main(globals(), [("--long", {"action": "store_true"}),
                            ("--kills", {"type": int, "default": 24}),
                            ("--seed", {"type": int, "default": None}),
                            ("--speculative", {"default": None}),
                            ("--max-delay", {"type": float, "default": 0.25})])
