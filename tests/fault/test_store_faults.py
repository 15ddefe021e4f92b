#!/usr/bin/python3
"""Store fault injection: a scripted night in which the job store's Nth write or sync fails,
for every N the night performs, each followed by a run of the rest of the night without
faults. Every night must end exactly as a fault-free one: the same results and outputs, the
store's integrity_check ok, every job and item once, every item's tokens once.

The night (each step a `nightjar` process; a step that fails is run again without the fault,
as an operator would, then the night goes on):
  1. submit a generate job (2 sampled items) and 2. a classify job with declared outputs
  3. run --drain, committing every 3 tokens and checkpointing every 6 (items finish, the
     classify job's outputs are written when its last item finishes)
  4. results CLASSIFY_JOB --write (the outputs again)
The fault: tests/fault/fault_vfs.h (nightjar_store_fault is `nightjar` with that VFS). The
operations are counted across the night's processes; a fault-free night gives their number
T, and N runs over 1..T, once with SQLITE_FULL and once with SQLITE_IOERR.

  test_store_faults.py --bin build/tests/fault/nightjar_store_fault [--codes full,ioerr]
                       [--every K] [--alternate] [--jobs J]
--every K tries every K-th point only (1, 1+K, ...); --alternate tries one code per point,
taking them in turn. ctest runs `store_faults` (default suite: every 5th point, codes in
turn, ~55 nights) and `store_faults_all` (label large: every point with both codes).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
import njtest  # noqa: E402

RUN = ["--drain", "--threads", "1", "--commit-tokens", "3", "--commit-seconds", "3600",
       "--checkpoint-tokens", "6", "--checkpoint-seconds", "3600", "--log-seconds", "3600"]
# Result fields that differ between equal nights (wall and engine timings, attempts).
# How a classification got its template's prefix state ("prefilled" or "restored") depends on
# whether a run was interrupted after the prefill, not on the answer; so does how its documents
# went through the model (a layer sweep of the documents left, or passes when one is left:
# schedule, window, decode_steps).
VOLATILE = {"timings", "usage", "engine", "attempts", "created_at", "prefill_s", "decode_s",
            "prefix", "prefix_restore_s", "schedule", "window", "decode_steps"}


def write_night(work, model):
    gen = njtest.write_spec(os.path.join(work, "gen.yaml"), "faults-gen", model, [
        {"id": "g1", "prompt_ids": [3, 7, 11, 5], "max_tokens": 10, "temperature": 0.8, "seed": 5},
        {"id": "g2", "prompt_ids": [9, 100, 42], "max_tokens": 8, "temperature": 0.7, "seed": 9},
    ])
    cls = os.path.join(work, "cls.yaml")
    docs = ["the card was charged twice", "the app crashes at start", "please add a dark mode"]
    lines = ["name: faults-cls", f"model: {json.dumps(str(model))}", "kind: classify",
             'template: "Ticket: {document}\\nLabel:"', "labels: [billing, bug, other]",
             "outputs: {jsonl: out/cls.jsonl, csv: out/cls.csv}", "items:"]
    lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(docs)]
    Path(cls).write_text("\n".join(lines) + "\n")
    return gen, cls


def differences(want, got, path=""):
    """The paths where two JSON-like values differ, with both values."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for k in sorted(set(want) | set(got)):
            out += differences(want.get(k), got.get(k), f"{path}.{k}")
        return out
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        out = []
        for i, (w, g) in enumerate(zip(want, got)):
            out += differences(w, g, f"{path}[{i}]")
        return out
    return [] if want == got else [f"{path}: expected {json.dumps(want)}, got {json.dumps(got)}"]


def normalized(value):
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    return value


