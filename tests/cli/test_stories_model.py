#!/usr/bin/env python3
"""The trained story model (examples/stories/model, made by examples/stories/training/train.py)
and the stories example (examples/stories/stories.yaml) as deploy/demo.sh runs it:

  * the example's stories, written by `nightjar run` (greedy and sampled), read as the
    training stories do: nearly every word is a word of the story grammar, sentences end,
    and each story keeps its hero's name;
  * a run stopped with SIGTERM while the stories are being written (as the demo stops it) and
    run again resumes every story from its checkpoint and writes, token for token, the stories
    of an uninterrupted run;
  * the model's tokenizer files are the ones tests/reference/k3_tokenizer_gen.py writes;
  * the engine's logits on the model equal the numpy reference's (tests/reference/k3ref), and
    the PyTorch forward pass's logits saved by train.py (training/torch_logits.json) equal the
    numpy reference's: the engine computes what was trained.

Nothing here needs PyTorch: the committed model and logits file are the inputs.
"""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import unittest

import numpy as np
import yaml

import njtest

ARGS = None
WORK = None
STORIES = njtest.REPO / "examples" / "stories"
MODEL = STORIES / "model"
TRAINING = STORIES / "training"
RUN = ["--threads", "1", "--log-seconds", "1000"]
MODEL_LINE = re.compile(r"(?m)^model:\s*\.\./\.\./build/stories-model\s*$")
# Engine and PyTorch (float32) against the float64 reference, as for the triage model.
LOGIT_TOL = 1e-4
# The share of a story's words that must be words of the grammar. Sampling (temperature 0.8,
# top-p 0.95) may put two word pieces together that the grammar never does; greedy must not.
MIN_KNOWN_SAMPLED = 0.97
_UNINTERRUPTED = {}


def setUpModule():
    global WORK
    WORK = njtest.scratch_dir("stories-model-")


def grammar_words():
    """Every word (letters only, lowercased) of 2,000 generated training stories."""
    sys.path.insert(0, str(TRAINING))
    import corpus
    words = set()
    for s in corpus.generate(1, 2000):
        words.update(w.lower() for w in re.findall(r"[A-Za-z]+", s))
    return words


def example_spec(d):
    """A copy of stories.yaml in directory d with its model line pointed at the committed model."""
    os.makedirs(d, exist_ok=True)
    text = (STORIES / "stories.yaml").read_text()
    if not MODEL_LINE.search(text):
        raise AssertionError("stories.yaml names ../../build/stories-model")
    path = os.path.join(d, "stories.yaml")
    with open(path, "w") as f:
        f.write(MODEL_LINE.sub(f"model: {json.dumps(str(MODEL))}", text))
    return path


def reference_logits(ids):
    sys.path.insert(0, str(njtest.REPO / "tests" / "reference"))
    from k3ref import K3Model
    return K3Model(str(MODEL)).forward(ids)


