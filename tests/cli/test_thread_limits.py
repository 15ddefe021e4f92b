#!/usr/bin/env python3
"""Issue 16, bug 3: thread creation aborted the process. `generate --io-threads 100000` ended
in std::terminate (exit 134), and under `run` each abort cost the item an attempt and left
it shown as running. Now --io-threads is bounded (a usage error, exit 2, naming the flag),
and a thread the system refuses to start is an error (exit 1 naming the I/O thread), never
an abort; `run` records it as a failed attempt, not as a crashed process."""
import os
import resource
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
# Address space for a process that must not be able to start 256 I/O threads (8 MiB of
# stack each, 2 GiB in all) but can load the tiny model and everything else it needs.
SMALL_ADDRESS_SPACE = 1 << 30


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("threads-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))


def min_memory():
    p = subprocess.run([ARGS.bin, "plan", "--model", MODEL, "--max-context", "8", "--output", "json"],
                       capture_output=True, text=True, timeout=120, check=True)
    import json
    return json.loads(p.stdout)["min_memory_bytes"]


def limited_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (SMALL_ADDRESS_SPACE, SMALL_ADDRESS_SPACE))


class ThreadLimits(unittest.TestCase):
    def generate(self, *extra, preexec_fn=None):
        return subprocess.run([ARGS.bin, "generate", "--model", MODEL, "--prompt-ids", "1,2", "--max-tokens", "2",
                               "--threads", "1", "--memory", f"{2 * min_memory()}B", *extra],
                              capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn)

    def test_io_threads_beyond_the_bound_is_a_usage_error(self):
        for value in ("100000", "257", "0"):
            p = self.generate("--io-threads", value)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("--io-threads", p.stderr)
            self.assertNotIn("terminate", p.stderr)
        home = os.path.join(WORK, "home-usage")
        p = subprocess.run([ARGS.bin, "run", "--drain", "--io-threads", "100000", "--home", home],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--io-threads", p.stderr)
        self.assertEqual(self.generate("--io-threads", "256").returncode, 0)

    def test_a_thread_the_system_refuses_is_an_error_not_an_abort(self):
        p = self.generate("--io-threads", "256", preexec_fn=limited_address_space)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("cannot start I/O thread", p.stderr)

    def test_under_run_the_refusal_is_a_failed_attempt_and_the_item_is_not_left_running(self):
        home = os.path.join(WORK, "home-run")
        nj = njtest.Nightjar(ARGS.bin, home)
        spec = njtest.write_spec(os.path.join(WORK, "job.yaml"), "threads", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 2}],
                                 memory=str(2 * min_memory()), max_attempts=1)
        job = nj.submit(spec)
        p = subprocess.run(nj.cmd("run", *RUN, "--drain", "--io-threads", "256"), capture_output=True, text=True,
                           timeout=300, preexec_fn=limited_address_space)
        self.assertNotEqual(p.returncode, 134, p.stderr)
        self.assertNotIn("terminate", p.stderr)
        (item,) = nj.status(job)["items"]
        self.assertEqual(item["state"], "failed")
        self.assertIn("cannot start I/O thread", item["last_error"])
        self.assertIsNone(item["lease_owner"])


if __name__ == "__main__":
    njtest.main(globals())
