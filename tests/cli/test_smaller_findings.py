#!/usr/bin/env python3
"""Issue 16, item 12: the smaller things the probes found, one test each.
  - with --output json a failure prints exactly one JSON object, {"error": {"code", "message"}};
  - --home is accepted before the subcommand;
  - a `memory:` below the model's minimum for the job is refused at validate/submit;
  - control characters in ids and names are escaped in `status` and `report`;
  - the HTML report honours --items;
  - documents have the same size cap (16 MiB) whatever input kind holds them;
  - validate reports a context beyond the model's maximum.
(The distinct exit code of `run` for items that failed for good is checked in test_run.py
and test_non_finite_logits.py; the backoff of a missing model and the stalled state in
test_backoff_and_stalled.py.)"""
import json
import os
import shutil
import subprocess
import unittest

import njtest

ARGS = None
WORK = MODEL = TOK_MODEL = None
RUN = ["--threads", "1", "--log-seconds", "1000"]
BIG = 16 * 2**20 + 1  # one byte over the cap


def setUpModule():
    global WORK, MODEL, TOK_MODEL
    WORK = njtest.scratch_dir("findings-")
    MODEL = njtest.make_model(os.path.join(WORK, "model"))
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-tok"), extra=["--tokenizer"])


def nightjar(*args, env=None):
    return subprocess.run([ARGS.bin, *args], capture_output=True, text=True, timeout=300, env=env)


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.home = os.path.join(self.dir, "home")
        self.nj = njtest.Nightjar(ARGS.bin, self.home)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path


class JsonErrors(Base):
    def assert_one_error_object(self, p, code):
        self.assertEqual(p.returncode, code, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), 1, f"exactly one JSON object on stdout: {p.stdout!r}")
        obj = json.loads(lines[0])
        self.assertEqual(obj["error"]["code"], code)
        self.assertIsInstance(obj["error"]["message"], str)
        self.assertTrue(obj["error"]["message"])
        return obj

    def test_a_failure_with_output_json_prints_one_error_object(self):
        self.assert_one_error_object(nightjar("status", "--output", "json", "--home", self.home), 3)
        self.assert_one_error_object(nightjar("generate", "--model", os.path.join(self.dir, "absent"),
                                              "--prompt-ids", "1", "--output", "json"), 3)
        obj = self.assert_one_error_object(nightjar("tokenize", "--model", MODEL, "--bogus", "--output", "json"), 2)
        self.assertIn("bogus", obj["error"]["message"])
        obj = self.assert_one_error_object(nightjar("plan", "--model", MODEL, "--memory", "1KiB", "--output",
                                                    "json"), 1)
        self.assertGreater(obj["min_memory_bytes"], 1024)
        spec = njtest.write_spec(os.path.join(self.dir, "bad.yaml"), "bad", MODEL, [{"id": "a", "prompt_ids": []}])
        obj = self.assert_one_error_object(nightjar("validate", spec, "--output", "json"), 3)
        self.assertEqual(obj["ok"], False)
        self.assertIn("prompt_ids", obj["error"]["message"])
        self.assert_one_error_object(nightjar("submit", spec, "--output", "json", "--home", self.home), 3)


class HomeBeforeTheSubcommand(Base):
    def test_home_may_come_before_the_subcommand(self):
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 2}])
        p = nightjar("--home", self.home, "submit", spec, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        job = json.loads(p.stdout)["job_id"]
        self.assertEqual(json.loads(p.stdout)["home"], self.home)
        p = nightjar("--home", self.home, "run", "--drain", *RUN)
        self.assertEqual(p.returncode, 0, p.stderr)
        before = nightjar("--home", self.home, "status", str(job), "--output", "json")
        after = nightjar("status", str(job), "--output", "json", "--home", self.home)
        self.assertEqual(before.returncode, 0, before.stderr)
        self.assertEqual(json.loads(before.stdout)["items"], json.loads(after.stdout)["items"])
        p = nightjar("--home", self.home, "status", "--home", os.path.join(self.dir, "other"))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--home", p.stderr)
        p = nightjar("--home", self.home, "generate", "--model", MODEL, "--prompt-ids", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("does not use a home", p.stderr)


class MemoryBelowTheMinimum(Base):
    def test_memory_below_the_models_minimum_is_refused_at_validate_and_submit(self):
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 4}], memory="64KiB")
        for cmd in ("validate", "submit"):
            p = nightjar(cmd, spec, "--home", self.home) if cmd == "submit" else nightjar(cmd, spec)
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn(f"{spec}:4:", p.stderr)
            self.assertIn("memory", p.stderr)
            self.assertIn("minimum", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.home, "nightjar.db")))
        # The minimum itself is accepted, and runs.
        p = nightjar("plan", "--model", MODEL, "--max-context", "6", "--all-logits", "--output", "json")
        minimum = json.loads(p.stdout)["min_memory_bytes"]
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", MODEL,
                                 [{"id": "a", "prompt_ids": [1, 2], "max_tokens": 4}], memory=str(minimum))
        self.assertEqual(nightjar("validate", spec).returncode, 0)
        self.nj.submit(spec)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)