class StoriesModel(unittest.TestCase):
    def uninterrupted(self):
        """{custom_id: result} of the example run to the end in one `run` (computed once)."""
        if not _UNINTERRUPTED:
            d = os.path.join(WORK, "uninterrupted")
            nj = njtest.Nightjar(ARGS.bin, os.path.join(d, "home"))
            job = nj.submit(example_spec(d))
            p = nj.run("run", *RUN, "--drain")
            self.assertEqual(p.returncode, 0, p.stderr)
            _UNINTERRUPTED.update({r["custom_id"]: r for r in nj.results(job)})
        return _UNINTERRUPTED

    def test_the_example_stories_read_as_the_training_stories(self):
        spec = yaml.safe_load((STORIES / "stories.yaml").read_text())
        results = self.uninterrupted()
        self.assertEqual(sorted(results), sorted(i["id"] for i in spec["items"]))
        known = grammar_words()
        for item in spec["items"]:
            r = results[item["id"]]
            with self.subTest(story=item["id"]):
                self.assertEqual(r["status"], "done")
                text = re.sub(r"<\|[a-z_]+\|>", "", r["output_text"])     # the end-of-sequence token's name
                words = [w.lower() for w in re.findall(r"[A-Za-z]+", text)]
                share = sum(w in known for w in words) / max(1, len(words))
                greedy = item.get("temperature", spec["defaults"]["temperature"]) == 0
                print(f"\n{item['id']}: {r['output_tokens']} tokens ({r['finish_reason']}), {len(words)} words, "
                      f"{share:.3f} of them words of the grammar{' (greedy)' if greedy else ''}", file=sys.stderr)
                self.assertGreaterEqual(len(words), 100, "a story, not a line")
                self.assertGreaterEqual(share, 1.0 if greedy else MIN_KNOWN_SAMPLED, text)
                self.assertGreaterEqual(text.count(". "), 10, "sentences that end")
                hero = re.findall(r"(?:called|named|name was) ([A-Z][a-z]+)", item["prompt"])[0]
                self.assertGreaterEqual(text.count(hero), 3, f"the story keeps its hero {hero}")

    def test_a_run_stopped_midway_and_run_again_writes_the_uninterrupted_stories(self):
        want = self.uninterrupted()
        d = os.path.join(WORK, "stopped")
        nj = njtest.Nightjar(ARGS.bin, os.path.join(d, "home"))
        job = nj.submit(example_spec(d))
        log = open(os.path.join(d, "run.log"), "w")
        self.addCleanup(log.close)
        proc = nj.popen("run", *RUN, "--drain", "--commit-tokens", "8", stderr=log)
        deadline = time.time() + 300
        while True:                      # stop once the stories are under way, as the demo does
            self.assertIsNone(proc.poll(), "the run ended before the stop")
            self.assertLess(time.time(), deadline, "no story tokens stored")
            if nj.query("SELECT coalesce(sum(tokens_done), 0) FROM items")[0][0] >= 64:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=300), 0, "a graceful stop exits 0")
        released = [e for _, _, e in nj.events("released")]
        self.assertTrue(released and all(e["reason"] == "SIGTERM" for e in released), released)
        stopped = nj.query("SELECT custom_id, tokens_done FROM items WHERE state = 'queued'")
        self.assertTrue(any(n > 0 for _, n in stopped), f"stories stopped midway: {stopped}")

        p = nj.run("run", *RUN, "--drain")
        self.assertEqual(p.returncode, 0, p.stderr)
        resumed = [e for _, _, e in nj.events("resumed")]
        self.assertGreaterEqual(len(resumed), len([n for _, n in stopped if n > 0]))
        self.assertTrue(all(e["from"] == "checkpoint" for e in resumed), resumed)
        got = {r["custom_id"]: r for r in nj.results(job)}
        self.assertEqual(sorted(got), sorted(want))
        for cid, r in got.items():
            with self.subTest(story=cid):
                self.assertEqual(r["status"], "done")
                self.assertEqual(r["output_ids"], want[cid]["output_ids"])
                self.assertEqual(r["output_text"], want[cid]["output_text"])
        print(f"\nstopped at {dict(stopped)} tokens; every story resumed and equals the uninterrupted run's",
              file=sys.stderr)

    def test_tokenizer_files_are_the_generators(self):
        sys.path.insert(0, str(njtest.REPO / "tests" / "reference"))
        import k3_tokenizer_gen
        d = os.path.join(WORK, "tokenizer")
        k3_tokenizer_gen.write_tokenizer(d)
        for name in ("tiktoken.model", "tokenizer_config.json"):
            with self.subTest(file=name):
                self.assertEqual((MODEL / name).read_bytes(), pathlib.Path(d, name).read_bytes(),
                                 f"{MODEL / name} differs from k3_tokenizer_gen.py's; regenerate it "
                                 "(examples/triage/training/README.md says how)")

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
