#!/usr/bin/env python3
"""Slurm arrays without Slurm (issue 18): `submit --shard` (the shards partition the items and
a second submit queues nothing), `slurm` (the script and manifest it writes; run by bash as
array task I would be, with SLURM_ARRAY_TASK_ID set), `merge` (every item once, equal to a
single-machine run; incomplete arrays name what is missing; formats), `report DIR`, and
`run --exclusive` taking over a lease left by a run on another host. tests/slurm/run.sh runs
the same script under a real Slurm."""
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
import unittest

import njtest

ARGS = None
WORK = MODEL = None
ANSWER_KEYS = ("custom_id", "status", "error", "prompt_tokens", "output_ids", "output_tokens",
               "finish_reason", "output_text", "details")


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("array-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


def items(n, max_tokens=12):
    return [{"id": f"req-{i:02d}", "prompt_ids": [(i * 7 + k) % 256 for k in range(5 + i % 3)],
             "max_tokens": max_tokens, "temperature": 0.8, "seed": 10 + i} for i in range(n)]


def answers(records):
    return [{k: r.get(k) for k in ANSWER_KEYS} for r in records]


def read(path):
    with open(path) as f:
        return f.read()


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class Array(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.spec = njtest.write_spec(os.path.join(self.dir, "night.yaml"), "night", MODEL, items(13))

    def nj(self, *args, timeout=600, env=None):
        return subprocess.run([ARGS.bin, *args], capture_output=True, text=True, timeout=timeout, env=env)

    def single(self):
        """The same spec run on one machine: the results every array must equal."""
        home = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "single"))
        job = home.submit(self.spec)
        p = home.run("run", "--drain", "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        return home.results(job)

    def write_array(self, out, tasks=3, *extra):
        p = self.nj("slurm", self.spec, "--tasks", str(tasks), "--out", out, *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), os.path.join(out, "job.sbatch"))
        return json.loads(read(os.path.join(out, "array.json")))

    def run_task(self, out, task):
        env = dict(os.environ, SLURM_ARRAY_TASK_ID=str(task))
        return subprocess.run(["bash", os.path.join(out, "job.sbatch")], capture_output=True, text=True,
                              timeout=600, env=env)

    def test_shards_partition_the_items_and_submit_once(self):
        seen = []
        for i in range(3):
            home = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, f"h{i}"))
            p = home.run("submit", self.spec, "--shard", f"{i}/3", "--output", "json")
            self.assertEqual(p.returncode, 0, p.stderr)
            first = json.loads(p.stdout)
            self.assertFalse(first["already_queued"])
            again = json.loads(home.run("submit", self.spec, "--shard", f"{i}/3", "--output", "json").stdout)
            self.assertEqual((again["job_id"], again["already_queued"], again["items"]), (first["job_id"], True, first["items"]))
            ids = [r[0] for r in home.query("SELECT custom_id FROM items ORDER BY seq")]
            self.assertEqual(len(ids), first["items"])
            self.assertEqual(home.query("SELECT count(*) FROM jobs")[0][0], 1)
            with open(home.db(), "rb") as f:  # file format bytes 18-19: 1 = rollback journal, 2 = WAL
                self.assertEqual(f.read(20)[18:20], b"\x01\x01")
            seen += ids
        self.assertEqual(sorted(seen), sorted(i["id"] for i in items(13)))
        # A changed spec into the same home is refused, naming the job; nothing is written.
        home = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "h0"))
        before = home.dump()
        changed = njtest.write_spec(os.path.join(self.dir, "changed.yaml"), "night", MODEL, items(13, max_tokens=13))
        p = home.run("submit", changed, "--shard", "0/3")
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("spec changed", p.stderr)
        self.assertIn("changed.yaml", p.stderr)
        self.assertEqual(home.dump(), before)
        for bad in ("3/3", "x", "1/0", "-1/2"):
            p = home.run("submit", self.spec, "--shard", bad)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--shard", p.stderr)

    def test_slurm_writes_the_array_script_and_manifest(self):
        out = os.path.join(self.dir, "arr")
        m = self.write_array(out, 4, "--partition", "night", "--time", "08:00:00", "--memory", "3GiB",
                             "--cpus", "2", "--requeue", "--", "--qos=low", "--mail-type=END")
        self.assertEqual((m["tasks"], m["name"], m["kind"]), (4, "night", "generate"))
        self.assertEqual([i["custom_id"] for i in m["items"]], [i["id"] for i in items(13)])
        script = read(os.path.join(out, "job.sbatch"))
        for line in ("#SBATCH --array=0-3", "#SBATCH --partition=night", "#SBATCH --time=08:00:00",
                     "#SBATCH --mem=3072M", "#SBATCH --cpus-per-task=2", "#SBATCH --requeue",
                     f"#SBATCH --output={out}/logs/task-%a.out", "#SBATCH --qos=low", "#SBATCH --mail-type=END",
                     f"nightjar={os.path.realpath(ARGS.bin)}", "tasks=4",
                     '"$nightjar" submit "$spec" --shard "$task/$tasks" --home "$home"',
                     '"$nightjar" run --drain --exclusive --home "$home" "${run_args[@]}" || rc=$?',
                     "run_args+=(--threads 2)"):
            self.assertIn(line, script)
        self.assertIn("+ 28500 ))\" \"+%Y-%m-%d %H:%M\")", script)  # --until: 8 h less 300 s, dated
        # A day's limit: an HH:MM would be the hour before the start, which run refuses (issue
        # 34); the dated form is a day ahead, and a longer limit stops after 24 h less a minute.
        for limit, ahead in (("24:00:00", 86100), ("30:00:00", 86340)):
            self.write_array(out, 4, "--time", limit)
            script = read(os.path.join(out, "job.sbatch"))
            (line,) = [l for l in script.splitlines() if l.startswith("run_args+=(--until")]
            self.assertIn(f"+ {ahead} ))", line)
            until = subprocess.run(["bash", "-c", line + '; printf "%s" "${run_args[1]}"'],
                                   capture_output=True, text=True).stdout
            self.assertRegex(until, r"^\d{4}-\d\d-\d\d \d\d:\d\d$")
        for d in ("homes", "results", "logs"):
            self.assertTrue(os.path.isdir(os.path.join(out, d)))
        # The same array again is fine; another task count into the directory is refused.
        self.write_array(out, 4)
        p = self.nj("slurm", self.spec, "--tasks", "5", "--out", out)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("another array", p.stderr)
        # Bad flags are usage errors naming the flag; a bad spec is refused like submit.
        for args, flag in ((["--time", "8h"], "--time"), (["--memory", "lots"], "--memory"),
                           (["--", "qos=low"], "sbatch options"), (["--tasks", "0"], "--tasks")):
            cmd = ["slurm", self.spec, "--out", os.path.join(self.dir, "x")] + (["--tasks", "2"] if flag != "--tasks" else []) + args
            p = self.nj(*cmd)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(flag, p.stderr)
        bad = os.path.join(self.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("name: x\nmodel: nope\nkind: generate\nitems:\n  - id: a\n    prompt_ids: [1]\n")
        p = self.nj("slurm", bad, "--tasks", "2", "--out", os.path.join(self.dir, "y"))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("bad.yaml:2", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "y")))

    def test_array_tasks_merge_to_the_single_machine_results(self):
        single = self.single()
        out = os.path.join(self.dir, "arr")
        m = self.write_array(out, 3)
        # Task 1 has not run: merge names its items per task and exits 1, writing nothing.
        for t in (0, 2):
            p = self.run_task(out, t)
            self.assertEqual(p.returncode, 0, p.stderr)
        merged_path = os.path.join(self.dir, "merged.jsonl")
        p = self.nj("merge", out, "--out", merged_path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertFalse(os.path.exists(merged_path))
        task1 = [i["custom_id"] for i in m["items"] if i["task"] == 1]
        self.assertIn(f"task 1: {len(task1)} missing (no results file yet): " + ", ".join(task1), p.stderr)
        p = self.nj("merge", out, "--partial")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(len(jsonl(p.stdout)), 13 - len(task1))
        # The report over the array counts task 1's items as queued.
        p = self.nj("report", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(f"{13 - len(task1)} done, 0 failed, 0 cancelled, {len(task1)} queued", p.stdout)
        # Task 1 runs twice (a requeue after it finished): one job in its home, same results.
        for _ in range(2):
            p = self.run_task(out, 1)
            self.assertEqual(p.returncode, 0, p.stderr)
        h1 = njtest.Nightjar(ARGS.bin, os.path.join(out, "homes", "task-1"))
        self.assertEqual(h1.query("SELECT count(*) FROM jobs")[0][0], 1)
        self.assertEqual(h1.query("SELECT count(*) FROM items")[0][0], len(task1))
        p = self.nj("merge", out, "--out", merged_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        merged = jsonl(read(merged_path))
        self.assertEqual(answers(merged), answers(single))
        # CSV and OpenAI Batch output: the same rows as a single home's, ids unique.
        home = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "single"))
        p = self.nj("merge", out, "--format", "csv")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, home.run("results", "1", "--format", "csv").stdout)
        p = self.nj("merge", out, "--format", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = jsonl(p.stdout)
        ref = jsonl(home.run("results", "1", "--format", "openai").stdout)
        self.assertEqual(len({l["id"] for l in lines}), 13)
        for a, b in zip(lines, ref):
            self.assertEqual(a["custom_id"], b["custom_id"])
            self.assertEqual(a["response"]["body"]["choices"], b["response"]["body"]["choices"])
            self.assertEqual(a["response"]["body"]["usage"], b["response"]["body"]["usage"])
        p = self.nj("report", out)
        self.assertIn("job 'night' (generate) in 3 homes: done", p.stdout)
        self.assertIn("13 done, 0 failed, 0 cancelled, 0 queued, 0 running (13 in all)", p.stdout)
        p = self.nj("report", "--home", os.path.join(out, "homes", "task-0"),
                    "--home", os.path.join(out, "homes", "task-2"))
        self.assertIn(f"(generate) in 2 homes: done", p.stdout)
        self.assertIn(f"({13 - len(task1)} in all)", p.stdout)

        # A results file with a conflicting answer is refused, naming the files.
        res0 = os.path.join(out, "results", "task-0.jsonl")
        first = jsonl(read(res0))[0]
        first["output_ids"] = [1] + first["output_ids"][1:] if first["output_ids"][0] != 1 else [2] + first["output_ids"][1:]
        with open(res0, "a") as f:
            f.write(json.dumps(first) + "\n")
        p = self.nj("merge", out)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn(f"conflicting results for item '{first['custom_id']}'", p.stderr)
        p = self.nj("merge", os.path.join(self.dir, "nowhere"))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("array.json", p.stderr)

    def test_a_task_whose_items_failed_for_good_still_writes_its_results(self):
        """`run` exits 4 when items failed for good (issue 16, item 12); under `set -e` the task
        script ended there and wrote no results, so merge called the items missing."""
        nan_model = os.path.join(self.dir, "model-nan")
        shutil.copytree(MODEL, nan_model)
        with open(os.path.join(nan_model, "config.json")) as f:
            config = json.load(f)
        config["text_config"]["routed_scaling_factor"] = 1e308  # non-finite logits (bug 6)
        with open(os.path.join(nan_model, "config.json"), "w") as f:
            json.dump(config, f)
        spec = njtest.write_spec(os.path.join(self.dir, "nan.yaml"), "nan", nan_model, items(2))
        out = os.path.join(self.dir, "arr")
        p = self.nj("slurm", spec, "--tasks", "1", "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.run_task(out, 0)
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        records = jsonl(read(os.path.join(out, "results", "task-0.jsonl")))
        self.assertEqual([r["status"] for r in records], ["failed", "failed"])
        self.assertIn("non-finite logits at position", records[0]["error"])

    def test_a_task_signalled_like_slurm_checkpoints_and_its_rerun_resumes(self):
        """Slurm signals every process of the task (its process group) and kills the rest once
        the script ends: the script must wait for `run` to checkpoint."""
        spec = njtest.write_spec(os.path.join(self.dir, "long.yaml"), "long", MODEL, items(3, max_tokens=500))
        out = os.path.join(self.dir, "arr")
        p = self.nj("slurm", spec, "--tasks", "1", "--out", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        env = dict(os.environ, SLURM_ARRAY_TASK_ID="0")
        task = subprocess.Popen(["bash", os.path.join(out, "job.sbatch")], env=env, start_new_session=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        home = njtest.Nightjar(ARGS.bin, os.path.join(out, "homes", "task-0"))
        deadline = time.time() + 120
        while True:
            self.assertLess(time.time(), deadline, "no tokens")
            self.assertIsNone(task.poll(), "the task ended before it was signalled")
            try:
                if home.query("SELECT coalesce(sum(tokens_done), 0) FROM items")[0][0] > 10:
                    break
            except sqlite3.OperationalError:  # the home is being created
                pass
            time.sleep(0.02)
        os.killpg(task.pid, signal.SIGTERM)
        log, _ = task.communicate(timeout=60)
        self.assertEqual(task.returncode, 143, log)
        self.assertIn("stopped by a signal: checkpointed", log)
        self.assertFalse(os.path.exists(os.path.join(out, "results", "task-0.jsonl")))
        # The run holds its items in one batch: every one it had started is put back.
        started = home.query("SELECT count(*) FROM items WHERE tokens_done > 0")[0][0]
        self.assertGreaterEqual(started, 1)
        self.assertEqual(len(home.events("released")), started, log)
        p = self.run_task(out, 0)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        resumed = home.events("resumed")
        self.assertEqual([(e[2]["from"], e[2]["replayed_tokens"]) for e in resumed], [("checkpoint", 0)] * started)
        merged = self.nj("merge", out)
        self.assertEqual(merged.returncode, 0, merged.stderr)
        ref = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "ref"))
        job = ref.submit(spec)
        self.assertEqual(ref.run("run", "--drain", "--threads", "1").returncode, 0)
        self.assertEqual(answers(jsonl(merged.stdout)), answers(ref.results(job)))

    def test_run_exclusive_takes_over_a_lease_left_on_another_host(self):
        home = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        job = home.submit(self.spec)
        # A run on another host died holding item req-03; its lease would hold 10 more minutes.
        con = sqlite3.connect(home.db())
        con.execute("UPDATE items SET state = 'running', lease_owner = 'node-b/4242/99', "
                    "lease_expires = strftime('%s', 'now') + 600 WHERE custom_id = 'req-03'")
        con.commit()
        con.close()
        p = home.run("run", "--drain", "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        states = dict(home.query("SELECT custom_id, state FROM items"))
        self.assertEqual(states["req-03"], "running")  # a plain run must wait for the lease
        p = home.run("run", "--drain", "--exclusive", "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        done = home.results(job)
        self.assertTrue(all(r["status"] == "done" for r in done))
        self.assertEqual(answers(done), answers(self.single()))
        self.assertEqual(home.query("SELECT attempts FROM items WHERE custom_id = 'req-03'")[0][0], 1)

    def test_run_exclusive_waits_for_other_runs(self):
        home = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        home.submit(njtest.write_spec(os.path.join(self.dir, "long.yaml"), "long", MODEL,
                                      items(2, max_tokens=5000)))
        first = home.popen("run", "--threads", "1", "--poll-seconds", "0.2")
        try:
            deadline = time.time() + 60
            while not home.query("SELECT count(*) FROM items WHERE state = 'running'")[0][0]:
                self.assertLess(time.time(), deadline)
                time.sleep(0.05)
            p = subprocess.Popen(home.cmd("run", "--exclusive", "--drain", "--threads", "1"),
                                 stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
            time.sleep(2)
            self.assertIsNone(p.poll(), "the exclusive run did not wait for the plain one")
            p.terminate()
            _, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("run.lock is held by another run: waiting", err)
        finally:
            first.terminate()
            first.wait(timeout=60)


if __name__ == "__main__":
    njtest.main(globals())
