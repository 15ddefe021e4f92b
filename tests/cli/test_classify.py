#!/usr/bin/env python3
"""Classify jobs end to end on a generated model with a tokenizer: every document gets a
label, probabilities sum to 1, zero decode steps when the labels' first tokens differ, the
label trie when they share tokens (checked against `nightjar logits` on the full sequences),
the template prefix prefilled once per job, declared outputs and CSV results, and the bad
specs of tests/schema/bad/classify-*.yaml rejected at submit with positions."""
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
import unittest

import numpy as np

import njtest

ARGS = None
WORK = MODEL = BARE_MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
BAD_DIR = njtest.REPO / "tests" / "schema" / "bad"

TEMPLATE = ("You are a support assistant. Classify the ticket as one of: {labels}.\n"
            "Ticket: {document}\nLabel:\n")
PREFIX = "You are a support assistant. Classify the ticket as one of: {labels}.\nTicket: "
SUFFIX = "\nLabel:"
DOCS = ["I was charged twice for my March subscription.",
        "The app crashes when I open the settings page.",
        "Please add a dark mode to the dashboard.",
        "What are your opening hours on holidays?",
        "My invoice shows the wrong company address.",
        "Sync fails with error 504 since this morning."]


def setUpModule():
    global WORK, MODEL, BARE_MODEL
    WORK = njtest.scratch_dir("classify-")
    # The demo model (the README demo's preset, with its tokenizer): classification is shown
    # on the model users meet first.
    MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")
    BARE_MODEL = njtest.make_model(os.path.join(WORK, "model"))


def tokenize(text):
    p = subprocess.run([ARGS.bin, "tokenize", "--model", MODEL, "--text", text, "--output", "json"],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)["ids"]


def label_ids(label):
    """The label's tokens as they follow the template's suffix (" " + label)."""
    base = tokenize(SUFFIX)
    full = tokenize(SUFFIX + " " + label)
    assert full[:len(base)] == base, label
    return full[len(base):]


def deepest_branchings(labels):
    """The label trie's deepest branching points (its feed paths): label-token prefixes
    followed by two or more distinct tokens, none of them a prefix of another."""
    seqs = [label_ids(l) for l in labels]
    branching = {tuple(t[:i]) for t in seqs for i in range(len(t))
                 if len({u[i] for u in seqs if len(u) > i and u[:i] == t[:i]}) >= 2}
    return [b for b in branching if b and not any(len(c) > len(b) and c[:len(b)] == b for c in branching)]


def last_logits(ids):
    p = subprocess.run([ARGS.bin, "logits", "--model", MODEL, "--threads", "1", "--prompt-ids",
                        ",".join(map(str, ids)), "--output", "json"], capture_output=True, text=True, check=True)
    return np.array(json.loads(p.stdout)["last_logits"], dtype=np.float64)


def log_softmax(row):
    m = row.max()
    return row - m - np.log(np.exp(row - m).sum())


