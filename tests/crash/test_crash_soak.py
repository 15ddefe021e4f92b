#!/usr/bin/env python3
"""Crash soak (issue 35): SIGKILLs across batched generate and classify jobs, with two
`run` processes sharing the home.

Every life starts two runs on one home (one with --batch 3, one choosing its own batch)
and SIGKILLs each at its own random instant (some after a SIGTERM: a kill during the
graceful stop), so kills land in claims, take-overs of the other run's items, prefills,
layer windows, token loops, commits, checkpoint writes and the outputs' write. The jobs: a
generate job (greedy and sampled items, short and long prompts) and a classify job with
declared outputs (documents long enough to be checkpointed mid-prefill); when both are
done, copies are submitted so that every kill hits live work. After every life:
integrity_check is ok, every generate item's stored tokens are a prefix of its
uninterrupted output, and an item has a result exactly when it is done. At the end every
item of every copy is done, each result equals the uninterrupted run's (tokens; label,
probabilities and margin), and each classify copy's output file equals the uninterrupted
run's.

Default: 200 kills (`ctest -L large -R crash_soak`); --kills N for fewer; --seed
reproduces a sequence; --max-delay S: the longest life before a kill (default 0.6 s).
"""
import json
import os
import random
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import njtest  # noqa: E402

ARGS = None
RUN_FLAGS = ["--drain", "--threads", "1", "--prefill-chunk", "16", "--commit-tokens", "7",
             "--checkpoint-tokens", "40", "--log-seconds", "1000"]
TEMPLATE = "Ticket: {document}\nLabel:"
LABELS = ["billing", "bug", "feature request"]


def generate_items():
    long_prompt = [(i * 37 + 11) % 256 for i in range(120)]
    return [
        {"id": "g-greedy", "prompt_ids": [3, 7, 11], "max_tokens": 200},
        {"id": "g-sampled", "prompt_ids": [5, 9], "max_tokens": 220, "temperature": 0.8, "seed": 42},
        {"id": "g-long-prompt", "prompt_ids": long_prompt, "max_tokens": 90},
        {"id": "g-topk", "prompt_ids": [1, 2, 3, 4], "max_tokens": 160, "temperature": 1.1, "top_k": 20,
         "seed": 7},
        {"id": "g-one", "prompt_ids": [200], "max_tokens": 1},
        {"id": "g-mid", "prompt_ids": long_prompt[40:70], "max_tokens": 120, "temperature": 0.9, "seed": 5},
    ]


def documents():
    base = ["I was charged twice for the same order and the refund never came. ",
            "The app crashes every time I open the settings page on my phone. ",
            "It would be great if the export could also write spreadsheets. ",
            "Where is the office? I could not find the address anywhere. "]
    return [(base[k % 4] * (1 + k % 3 * 2)).strip() + f" Ticket {k}." for k in range(8)]


def write_classify_spec(path, name, model, outputs):
    lines = [f"name: {json.dumps(name)}", f"model: {json.dumps(model)}", "kind: classify",
             "max_attempts: 100000", f"template: {json.dumps(TEMPLATE)}", f"labels: {json.dumps(LABELS)}",
             f"outputs: {json.dumps(outputs)}", "items:"]
    lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(documents())]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def answer(record):
    """What must not change across kills: the tokens, or the label and its numbers (not how
    the engine got there: schedule, window, timings)."""
    d = record.get("details") or {}
    return (record["status"], record.get("output_ids"), d.get("label"),
            json.dumps(d.get("probabilities"), sort_keys=True), d.get("margin"))


