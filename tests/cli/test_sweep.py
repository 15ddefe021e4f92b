#!/usr/bin/env python3
"""`nightjar run --schedule sweep`: a classification's documents go through the model layer by
layer, a whole window at a time (engine/sweep/sweep.h), with every label scored in the same
sweep. Its labels, probabilities, margins and output_ids are bit for bit those of `--batch 1`
(token-major passes, one document at a time), for one-token and multi-token labels, with and
without a template prefix, at the minimum budget and twice it, with 1 and 2 threads and on
every SIMD level; each result says its schedule and window; and a window reads the weights
once."""
import json
import os
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = None
RUN = ["--log-seconds", "1000"]
LABELS = ["billing", "bug", "feature request", "feature idea", "question"]
DOCS = ["I was charged twice for my March subscription.",
        "The app crashes when I open the settings page.",
        "Please add a dark mode to the dashboard.",
        "What are your opening hours on holidays?",
        "My invoice shows the wrong company address.",
        "Sync fails with error 504 since this morning, and the export button is greyed out too."]


def setUpModule():
    global WORK, MODEL
    WORK = njtest.scratch_dir("sweep-")
    MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")


def simd_levels():
    """The SIMD levels this CPU runs (--simd)."""
    flags = open("/proc/cpuinfo").read()
    return ("scalar",) + (("avx2",) if " avx2" in flags else ()) + (("avx512",) if " avx512f" in flags else ())


def answer(r):
    return (r["custom_id"], r["status"], r["details"]["label"], r["details"]["probabilities"],
            r["details"]["margin"], r["output_ids"])