class Night:
    """One scripted night in its own directory (home, specs, outputs)."""

    def __init__(self, binary, work, model, fail_at=0, code="full"):
        self.bin, self.dir, self.model = binary, work, model
        if os.path.exists(work):
            shutil.rmtree(work)
        os.makedirs(work)
        self.home = os.path.join(work, "home")
        self.counter = os.path.join(work, "fault-counter")
        self.fail_at, self.code = fail_at, code
        self.gen, self.cls = write_night(work, model)
        self.log = []

    def step(self, *args, armed=True):
        env = dict(os.environ, NJ_FAULT_COUNTER=self.counter, NJ_FAULT_CODE=self.code,
                   NJ_FAULT_AT=str(self.fail_at if armed else 0))
        p = subprocess.run([self.bin, *args, "--home", self.home], capture_output=True, text=True,
                           timeout=300, env=env)
        self.log.append((args, armed, p.returncode, p.stderr[-2000:]))
        return p

    def fired(self):
        if not os.path.exists(self.counter):
            return False
        return Path(self.counter).read_text().split()[1] == "1"

    def ops(self):
        return int(Path(self.counter).read_text().split()[0])

    def do(self, *args):
        """A step of the night: with the fault armed; when it fails, again without."""
        p = self.step(*args)
        if p.returncode != 0:
            if not self.fired():
                raise AssertionError(f"{args} failed without a fault: {p.stderr}")
            p = self.step(*args, armed=False)
            if p.returncode != 0:
                raise AssertionError(f"{args} failed again after the fault ({p.returncode}): {p.stderr}")
        return p

    def play(self):
        job_gen = json.loads(self.do("submit", self.gen, "--output", "json").stdout)["job_id"]
        job_cls = json.loads(self.do("submit", self.cls, "--output", "json").stdout)["job_id"]
        self.do("run", *RUN)
        self.do("results", str(job_cls), "--write")
        return job_gen, job_cls

    def outcome(self, jobs):
        """What must equal a fault-free night's, read without faults."""
        out = {"results": {}}
        for name, job in zip(("gen", "cls"), jobs):
            p = self.step("results", str(job), armed=False)
            if p.returncode != 0:
                raise AssertionError(f"results {job} failed: {p.stderr}")
            out["results"][name] = [normalized(json.loads(line)) for line in p.stdout.splitlines() if line]
        out["outputs.jsonl"] = [normalized(json.loads(line))
                                for line in Path(self.dir, "out/cls.jsonl").read_text().splitlines() if line]
        out["outputs.csv"] = Path(self.dir, "out/cls.csv").read_text()
        con = sqlite3.connect(os.path.join(self.home, "nightjar.db"))
        try:
            out["integrity_check"] = [r[0] for r in con.execute("PRAGMA integrity_check")]
            out["jobs"] = con.execute("SELECT name, kind FROM jobs ORDER BY id").fetchall()
            out["items"] = con.execute(
                "SELECT j.name, i.custom_id, i.state, i.tokens_done FROM items i JOIN jobs j ON j.id = i.job_id "
                "ORDER BY j.id, i.seq").fetchall()
            out["tokens"] = con.execute(
                "SELECT i.custom_id, count(*), min(t.pos), max(t.pos) FROM tokens t JOIN items i ON i.id = t.item_id "
                "GROUP BY t.item_id ORDER BY t.item_id").fetchall()
            out["results_rows"] = con.execute("SELECT count(*) FROM results").fetchall()
        finally:
            con.close()
        return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="nightjar_store_fault")
    ap.add_argument("--codes", default="full,ioerr")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--alternate", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    work = njtest.scratch_dir("store-faults-")
    model = njtest.make_model(os.path.join(work, "model"), extra=["--tokenizer"])

    clean = Night(a.bin, os.path.join(work, "clean"), model)
    jobs = clean.play()
    expected = clean.outcome(jobs)
    total = clean.ops()
    assert expected["integrity_check"] == ["ok"], expected["integrity_check"]
    assert len(expected["items"]) == 5 and all(i[2] == "done" for i in expected["items"]), expected["items"]
    print(f"a fault-free night makes {total} store writes and syncs")

    def one(point):
        n, code = point
        night = Night(a.bin, os.path.join(work, f"{code}-{n}"), model, fail_at=n, code=code)
        try:
            got = night.outcome(night.play())
            if not night.fired():
                return f"{code} at {n}: the fault never fired (the night made {night.ops()} operations)"
            if got != expected:
                return f"{code} at {n}: the night ended differently: " + "; ".join(differences(expected, got)[:10])
        except AssertionError as e:
            return f"{code} at {n}: {e}\n  steps: {night.log}"
        shutil.rmtree(night.dir, ignore_errors=True)
        return None

    codes = a.codes.split(",")
    if a.alternate:
        points = [(n, codes[k % len(codes)]) for k, n in enumerate(range(1, total + 1, a.every))]
    else:
        points = [(n, code) for code in codes for n in range(1, total + 1, a.every)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        failures = [f for f in pool.map(one, points) if f]
    print(f"{len(points)} injection points (of {total} operations: {'every %d-th' % a.every if a.every > 1 else 'every one'}, "
          f"{'codes in turn' if a.alternate else 'each with ' + ' and '.join(codes)}): "
          f"{len(points) - len(failures)} passed")
    for f in failures[:20]:
        print("FAIL:", f)
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