class Classify(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def spec(self, labels, docs=DOCS, model=None, name="triage", **extra):
        lines = [f"name: {name}", f"model: {json.dumps(str(model or MODEL))}", "kind: classify",
                 f"template: {json.dumps(TEMPLATE)}", f"labels: {json.dumps(labels)}", "items:"]
        lines += [f"  - {{id: d{k}, document: {json.dumps(d)}}}" for k, d in enumerate(docs)]
        lines += [f"{k}: {json.dumps(v)}" for k, v in extra.items()]
        path = os.path.join(self.dir, f"{name}.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def run_all(self, nj=None, *extra):
        p = (nj or self.nj).run("run", *RUN, "--drain", *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def check_distribution(self, results, labels):
        for r in results:
            self.assertEqual(r["status"], "done", r)
            d = r["details"]
            self.assertIn(d["label"], labels)
            self.assertEqual(r["output_text"], d["label"])
            self.assertEqual(r["output_ids"], label_ids(d["label"]))
            probs = d["probabilities"]
            self.assertEqual(sorted(probs), sorted(labels))
            self.assertAlmostEqual(sum(probs.values()), 1.0, delta=1e-6)
            ranked = sorted(probs.values(), reverse=True)
            self.assertEqual(probs[d["label"]], ranked[0])
            self.assertAlmostEqual(d["margin"], ranked[0] - ranked[1], delta=1e-12)

    def test_every_document_gets_a_label_with_zero_decode_steps_when_first_tokens_differ(self):
        labels = ["other", "feature request", "urgent", "question"]
        firsts = [label_ids(label)[0] for label in labels]
        self.assertEqual(len(set(firsts)), len(labels), f"the labels' first tokens must differ: {firsts}")
        job = self.nj.submit(self.spec(labels))
        self.run_all()
        results = self.nj.results(job)
        self.assertEqual([r["custom_id"] for r in results], [f"d{k}" for k in range(len(DOCS))])
        self.check_distribution(results, labels)
        for r in results:
            self.assertEqual(r["engine"]["decode_steps"], 0, "the label comes from the prompt's logits")
            self.assertEqual(r["details"]["decode_steps"], 0)

    def test_shared_first_tokens_walk_the_trie_and_match_the_model_logits(self):
        labels = ["billing", "bug", "feature request", "feature idea"]
        ids = {label: label_ids(label) for label in labels}
        self.assertEqual(ids["billing"][0], ids["bug"][0], "billing and bug share their first token here")
        self.assertEqual(ids["feature request"][0], ids["feature idea"][0])
        docs = DOCS[:3]
        job = self.nj.submit(self.spec(labels, docs))
        self.run_all()
        results = self.nj.results(job)
        self.check_distribution(results, labels)
        prefix = tokenize(PREFIX.replace("{labels}", ", ".join(labels)))
        suffix = tokenize(SUFFIX)
        # The branching points: label-token prefixes followed by two or more distinct tokens.
        seqs = list(ids.values())
        branching = {tuple(t[:i]) for t in seqs for i in range(len(t))
                     if len({u[i] for u in seqs if len(u) > i and u[:i] == t[:i]}) >= 2}
        deepest = [b for b in branching if b and not any(len(c) > len(b) and c[:len(b)] == b for c in branching)]
        self.assertGreaterEqual(len(deepest), 2)
        for doc, r in zip(docs, results):
            # Independent computation: the model's logits on the full sequences, the product
            # of full-softmax probabilities at the branching tokens, normalized.
            prompt = prefix + tokenize(doc) + suffix
            rows = {b: log_softmax(last_logits(prompt + list(b))) for b in branching}
            scores = {label: sum(rows[tuple(t[:i])][t[i]] for i in range(len(t)) if tuple(t[:i]) in branching)
                      for label, t in ids.items()}
            z = np.logaddexp.reduce(list(scores.values()))
            for label in labels:
                self.assertAlmostEqual(r["details"]["probabilities"][label], float(np.exp(scores[label] - z)),
                                       delta=1e-6, msg=(doc, label))
            steps = sum(len(b) for b in deepest)
            # Token-major passes take one constrained step per token to each branch; a layer
            # sweep (run's default for a window) feeds the same rows as branches, no steps.
            self.assertEqual(r["engine"]["decode_steps"], 0 if r["engine"]["schedule"] == "sweep" else steps,
                             "one constrained step per token to each branch")
            self.assertEqual(r["engine"]["tokens_fed"], len(prompt) - len(prefix) + steps)

    def test_the_prefix_is_prefilled_once_per_job_and_restored_for_every_document(self):
        # Token-major passes prefill the prefix once and restore its state for each document.
        labels = ["other", "feature request", "urgent", "question"]
        spec = self.spec(labels)
        job = self.nj.submit(spec)
        self.run_all(None, "--schedule", "passes")
        prefix = tokenize(PREFIX.replace("{labels}", ", ".join(labels)))
        suffix = tokenize(SUFFIX)
        (prefilled,) = [d for _, _, d in self.nj.events("prefix_prefilled")]
        self.assertEqual(prefilled["tokens"], len(prefix))
        self.assertEqual(prefilled["tokens_fed"], len(prefix))
        st = self.nj.status(job)
        self.assertEqual(st["job"]["prefix"]["prefills"], 1)
        self.assertEqual(st["job"]["prefix"]["tokens_fed"], len(prefix))
        results = self.nj.results(job)
        for doc, r in zip(DOCS, results):
            self.assertEqual(r["engine"]["tokens_fed"], len(tokenize(doc)) + len(suffix),
                             "each document costs only its suffix: document + the text after it")
            self.assertIn(r["details"]["prefix"], ("prefilled", "restored"))
        self.assertEqual(sum(r["details"]["prefix"] == "restored" for r in results), len(DOCS) - 1)
        self.assertFalse(os.path.exists(os.path.join(self.nj.home, "prefixes", f"job-{job}")),
                         "a finished job's prefix state is removed")

        # Without reuse every item prefills the prefix itself; the answers are identical.
        other = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-no-reuse"))
        job2 = other.submit(spec)
        self.run_all(other, "--no-prefix-reuse", "--schedule", "passes")
        self.assertEqual(other.events("prefix_prefilled"), [])
        for doc, r, r2 in zip(DOCS, results, other.results(job2)):
            self.assertEqual(r2["engine"]["tokens_fed"], len(prefix) + len(tokenize(doc)) + len(suffix))
            self.assertEqual(r2["details"]["probabilities"], r["details"]["probabilities"])

        # A layer sweep computes the prefix inside each window, once, as the parent of its
        # documents: no prefill of its own, nothing saved; each document is charged its own
        # rows (and its share of the window's bytes); the answers are identical.
        swept = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-sweep"))
        job3 = swept.submit(spec)
        self.run_all(swept, "--schedule", "sweep")
        self.assertEqual(swept.events("prefix_prefilled"), [])
        self.assertFalse(os.path.exists(os.path.join(swept.home, "prefixes", f"job-{job3}")))
        for doc, r, r3 in zip(DOCS, results, swept.results(job3)):
            self.assertEqual(r3["details"]["prefix"], "swept")
            self.assertEqual(r3["engine"]["schedule"], "sweep")
            self.assertEqual(r3["engine"]["window"], len(DOCS))
            self.assertEqual(r3["engine"]["tokens_fed"], len(tokenize(doc)) + len(suffix) + sum(
                len(b) for b in deepest_branchings(labels)))
            self.assertEqual(r3["details"]["probabilities"], r["details"]["probabilities"])

    def many_docs(self, n):
        return [f"{DOCS[k % len(DOCS)]} Reference {k}." for k in range(n)]

    def test_two_concurrent_runs_prefill_the_prefix_once(self):
        labels = ["other", "feature request", "urgent", "question"]
        job = self.nj.submit(self.spec(labels, self.many_docs(12)))
        # (token-major passes: a layer sweep computes the prefix inside each window)
        procs = [self.nj.popen("run", *RUN, "--drain", "--schedule", "passes") for _ in range(2)]
        for proc in procs:
            self.assertEqual(proc.wait(timeout=300), 0)
        owners = {d["owner"] for _, _, d in self.nj.events("claimed")}
        self.assertEqual(len(self.nj.events("prefix_prefilled")), 1,
                         f"one prefill for the job although {len(owners)} processes ran it")
        self.check_distribution(self.nj.results(job), labels)

    def test_a_run_killed_mid_job_redoes_the_item_it_held(self):
        labels = ["billing", "bug", "feature request", "other"]
        docs = self.many_docs(40)
        spec = self.spec(labels, docs)
        reference = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home-reference"))
        ref_job = reference.submit(spec)
        self.run_all(reference)
        job = self.nj.submit(spec)
        proc = self.nj.popen("run", *RUN, "--drain")
        deadline = time.time() + 120
        while self.nj.query("SELECT count(*) FROM items WHERE state = 'done'")[0][0] < 3:
            self.assertIsNone(proc.poll(), "run ended before the kill")
            self.assertLess(time.time(), deadline)
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        done = self.nj.query("SELECT count(*) FROM items WHERE state = 'done'")[0][0]
        self.assertLess(done, len(docs), "killed before the job ended")
        self.run_all()
        results = self.nj.results(job)
        self.assertEqual(len(results), len(docs))
        for r, ref in zip(results, reference.results(ref_job)):
            self.assertEqual(r["status"], "done")
            self.assertEqual(r["details"]["probabilities"], ref["details"]["probabilities"], r["custom_id"])
        self.assertEqual(self.nj.query("SELECT count(*) FROM results")[0][0], len(docs))
        self.assertEqual(self.nj.integrity(), ["ok"])

    def test_declared_outputs_are_written_at_the_end_and_by_results_write(self):
        labels = ["billing", "bug", "feature request", "other"]
        outputs = {"jsonl": "out/triage.jsonl", "csv": "out/triage.csv"}
        job = self.nj.submit(self.spec(labels, DOCS[:4], outputs=outputs))
        self.run_all()
        jsonl = os.path.join(self.dir, "out", "triage.jsonl")
        csv_path = os.path.join(self.dir, "out", "triage.csv")
        self.assertEqual([e[2]["paths"] for e in self.nj.events("outputs_written")], [[jsonl, csv_path]])
        p = self.nj.run("results", str(job), "--format", "csv")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(csv_path) as f:
            self.assertEqual(f.read(), p.stdout)
        rows = list(csv.reader(io.StringIO(p.stdout)))
        self.assertEqual(rows[0], ["custom_id", "status", "label", "p(billing)", "p(bug)",
                                   "p(feature request)", "p(other)", "margin", "error"])
        results = self.nj.results(job)
        with open(jsonl) as f:
            self.assertEqual([json.loads(line) for line in f], results)
        for row, r in zip(rows[1:], results):
            self.assertEqual(row[:3], [r["custom_id"], "done", r["details"]["label"]])
            self.assertAlmostEqual(sum(float(x) for x in row[3:7]), 1.0, delta=1e-7)
            self.assertAlmostEqual(float(row[7]), r["details"]["margin"], delta=1e-8)
            self.assertEqual(row[8], "")
        os.remove(jsonl)
        os.remove(csv_path)
        p = self.nj.run("results", str(job), "--write")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.exists(jsonl) and os.path.exists(csv_path))

    def test_glob_inputs_use_paths_relative_to_the_spec_as_ids(self):
        tickets = os.path.join(self.dir, "tickets")
        os.makedirs(tickets)
        for k, doc in enumerate(DOCS[:3]):
            with open(os.path.join(tickets, f"t{k}.txt"), "w") as f:
                f.write(doc + "\n")
        path = os.path.join(self.dir, "glob.yaml")
        with open(path, "w") as f:
            f.write(f"name: glob\nmodel: {json.dumps(MODEL)}\nkind: classify\n"
                    f"template: {json.dumps(TEMPLATE)}\nlabels: [billing, other]\n"
                    "inputs: {glob: \"tickets/*.txt\"}\n")
        job = self.nj.submit(path)
        self.run_all()
        results = self.nj.results(job)
        self.assertEqual([r["custom_id"] for r in results], ["tickets/t0.txt", "tickets/t1.txt", "tickets/t2.txt"])
        self.check_distribution(results, ["billing", "other"])

    def test_the_example_specs_run_to_the_end(self):
        # examples/triage (classify over its tickets) and examples/stories (generate), copied
        # here with this test's model in place of the triage demo model (the trained triage
        # model has its own test, cli_triage_model) and the committed story model in place of
        # its copy (the stories spec's memory budget is set for its size).
        story_model = str(njtest.REPO / "examples" / "stories" / "model")
        for name, line, model in (("triage", "model: ../../build/demo-model\n", MODEL),
                                  ("stories", "model: ../../build/stories-model\n", story_model)):
            shutil.copytree(njtest.REPO / "examples" / name, os.path.join(self.dir, name),
                            ignore=shutil.ignore_patterns("results", "model", "training"))
            path = os.path.join(self.dir, name, f"{name}.yaml")
            with open(path) as f:
                text = f.read()
            self.assertIn(line, text)
            with open(path, "w") as f:
                f.write(text.replace(line, f"model: {json.dumps(model)}\n"))
        triage = self.nj.submit(os.path.join(self.dir, "triage", "triage.yaml"))
        stories = self.nj.submit(os.path.join(self.dir, "stories", "stories.yaml"))
        self.run_all()
        tickets = os.listdir(os.path.join(self.dir, "triage", "tickets"))
        self.assertGreaterEqual(len(tickets), 20)
        results = self.nj.results(triage)
        self.assertEqual(sorted(r["custom_id"] for r in results), sorted("tickets/" + t for t in tickets))
        self.check_distribution(results, ["billing", "bug", "feature request", "other"])
        self.assertTrue(os.path.exists(os.path.join(self.dir, "triage", "results", "triage.csv")))
        stories_results = self.nj.results(stories)
        self.assertTrue(3 <= len(stories_results) <= 4)
        for r in stories_results:
            self.assertEqual(r["status"], "done")
            self.assertTrue(r["output_text"])
        # The morning report gives a classification's cost per document, from the same usage.
        p = self.nj.run("report", str(triage))
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"per document: +\S+ s engine, [0-9.]+ [KMG]?i?B read, ([0-9.]+) tokens fed, ([0-9.]+) decode steps "
                      r"\(means over (\d+) done\)", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        n = len(results)
        self.assertEqual(int(m.group(3)), n)
        self.assertAlmostEqual(float(m.group(1)), sum(r["engine"]["tokens_fed"] for r in results) / n, delta=0.05)
        self.assertAlmostEqual(float(m.group(2)), sum(r["engine"]["decode_steps"] for r in results) / n, delta=0.005)

    def test_a_model_without_a_tokenizer_is_a_clear_submit_error(self):
        spec = self.spec(["billing", "other"], model=BARE_MODEL)
        p = self.nj.run("submit", spec)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("classify jobs need the model's tokenizer", p.stderr)
        self.assertIn(BARE_MODEL, p.stderr)
        self.assertIsNone(self.nj.dump(), "a rejected spec writes nothing")

    def test_bad_classify_specs_are_rejected_with_their_position_and_leave_the_store_unchanged(self):
        # The files of tests/schema/bad, copied next to this test's model.
        bad = os.path.join(self.dir, "bad")
        shutil.copytree(BAD_DIR, bad, ignore=shutil.ignore_patterns("[!c]*.yaml", "c[!l]*.yaml"))
        files = sorted(f for f in os.listdir(bad) if f.startswith("classify-") and f.endswith(".yaml"))
        self.assertGreaterEqual(len(files), 10)
        self.nj.submit(self.spec(["billing", "other"], DOCS[:1], name="good"))
        before = self.nj.dump()
        for name in files:
            path = os.path.join(bad, name)
            with open(path) as f:
                text = f.read()
            expected = re.match(r"# error: (.*)\n", text).group(1)
            with open(path, "w") as f:
                f.write(re.sub(r"(?m)^model: .*$", "model: " + json.dumps(MODEL), text))
            p = self.nj.run("submit", path)
            self.assertEqual(p.returncode, 3, (name, p.stderr))
            self.assertIn(expected, p.stderr, name)
            self.assertRegex(p.stderr, re.escape(name) + r":\d+:\d+: ", name)
            self.assertEqual(self.nj.dump(), before, f"{name}: the store is unchanged")


if __name__ == "__main__":
    njtest.main(globals())