class CrashSoak(unittest.TestCase):
    def test_sigkills_of_two_runners_over_batched_jobs_lose_nothing(self):
        seed = ARGS.seed if ARGS.seed is not None else int(time.time() * 1000) % 1000000
        print(f"crash soak: seed {seed}, {ARGS.kills} kills", flush=True)
        rng = random.Random(seed)
        work = njtest.scratch_dir("crash-soak-")
        model = njtest.make_model(os.path.join(work, "model"), extra=["--tokenizer"])
        items = generate_items()
        gen_spec = njtest.write_spec(os.path.join(work, "gen.yaml"), "soak-gen", model, items,
                                     max_attempts=100000, defaults={"ignore_eos": True})
        expected_tokens = {it["id"]: njtest.reference_output(ARGS.bin, model, dict(it, ignore_eos=True))
                           for it in items}

        def classify_spec(copy):
            return write_classify_spec(os.path.join(work, f"cls-{copy}.yaml"), f"soak-cls-{copy}", model,
                                       {"jsonl": f"out/labels-{copy}.jsonl"})

        # The uninterrupted run.
        calm = njtest.Nightjar(ARGS.bin, os.path.join(work, "home-calm"))
        calm_gen = calm.submit(gen_spec)
        calm_cls = calm.submit(classify_spec("calm"))
        p = calm.run("run", *RUN_FLAGS)
        self.assertEqual(p.returncode, 0, p.stderr)
        calm_answers = {r["custom_id"]: answer(r) for job in (calm_gen, calm_cls) for r in calm.results(job)}
        self.assertEqual({r["custom_id"]: r["output_ids"] for r in calm.results(calm_gen)}, expected_tokens)
        with open(os.path.join(work, "out", "labels-calm.jsonl")) as f:
            calm_file = [json.loads(line) for line in f]

        nj = njtest.Nightjar(ARGS.bin, os.path.join(work, "home"))
        copies = 0
        jobs = []

        def submit_copy():
            nonlocal copies
            jobs.append(("gen", nj.submit(gen_spec), None))
            jobs.append(("cls", nj.submit(classify_spec(copies)), copies))
            copies += 1
        submit_copy()
        log_path = os.path.join(work, "runs.log")
        kills = lives = 0
        while kills < ARGS.kills:
            lives += 1
            with open(log_path, "a") as log:
                procs = [nj.popen("run", *RUN_FLAGS, "--batch", "3", stderr=log),
                         nj.popen("run", *RUN_FLAGS, stderr=log)]
            t0 = time.monotonic()
            deadlines = sorted((rng.uniform(0, ARGS.max_delay), k) for k in range(2))
            for at, k in deadlines:
                time.sleep(max(0.0, at - (time.monotonic() - t0)))
                proc = procs[k]
                termed = False
                if proc.poll() is None and rng.random() < 0.2:
                    proc.send_signal(signal.SIGTERM)
                    termed = True
                    time.sleep(rng.uniform(0, 0.02))
                if proc.poll() is None:
                    proc.kill()
                rc = proc.wait()
                if rc == -signal.SIGKILL:
                    kills += 1
                elif not (termed and rc == -signal.SIGTERM):
                    self.assertEqual(rc, 0, f"run exited with {rc} (see {log_path})")
            self.check_store(nj, expected_tokens, f"after life {lives} (kill {kills})")
            if all(s == "done" for (s,) in nj.query("SELECT state FROM items")):
                submit_copy()

        p = nj.run("run", *RUN_FLAGS)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_store(nj, expected_tokens, "at the end")
        for kind, job, copy in jobs:
            results = nj.results(job)
            self.assertEqual(sorted(r["custom_id"] for r in results),
                             sorted(k for k in calm_answers if k.startswith("g-" if kind == "gen" else "d")))
            for r in results:
                self.assertEqual(answer(r), calm_answers[r["custom_id"]],
                                 f"job {job} item {r['custom_id']} differs from the uninterrupted run")
            if kind == "cls":
                with open(os.path.join(work, "out", f"labels-{copy}.jsonl")) as f:
                    written = [json.loads(line) for line in f]
                self.assertEqual([answer(r) for r in written], [answer(r) for r in calm_file],
                                 f"job {job}: its output file differs from the uninterrupted run's")
        (n_results,), = nj.query("SELECT count(*) FROM results")
        (n_items,), = nj.query("SELECT count(*) FROM items")
        self.assertEqual(n_results, n_items, "one result per item")
        ev = nj.events()
        reclaimed = [d for _, k, d in ev if k == "lease_reclaimed"]
        uncharged = sum(1 for d in reclaimed if d and d.get("charged") is False)
        resumes = [d for _, k, d in ev if k == "resumed"]
        from_checkpoint = sum(1 for d in resumes if d["from"] == "checkpoint")
        print(f"crash soak: {kills} kills over {lives} lives (2 runs each), {copies} copies of both jobs; "
              f"{len(reclaimed)} leases taken over ({uncharged} in a batch, not charged); {len(resumes)} "
              f"resumes ({from_checkpoint} from a checkpoint)", flush=True)

    def check_store(self, nj, expected, when):
        self.assertEqual(nj.integrity(), ["ok"], f"integrity_check {when}")
        rows = nj.query("SELECT i.id, i.custom_id, i.state, i.tokens_done FROM items i")
        for item_id, cid, state, done in rows:
            n_res = nj.query("SELECT count(*) FROM results WHERE item_id = ?", (item_id,))[0][0]
            self.assertEqual(n_res, 1 if state == "done" else 0, f"{cid} {when}: a result exactly when done")
            if cid not in expected:
                continue
            toks = [t for (t,) in nj.query("SELECT token_id FROM tokens WHERE item_id = ? ORDER BY pos", (item_id,))]
            self.assertEqual(len(toks), done, f"{cid} {when}: tokens_done matches the token rows")
            self.assertEqual(toks, expected[cid][:len(toks)], f"{cid} {when}: stored tokens are the reference's prefix")
            if state == "done":
                self.assertEqual(toks, expected[cid], f"{cid} {when}: a done item has the whole output")


if __name__ == "__main__":
    njtest.main(globals(), [("--kills", {"type": int, "default": 200}),
                            ("--seed", {"type": int, "default": None}),
                            ("--max-delay", {"type": float, "default": 0.6})])
