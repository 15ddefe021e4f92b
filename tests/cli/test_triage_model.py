#!/usr/bin/env python3
"""The trained triage model (examples/triage/model, made by examples/triage/training/train.py):

  * the triage example's 24 tickets, classified by `nightjar run` with triage.yaml's template
    and labels, get the labels a person would give them (EXPECTED_LABELS) for at least 22;
  * the held-out set (examples/triage/training/heldout.jsonl, another writing style) is
    classified too and its accuracy printed;
  * the model's tokenizer files are the ones tests/reference/k3_tokenizer_gen.py writes (K3's
    format and special-token layout, chat control tokens included);
  * the engine's logits on the model equal the numpy reference's (tests/reference/k3ref), and
    the PyTorch forward pass's logits saved by train.py (training/torch_logits.json) equal the
    numpy reference's: the engine computes what was trained.

Nothing here needs PyTorch: the committed model and logits file are the inputs.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import unittest

import numpy as np
import yaml

import njtest

ARGS = None
WORK = None
TRIAGE = njtest.REPO / "examples" / "triage"
MODEL = TRIAGE / "model"
TRAINING = TRIAGE / "training"
RUN = ["--threads", "1", "--log-seconds", "1000"]
DEMO_MODEL_LINE = re.compile(r"(?m)^model:\s*\.\./\.\./build/demo-model\s*$")

# The 24 example tickets as a person would label them. t12 (a typo on the homepage) is
# content feedback rather than a defect of the product: "other".
EXPECTED_LABELS = {
    "t01-double-charge.txt": "billing",
    "t02-app-crash.txt": "bug",
    "t03-dark-mode.txt": "feature request",
    "t04-invoice-address.txt": "billing",
    "t05-login-loop.txt": "bug",
    "t06-export-pdf.txt": "feature request",
    "t07-opening-hours.txt": "other",
    "t08-card-declined.txt": "billing",
    "t09-sync-error.txt": "bug",
    "t10-team-calendar.txt": "feature request",
    "t11-cancel-subscription.txt": "billing",
    "t12-typo-homepage.txt": "other",
    "t13-search-broken.txt": "bug",
    "t14-vat-number.txt": "billing",
    "t15-keyboard-shortcuts.txt": "feature request",
    "t16-password-reset-email.txt": "bug",
    "t17-partnership.txt": "other",
    "t18-price-increase.txt": "billing",
    "t19-slow-dashboard.txt": "bug",
    "t20-api-webhooks.txt": "feature request",
    "t21-refund-status.txt": "billing",
    "t22-thanks.txt": "other",
    "t23-notifications-duplicate.txt": "bug",
    "t24-bulk-edit.txt": "feature request",
}
# Issue 19 asks for at least 22 of 24. The committed model (the sixth attempt: the plain
# corpus, `train.py --seed 3 --corpus 40000 --steps 3000 --plain-corpus 0.3 --plain-casual 0.5
# --select-every 50 --select-from 1000`, kept step 2700) labels 22 correctly, with 36 of the 40
# held-out tickets; it was chosen on the development and held-out sets (68 of 72; its
# configuration's three seeds 68, 65, 68) and the test set was scored once, after the choice.
# The models before it labelled 20 (the second corpus, 63 of 72) and 21 (the first corpus);
# the candidates of attempts two to five (at most 63 of 72) were never scored on the test set
# (training README).
ISSUE_TARGET = 22
MIN_CORRECT = 22

# Engine and PyTorch (float32) against the float64 reference: the reference's usual tolerance
# (the engine's golden gates use 1e-4). Measured: engine 4.9e-7, PyTorch 2.4e-6; logits <= 6.
LOGIT_TOL = 1e-4


def setUpModule():
    global WORK
    WORK = njtest.scratch_dir("triage-model-")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def reference_logits(ids):
    sys.path.insert(0, str(njtest.REPO / "tests" / "reference"))
    from k3ref import K3Model
    return K3Model(str(MODEL)).forward(ids)


class TriageModel(unittest.TestCase):
    def classify(self, name, docs):
        """{id: result} of a classify job over docs [(id, text)] with triage.yaml's template
        and labels, on the committed model."""
        spec = yaml.safe_load((TRIAGE / "triage.yaml").read_text())
        d = os.path.join(WORK, name)
        os.makedirs(d)
        lines = [f"name: {name}", f"model: {json.dumps(str(MODEL))}", "kind: classify",
                 f"template: {json.dumps(spec['template'])}", f"labels: {json.dumps(spec['labels'])}",
                 "items:"] + [f"  - {{id: {json.dumps(i)}, document: {json.dumps(t)}}}" for i, t in docs]
        path = os.path.join(d, "spec.yaml")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return self.run_job(path, os.path.join(d, "home"))

    def run_job(self, spec_path, home):
        """{custom_id: result} of the job `spec_path`, run to the end in a fresh home."""
        nj = njtest.Nightjar(ARGS.bin, home)
        job = nj.submit(spec_path)
        # Token-major passes, so that the trie walk shows as decode steps (a sweep gives the
        # same labels with none: test_sweep.py).
        p = nj.run("run", *RUN, "--drain", "--schedule", "passes")
        self.assertEqual(p.returncode, 0, p.stderr)
        results = {r["custom_id"]: r for r in nj.results(job)}
        for r in results.values():
            self.assertEqual(r["status"], "done", r)
            self.assertAlmostEqual(sum(r["details"]["probabilities"].values()), 1.0, delta=1e-6)
        return results

    def score(self, title, results, expected):
        correct = 0
        print(f"\n{title}:", file=sys.stderr)
        for iid, want in expected:
            d = results[iid]["details"]
            got = d["label"]
            correct += got == want
            probs = " ".join(f"{k}={v:.2f}" for k, v in d["probabilities"].items())
            print(f"  {iid:34} {want:16} {got:16}{'' if got == want else ' X'}  {probs}", file=sys.stderr)
        print(f"  {correct}/{len(expected)} correct", file=sys.stderr)
        return correct

    def test_example_tickets_get_the_labels_a_person_would_give(self):
        tickets = sorted(os.listdir(TRIAGE / "tickets"))
        self.assertEqual(tickets, sorted(EXPECTED_LABELS), "every example ticket has an expected label")
        # The example itself: a copy of triage.yaml (its glob, template and labels) next to a
        # copy of the tickets, with only the model line pointed at the committed model.
        d = os.path.join(WORK, "example")
        shutil.copytree(TRIAGE / "tickets", os.path.join(d, "tickets"))
        spec = DEMO_MODEL_LINE.sub(f"model: {json.dumps(str(MODEL))}", (TRIAGE / "triage.yaml").read_text())
        self.assertIn(str(MODEL), spec, "triage.yaml names ../../build/demo-model")
        with open(os.path.join(d, "triage.yaml"), "w") as f:
            f.write(spec)
        results = self.run_job(os.path.join(d, "triage.yaml"), os.path.join(d, "home"))
        self.assertEqual(sorted(results), sorted("tickets/" + t for t in tickets))
        results = {iid.split("/", 1)[1]: r for iid, r in results.items()}     # tickets/NAME -> NAME
        correct = self.score("example tickets (the test set)", results, sorted(EXPECTED_LABELS.items()))
        print(f"  issue 19's target: {ISSUE_TARGET}/24 ({'met' if correct >= ISSUE_TARGET else 'NOT met'})",
              file=sys.stderr)
        self.assertGreaterEqual(correct, MIN_CORRECT)
        self.assertTrue(any(r["details"]["decode_steps"] > 0 for r in results.values()),
                        "billing and bug share a first token: the label trie is walked")

    def test_heldout_set_accuracy(self):
        rows = read_jsonl(TRAINING / "heldout.jsonl")
        results = self.classify("heldout", [(r["id"], r["text"]) for r in rows])
        correct = self.score("held-out set (another style)", results, [(r["id"], r["label"]) for r in rows])
        # Not a target, a floor against regressions: the committed model gets 36/40 (chance is 25 %).
        self.assertGreaterEqual(correct / len(rows), 0.85)

    def test_tokenizer_files_are_the_generators(self):
        sys.path.insert(0, str(njtest.REPO / "tests" / "reference"))
        import k3_tokenizer_gen
        d = os.path.join(WORK, "tokenizer")
        k3_tokenizer_gen.write_tokenizer(d)
        for name in ("tiktoken.model", "tokenizer_config.json"):
            with self.subTest(file=name):
                self.assertEqual((MODEL / name).read_bytes(), pathlib.Path(d, name).read_bytes(),
                                 f"{MODEL / name} differs from k3_tokenizer_gen.py's; regenerate it "
                                 "(training/README.md)")

    def test_engine_and_pytorch_logits_equal_the_numpy_reference(self):
        saved = json.loads((TRAINING / "torch_logits.json").read_text())
        self.assertEqual(len(saved["prompts"]), 3)
        for k, prompt in enumerate(saved["prompts"]):
            with self.subTest(prompt=k):
                ids = prompt["ids"]
                ref = reference_logits(ids)                                    # [T, vocab] float64
                cols = prompt["columns"]
                torch_cols = np.array(prompt["logits_at_columns"])
                torch_last = np.array(prompt["last_logits"])
                self.assertEqual(torch_cols.shape, (len(ids), len(cols)))
                d_torch = max(np.abs(torch_cols - ref[:, cols]).max(), np.abs(torch_last - ref[-1]).max())
                p = subprocess.run([ARGS.bin, "logits", "--model", str(MODEL), "--threads", "1",
                                    "--prompt-ids", ",".join(map(str, ids)), "--output", "json"],
                                   capture_output=True, text=True, timeout=300)
                self.assertEqual(p.returncode, 0, p.stderr)
                eng = json.loads(p.stdout)
                d_engine = np.abs(np.array(eng["last_logits"]) - ref[-1]).max()
                top2 = np.sort(ref, axis=-1)[:, -2:]
                clear = (top2[:, 1] - top2[:, 0]) > 10 * LOGIT_TOL          # argmax not a near tie
                ref_argmax = np.argmax(ref, axis=-1)
                print(f"\nprompt {k}: {len(ids)} tokens, |logit| <= {np.abs(ref).max():.1f}; max |diff| "
                      f"engine-reference {d_engine:.2e}, PyTorch-reference {d_torch:.2e}", file=sys.stderr)
                self.assertLess(d_engine, LOGIT_TOL)
                self.assertLess(d_torch, LOGIT_TOL)
                self.assertEqual(list(np.array(eng["argmax"])[clear]), list(ref_argmax[clear]))


if __name__ == "__main__":
    njtest.main(globals())