class ControlCharacters(Base):
    def test_control_characters_in_ids_and_names_are_escaped_in_status_and_report(self):
        name = "night\u001b[2Jly\nname"
        custom_id = "a\u001b[31mred\u0000\nb"
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), name, MODEL,
                                 [{"id": custom_id, "prompt_ids": [1, 2], "max_tokens": 2},
                                  {"id": "plain", "prompt_ids": [3], "max_tokens": 2}])
        job = self.nj.submit(spec)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        html = os.path.join(self.dir, "report.html")
        escaped_name = b"night\\x1b[2Jly\\nname"
        escaped_id = b"a\\x1b[31mred\\x00\\nb"
        for args in (("status",), ("status", str(job)), ("report",), ("report", "--out", html)):
            p = subprocess.run(self.nj.cmd(*args), capture_output=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            with self.subTest(args=args):
                self.assertNotIn(b"\x1b", p.stdout)
                self.assertNotIn(b"\x00", p.stdout)
                self.assertIn(escaped_name, p.stdout)
                if len(args) > 1:
                    self.assertIn(escaped_id, p.stdout)
        with open(html, "rb") as f:
            page = f.read()
        self.assertNotIn(b"\x1b", page)
        self.assertNotIn(b"\x00", page)
        self.assertIn(escaped_id, page)
        # JSON keeps the exact text (it escapes control characters itself).
        items = self.nj.status(job)["items"]
        self.assertEqual(items[0]["custom_id"], custom_id)


class HtmlItems(Base):
    def test_the_html_report_honours_items(self):
        items = [{"id": f"item-{k}", "prompt_ids": [k + 1], "max_tokens": 2} for k in range(5)]
        job = self.nj.submit(njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", MODEL, items))
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        html = os.path.join(self.dir, "report.html")
        p = self.nj.run("report", str(job), "--items", "2", "--out", html)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(html) as f:
            page = f.read()
        self.assertEqual(page.count("<tr><td>item-"), 2)
        self.assertIn("... and 3 more items", page)
        self.assertNotIn(">item-4<", page)
        p = self.nj.run("report", str(job), "--items", "0", "--out", html)
        with open(html) as f:
            self.assertEqual(f.read().count("<tr><td>item-"), 5)


class DocumentCaps(Base):
    def assert_capped(self, p, where):
        self.assertEqual(p.returncode, 3, p.stderr[-2000:])
        self.assertIn("more than the 16 MiB a document may have", p.stderr)
        self.assertIn(where, p.stderr)

    def classify(self, inputs_line):
        return self.write("job.yaml", f"name: c\nmodel: {json.dumps(TOK_MODEL)}\nkind: classify\n"
                                      f"template: \"Ticket: {{document}}\\nLabel:\\n\"\nlabels: [billing, bug]\n"
                                      f"{inputs_line}\n")

    def test_every_input_kind_has_the_same_document_cap(self):
        big = "x " * (BIG // 2 + 1)
        self.write("docs.jsonl", json.dumps({"id": "a", "text": big}) + "\n")
        self.assert_capped(nightjar("validate", self.classify("inputs: {jsonl: docs.jsonl}")), "docs.jsonl:1")
        self.assert_capped(nightjar("validate", self.classify("items:\n  - {id: a, document: " + json.dumps(big) + "}")),
                           "items[0].document")
        spec = njtest.write_spec(os.path.join(self.dir, "gen.yaml"), "g", TOK_MODEL, [{"id": "a", "prompt": big}])
        self.assert_capped(nightjar("validate", spec), "items[0].prompt")
        batch = self.write("batch.jsonl", json.dumps({"custom_id": "a", "body": {"messages": [
            {"role": "user", "content": big}]}}) + "\n")
        self.assert_capped(nightjar("validate", "--openai-batch", batch, "--model", TOK_MODEL), "batch.jsonl:1")
        os.makedirs(os.path.join(self.dir, "docs"))
        self.write("docs/big.txt", big)
        self.assert_capped(nightjar("validate", self.classify("inputs: {glob: \"docs/*.txt\"}")), "docs/big.txt")


class ContextBeyondTheMaximum(Base):
    def test_validate_reports_a_context_beyond_the_models_maximum(self):
        # The tokenizer's model_max_length (1048576 in the generated tokenizer_config.json).
        spec = njtest.write_spec(os.path.join(self.dir, "job.yaml"), "job", TOK_MODEL,
                                 [{"id": "ok", "prompt_ids": [1, 2], "max_tokens": 8},
                                  {"id": "long", "prompt": "Once upon a time", "max_tokens": 1048576}])
        p = nightjar("validate", spec)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("items[1] 'long'", p.stderr)
        self.assertIn("beyond the model's maximum of 1048576 (tokenizer_config.json model_max_length)", p.stderr)
        self.assertNotIn("'ok'", p.stderr)
        # config.json's max_position_embeddings.
        model = os.path.join(self.dir, "model")
        shutil.copytree(MODEL, model)
        with open(os.path.join(model, "config.json")) as f:
            config = json.load(f)
        config["text_config"]["max_position_embeddings"] = 16
        with open(os.path.join(model, "config.json"), "w") as f:
            json.dump(config, f)
        spec = njtest.write_spec(os.path.join(self.dir, "job2.yaml"), "job", model,
                                 [{"id": "a", "prompt_ids": [1, 2, 3], "max_tokens": 14}])
        p = nightjar("validate", spec)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("context of 17 tokens", p.stderr)
        self.assertIn("maximum of 16 (config.json max_position_embeddings)", p.stderr)
        spec = njtest.write_spec(os.path.join(self.dir, "job3.yaml"), "job", model,
                                 [{"id": "a", "prompt_ids": [1, 2, 3], "max_tokens": 13}])
        self.assertEqual(nightjar("validate", spec).returncode, 0)


if __name__ == "__main__":
    njtest.main(globals())