class Sweep(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)

    def spec(self, template, memory=None, name="triage", docs=DOCS):
        lines = [f"name: {name}", f"model: {json.dumps(MODEL)}", "kind: classify",
                 f"template: {json.dumps(template)}", f"labels: {json.dumps(LABELS)}"]
        if memory:
            lines.append(f"memory: {memory}B")
        lines.append("items:")
        lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(docs)]
        path = os.path.join(self.dir, f"{name}-{memory or 'resident'}.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def run_job(self, spec, tag, *flags):
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, f"home-{tag}"))
        job = nj.submit(spec)
        p = nj.run("run", *RUN, "--drain", *flags)
        self.assertEqual(p.returncode, 0, p.stderr)
        return nj, nj.results(job)

    def minimum(self, spec, threads):
        """The least budget of this job's sweep on `threads` threads (the kernels' scratch is
        per thread): one document per window."""
        p = subprocess.run([ARGS.bin, "plan", spec, "--schedule", "sweep", "--threads", threads,
                            "--output", "json"],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        plan = json.loads(p.stdout)
        return plan["min_memory_bytes"]

    def check(self, template):
        base = self.run_job(self.spec(template), "one", "--batch", "1", "--threads", "1")[1]
        self.assertEqual([r["engine"]["schedule"] for r in base], ["passes"] * len(DOCS))
        self.assertTrue(any(r["details"]["decode_steps"] > 0 for r in base), "the label trie is walked")
        # Every budget on every SIMD level, the thread count alternating (both on each level).
        # The least budget of either thread count: submit checks a budget with this machine's
        # threads (the kernels' scratch is per thread), and a sweep needs no less than the
        # job's passes for one document (run plans them first).
        minimum = max(self.minimum(self.spec(template), t) for t in ("1", "2"))
        for k, (factor, simd) in enumerate((f, s) for f in (0, 1, 2) for s in simd_levels()):
            threads = ("1", "2")[k % 2]
            memory = factor * minimum or None
            spec = self.spec(template, memory)
            tag = f"{memory}-{threads}-{simd}"
            with self.subTest(memory=memory, threads=threads, simd=simd):
                nj, results = self.run_job(spec, tag, "--schedule", "sweep", "--threads", threads,
                                           "--simd", simd)
                self.assertEqual([answer(r) for r in results], [answer(r) for r in base])
                for r in results:
                    self.assertEqual(r["engine"]["schedule"], "sweep")
                    self.assertGreaterEqual(r["engine"]["window"], 1)
                    self.assertEqual(r["details"]["decode_steps"], 0, "no decode steps after the sweep")
                if memory is None:  # resident: one window of every document
                    self.assertEqual({r["engine"]["window"] for r in results}, {len(DOCS)})

    def test_labels_with_a_template_prefix_are_the_same_bits_as_one_at_a_time(self):
        self.check("Classify the ticket as one of: {labels}.\nTicket: {document}\nLabel:\n")

    def test_labels_without_a_template_prefix_are_the_same_bits_as_one_at_a_time(self):
        self.check("{document}\nThe ticket is about:")

    def test_windows_fill_by_their_documents_rows_as_the_plan_forecasts(self):
        """A window is filled by the rows its documents really have, not as if each were the
        job's longest: at the least budget (one document of the longest's size) the short
        documents share windows; run forms the windows `plan` forecasts; answers unchanged."""
        template = "Ticket: {document}\nLabel:"
        docs = [" ".join(DOCS * 2)] + DOCS * 2  # one document far longer than the others
        base = self.run_job(self.spec(template, docs=docs), "one", "--batch", "1", "--threads", "2")[1]
        memory = self.minimum(self.spec(template, docs=docs), "2")
        spec = self.spec(template, memory, docs=docs)
        p = subprocess.run([ARGS.bin, "plan", spec, "--schedule", "sweep", "--threads", "2",
                            "--output", "json"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        plan = json.loads(p.stdout)
        _, results = self.run_job(spec, "sweep", "--schedule", "sweep", "--threads", "2")
        self.assertEqual([answer(r) for r in results], [answer(r) for r in base])
        windows = [r["engine"]["window"] for r in results]
        self.assertEqual(windows[0], 1, "the longest fills the least budget's window alone")
        self.assertGreater(max(windows), 1, "short documents share a window")
        # A window of w documents gives each of its w results window = w.
        self.assertAlmostEqual(sum(1 / w for w in windows), plan["sweeps"])
        self.assertEqual(max(windows), plan["window_documents"])

    def test_auto_sweeps_a_window_and_passes_stays_token_major(self):
        spec = self.spec("Ticket: {document}\nLabel:")
        _, auto = self.run_job(spec, "auto", "--threads", "2")
        self.assertEqual({r["engine"]["schedule"] for r in auto}, {"sweep"})
        _, passes = self.run_job(spec, "passes", "--threads", "2", "--schedule", "passes")
        self.assertEqual({r["engine"]["schedule"] for r in passes}, {"passes"})
        self.assertEqual([answer(r) for r in auto], [answer(r) for r in passes])

    def test_submit_and_run_agree_on_a_classify_jobs_minimum(self):
        """Issue 31: submit checks a classify job's budget with the plan run makes (one decision,
        engine/runtime/model_plan.h), so the least budget submit accepts is the one run runs in."""
        template = "Classify the ticket as one of: {labels}.\nTicket: {document}\nLabel:\n"
        p = subprocess.run([ARGS.bin, "plan", self.spec(template), "--schedule", "passes", "--batch", "1",
                            "--threads", "2", "--output", "json"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        minimum = json.loads(p.stdout)["min_memory_bytes"]
        below = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-below"))
        p = below.run("submit", self.spec(template, minimum - 1, name="below"))
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("memory", p.stderr)
        _, results = self.run_job(self.spec(template, minimum, name="at"), "at", "--batch", "1",
                                  "--schedule", "passes", "--threads", "2")
        self.assertEqual({r["status"] for r in results}, {"done"})

    def test_a_window_holds_one_jobs_documents(self):
        """Two classify jobs of one model and budget: each window holds one job's documents
        (its room counts each document with its job's label branches and prefix), and the
        answers are the ones each job gets alone."""
        # b's documents and labels are shorter than a's, so its items fit a's plan's context.
        a = self.spec("Classify: {document}\nLabel:", name="a", docs=DOCS[4:])
        b_labels = ["refund", "crash", "idea"]
        b = self.spec("{document}\nTopic:", name="b", docs=DOCS[:4])
        with open(b) as f:
            text = f.read().replace(json.dumps(LABELS), json.dumps(b_labels))
        with open(b, "w") as f:
            f.write(text)
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-both"))
        ja, jb = nj.submit(a), nj.submit(b)
        p = nj.run("run", *RUN, "--drain", "--schedule", "sweep", "--threads", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        together = {job: nj.results(job) for job in (ja, jb)}
        self.assertEqual([r["engine"]["window"] for r in together[ja]], [2, 2])
        self.assertEqual([r["engine"]["window"] for r in together[jb]], [4] * 4)
        for spec, job in ((a, ja), (b, jb)):
            _, alone = self.run_job(spec, f"alone-{job}", "--batch", "1", "--threads", "2")
            self.assertEqual([answer(r) for r in together[job]], [answer(r) for r in alone])

    def test_a_routing_profile_prices_the_experts_each_window_reads(self):
        """`plan SPEC --routing-profile FILE`: a window's distinct experts follow the rows'
        recorded choices instead of uniform routing. A profile `generate` recorded is read; one
        whose rows chose evenly predicts uniform routing's bytes, one whose rows all chose the
        same experts fewer; a profile of another model is refused, naming the file."""
        template = "Ticket: {document}\nLabel:"
        spec = self.spec(template, self.minimum(self.spec(template), "2"))
        recorded = os.path.join(self.dir, "recorded.json")
        p = subprocess.run([ARGS.bin, "generate", "--model", MODEL, "--prompt", " ".join(DOCS),
                            "--max-tokens", "2", "--save-routing-profile", recorded],
                           capture_output=True)  # the demo model's tokens need not be UTF-8
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        with open(recorded) as f:
            profile = json.load(f)
        self.assertEqual(profile["version"], 2)
        layer = profile["layers"][0]
        experts = len(layer["chosen"])
        top_k = sum(layer["chosen"]) // layer["rows"]
        self.assertGreater(experts, 2 * top_k)

        def profile_file(name, chosen):
            layers = [{"layer": l["layer"], "requests": 0, "first_use": 0, "distances": [],
                       "rows": experts, "chosen": chosen} for l in profile["layers"]]
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                json.dump({**profile, "layers": layers}, f)
            return path

        def planned(*flags):
            p = subprocess.run([ARGS.bin, "plan", spec, "--schedule", "sweep", "--threads", "2",
                                "--output", "json", *flags], capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stderr)
            return json.loads(p.stdout)

        uniform = planned()
        self.assertEqual(uniform["expert_routing"], "uniform")
        self.assertEqual(planned("--routing-profile", recorded)["expert_routing"], "routing profile")
        even = planned("--routing-profile", profile_file("even.json", [top_k] * experts))
        self.assertAlmostEqual(even["predicted_bytes"] / uniform["predicted_bytes"], 1, places=9)
        same = planned("--routing-profile",
                       profile_file("same.json", [experts] * top_k + [0] * (experts - top_k)))
        self.assertLess(same["predicted_bytes"], uniform["predicted_bytes"])
        self.assertEqual(same["sweeps"], uniform["sweeps"])
        other = profile_file("other.json", [top_k] * experts)
        with open(other) as f:
            text = f.read().replace(profile["model_fingerprint"], "0123456789abcdef")
        with open(other, "w") as f:
            f.write(text)
        p = subprocess.run([ARGS.bin, "plan", spec, "--routing-profile", other], capture_output=True,
                           text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("other.json", p.stderr)
        self.assertIn("another model", p.stderr)

    def generate_spec(self, memory=None):
        """A generation of prompts of different lengths (one item decodes a single token)."""
        items = [{"id": f"g{k}", "prompt": " ".join(DOCS[k % len(DOCS)].split()[: 4 + 5 * k]),
                  "max_tokens": 1 + (k * 3) % 7} for k in range(7)]
        lines = ["name: gen", f"model: {json.dumps(MODEL)}", "kind: generate"]
        if memory:
            lines.append(f"memory: {memory}B")
        lines += ["items:"] + [f"  - {json.dumps(it)}" for it in items]
        path = os.path.join(self.dir, f"gen-{memory or 'resident'}.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def test_generate_prompts_in_sweeps_are_the_same_tokens_and_the_planned_sweeps(self):
        """Under a budget whose weights stream (run --schedule auto or sweep), the prompts of the
        items that start together go through layer sweeps, then decode in passes. Output tokens are those of --batch 1 in
        passes; run makes the passes and sweeps `plan --schedule sweep` predicts."""
        p = subprocess.run([ARGS.bin, "plan", self.generate_spec(), "--schedule", "sweep", "--threads", "2",
                            "--output", "json"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["schedule"], "passes", "resident: prompts are not swept")
        # Budgets of two and two and a half times the model's least for one item: the weights stream (a
        # budget that holds them all reads nothing less with a sweep), and the window fits.
        minimum = json.loads(subprocess.run([ARGS.bin, "plan", "--model", MODEL, "--memory", "1KiB", "--output",
                                             "json"], capture_output=True, text=True).stdout)["min_memory_bytes"]
        base = self.run_job(self.generate_spec(), "one", "--batch", "1", "--threads", "2")[1]
        outputs = [(r["custom_id"], r["output_ids"]) for r in base]
        for factor, threads, schedule in ((2, "1", "sweep"), (2.5, "2", "auto")):
            spec = self.generate_spec(int(factor * minimum))
            with self.subTest(memory=int(factor * minimum), threads=threads, schedule=schedule):
                p = subprocess.run([ARGS.bin, "plan", spec, "--schedule", schedule, "--threads", threads,
                                    "--output", "json"], capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                plan = json.loads(p.stdout)
                self.assertEqual(plan["schedule"], "sweep")
                nj, results = self.run_job(spec, f"gen-{factor}", "--schedule", schedule, "--threads", threads)
                self.assertEqual([(r["custom_id"], r["output_ids"]) for r in results], outputs)
                (ended,) = [d for _, _, d in nj.events("run_ended")]
                self.assertGreater(ended["sweeps"], 0)
                self.assertEqual((ended["passes"], ended["sweeps"]), (plan["passes"], plan["sweeps"]))
                _, passes = self.run_job(spec, f"gen-{factor}-passes", "--schedule", "passes",
                                         "--threads", threads)
                self.assertEqual([(r["custom_id"], r["output_ids"]) for r in passes], outputs)

    def test_an_unknown_schedule_is_refused(self):
        nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))
        p = nj.run("run", "--drain", "--schedule", "layers")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--schedule", p.stderr)


if __name__ == "__main__":
    njtest.main(globals())
