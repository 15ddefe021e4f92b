#!/usr/bin/env python3
"""`nightjar submit --openai-batch` and `results --format openai`: a sample Batch API input
file becomes one generate job whose prompts are K3's chat format; its results come back as
Batch API output lines, one per custom_id, valid against
schemas/openai_batch_output.schema.json; bad files are rejected naming the file and line,
and write nothing."""
import json
import os
import shutil
import struct
import subprocess
import unittest

import jsonschema  # Debian: python3-jsonschema

import njtest

ARGS = None
WORK = TOK_MODEL = PLAIN_MODEL = None
SAMPLE = njtest.REPO / "tests/cli/data/openai_batch_input.jsonl"
OUTPUT_SCHEMA = json.loads((njtest.REPO / "schemas/openai_batch_output.schema.json").read_text())
RUN = ["--threads", "1", "--log-seconds", "1000"]


def setUpModule():
    global WORK, TOK_MODEL, PLAIN_MODEL
    WORK = njtest.scratch_dir("openai-")
    TOK_MODEL = njtest.make_model(os.path.join(WORK, "model-tok"), extra=["--tokenizer"])
    PLAIN_MODEL = njtest.make_model(os.path.join(WORK, "model-plain"))


def requests():
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


def tokenize(text, specials=False):
    p = subprocess.run([ARGS.bin, "tokenize", "--model", TOK_MODEL, "--text", text, "--output", "json",
                        *(["--specials"] if specials else [])], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["ids"]


def expected_chat_ids(messages):
    """K3's chat format built from separately tokenized pieces (jobs/chat_format.h)."""
    (open_id,), (sep_id,), (close_id,) = (tokenize(s, specials=True) for s in ("<|open|>", "<|sep|>", "<|close|>"))
    ids = []
    for m in messages:
        content = m["content"] if isinstance(m["content"], str) else "".join(p["text"] for p in m["content"])
        role = "system" if m["role"] == "developer" else m["role"]
        ids += [open_id] + tokenize(role) + [sep_id] + tokenize(content) + [close_id]
    return ids + [open_id] + tokenize("assistant") + [sep_id]


# (name, file text, 1-based line the error names, text the message must contain)
GOOD_LINE = json.dumps({"custom_id": "ok", "body": {"messages": [{"role": "user", "content": "hi"}]}})


def line(custom_id="x", **body):
    body.setdefault("messages", [{"role": "user", "content": "hello"}])
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})


BAD = [
    ("malformed JSON", GOOD_LINE + "\n{\"custom_id\": \"a\", \"body\": {\n", 2, "malformed JSON"),
    ("missing custom_id", GOOD_LINE + "\n" + json.dumps({"body": {"messages": [{"role": "user", "content": "x"}]}}),
     2, "custom_id: missing"),
    ("duplicate custom_id", line("a") + "\n" + line("b") + "\n" + line("a") + "\n", 3,
     "custom_id: duplicate 'a' (first used at line 1)"),
    ("unsupported url", GOOD_LINE + "\n" + json.dumps({"custom_id": "e", "url": "/v1/embeddings", "body": {
        "messages": [{"role": "user", "content": "x"}]}}), 2, "unsupported endpoint \"/v1/embeddings\""),
    ("unsupported method", json.dumps({"custom_id": "g", "method": "GET", "body": {
        "messages": [{"role": "user", "content": "x"}]}}), 1, "method: unsupported"),
    ("unsupported body field", line("t", tools=[]), 1, "body.tools: unsupported field"),
    ("image content", line("i", messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
     1, "only {\"type\": \"text\""),
    ("unknown role", line("r", messages=[{"role": "tool", "content": "x"}]), 1, "unsupported role 'tool'"),
    ("max_tokens not a number", line("m", max_tokens="ten"), 1, "body.max_tokens: expected a whole number"),
    ("both token limits", line("b", max_tokens=3, max_completion_tokens=4), 1, "not both"),
    ("n above 1", line("n", n=2), 1, "body.n: only 1"),
    ("negative temperature", line("t", temperature=-1), 1, "body.temperature"),
    ("no messages", line("e", messages=[]), 1, "body.messages"),
    ("not an object", "[1, 2]\n", 1, "one JSON object per line"),
]


class OpenAiBatch(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def submit(self, path, model=None, *extra):
        return self.nj.run("submit", "--openai-batch", str(path), "--model", model or TOK_MODEL, *extra)

    def test_round_trip_every_custom_id_once_in_the_documented_shape(self):
        p = self.submit(SAMPLE, None, "--name", "night-batch", "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        sub = json.loads(p.stdout)
        reqs = requests()
        self.assertEqual((sub["name"], sub["kind"], sub["items"]), ("night-batch", "generate", len(reqs)))
        # The prompts are the chat format, and the request settings became item settings.
        rows = {cid: (struct.unpack(f"<{len(blob) // 4}i", blob), json.loads(params))
                for cid, blob, params in self.nj.query("SELECT custom_id, prompt_ids, params FROM items")}
        for req in reqs:
            ids, params = rows[req["custom_id"]]
            self.assertEqual(list(ids), expected_chat_ids(req["body"]["messages"]), req["custom_id"])
            body = req["body"]
            self.assertEqual(params["max_tokens"], body.get("max_tokens") or body.get("max_completion_tokens"))
            self.assertAlmostEqual(params["temperature"], body.get("temperature") or 0, places=6)
            self.assertEqual(params["seed"], body.get("seed", 0))
        (close_id,) = tokenize("<|close|>", specials=True)
        self.assertEqual(rows["req-3"][0].count(close_id), 4, "a typed '<|close|>' is text, not a turn end")

        # Run all but the last item; cancel that one: done and error lines side by side.
        run = self.nj.run("run", "--drain", "--max-items", str(len(reqs) - 1), *RUN)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.nj.run("cancel", "night-batch").returncode, 0)

        p = self.nj.run("results", "night-batch", "--format", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(s) for s in p.stdout.splitlines()]
        plain = {r["custom_id"]: r for r in self.nj.results("night-batch")}
        validator = jsonschema.Draft202012Validator(OUTPUT_SCHEMA)
        for out in lines:
            errors = [e.message for e in validator.iter_errors(out)]
            self.assertEqual(errors, [], out)
        self.assertEqual(sorted(o["custom_id"] for o in lines), sorted(r["custom_id"] for r in reqs),
                         "every custom_id exactly once")
        self.assertEqual(len({o["id"] for o in lines}), len(lines), "line ids are unique")
        done = [o for o in lines if o["response"]]
        self.assertEqual(len(done), len(reqs) - 1)
        for out in done:
            ref = plain[out["custom_id"]]
            body = out["response"]["body"]
            choice = body["choices"][0]
            self.assertEqual(choice["finish_reason"], ref["finish_reason"])
            self.assertEqual(body["usage"]["completion_tokens"], ref["output_tokens"])
            self.assertEqual(body["usage"]["prompt_tokens"], ref["prompt_tokens"])
            self.assertEqual(body["usage"]["total_tokens"], ref["prompt_tokens"] + ref["output_tokens"])
            self.assertEqual(body["model"], "model-tok")
            expected = ref["output_text"]
            if ref["finish_reason"] == "stop":
                self.assertTrue(expected.endswith("<|end_of_msg|>"))
                expected = expected[: -len("<|end_of_msg|>")]
            self.assertEqual(choice["message"]["content"], expected)
        (cancelled,) = [o for o in lines if not o["response"]]
        self.assertEqual(cancelled["custom_id"], reqs[-1]["custom_id"])
        self.assertEqual(cancelled["error"]["code"], "item_cancelled")

        # Written to a file, atomically, the same lines.
        out_file = os.path.join(self.dir, "out.jsonl")
        self.assertEqual(self.nj.run("results", "night-batch", "--format", "openai", "--out", out_file).returncode, 0)
        with open(out_file) as f:
            self.assertEqual(f.read(), p.stdout)

    def test_unfinished_items_come_back_as_errors(self):
        self.assertEqual(self.submit(SAMPLE).returncode, 0)
        p = self.nj.run("results", "1", "--format", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(s) for s in p.stdout.splitlines()]
        self.assertEqual(len(lines), len(requests()))
        validator = jsonschema.Draft202012Validator(OUTPUT_SCHEMA)
        for out in lines:
            self.assertEqual([e.message for e in validator.iter_errors(out)], [])
            self.assertIsNone(out["response"])
            self.assertEqual(out["error"]["code"], "not_finished")
            self.assertIn("queued", out["error"]["message"])

    def test_validate_checks_a_file_without_a_store(self):
        env = dict(os.environ, NIGHTJAR_HOME=self.nj.home)

        def validate(*args):
            return subprocess.run([ARGS.bin, "validate", *args], capture_output=True, text=True, env=env,
                                  timeout=300)

        p = validate("--openai-batch", str(SAMPLE), "--model", TOK_MODEL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"OK {SAMPLE}: job 'openai_batch_input' (generate), {len(requests())} items\n")
        path = os.path.join(self.dir, "dup.jsonl")
        with open(path, "w") as f:
            f.write(BAD[2][1])
        p = validate("--openai-batch", path, "--model", TOK_MODEL)
        self.assertEqual(p.returncode, 3)
        self.assertIn(f"{path}:3: custom_id: duplicate 'a'", p.stderr)
        self.assertEqual(validate("--openai-batch", path).returncode, 2)
        self.assertEqual(validate(str(SAMPLE), "--model", TOK_MODEL).returncode, 2)
        self.assertFalse(os.path.exists(self.nj.home), "validate creates no home")

    def test_default_name_is_the_file_name(self):
        p = self.submit(SAMPLE, None, "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["name"], "openai_batch_input")

    def test_bad_files_name_file_and_line_and_write_nothing(self):
        first = os.path.join(self.dir, "bad-first.jsonl")
        with open(first, "w") as f:
            f.write(BAD[2][1])
        self.assertEqual(self.submit(first).returncode, 3)
        self.assertFalse(os.path.exists(self.nj.home), "a rejected file creates no home")
        self.assertEqual(self.submit(SAMPLE).returncode, 0)
        before = self.nj.dump()
        for name, text, line_no, needle in BAD:
            with self.subTest(name):
                path = os.path.join(self.dir, name.replace(" ", "_") + ".jsonl")
                with open(path, "w") as f:
                    f.write(text)
                p = self.submit(path)
                self.assertEqual(p.returncode, 3, f"{name}: {p.stderr}")
                self.assertIn(f"{path}:{line_no}: ", p.stderr, name)
                self.assertIn(needle, p.stderr, name)
                self.assertEqual(p.stdout, "")
                self.assertEqual(self.nj.dump(), before, f"{name}: the store is unchanged")

    def test_all_errors_of_a_file_are_reported(self):
        path = os.path.join(self.dir, "many.jsonl")
        with open(path, "w") as f:
            f.write(line("a") + "\n" + line("a") + "\n{\n" + line("c", top_p=3) + "\n")
        p = self.submit(path)
        self.assertEqual(p.returncode, 3)
        for n in (2, 3, 4):
            self.assertIn(f"{path}:{n}: ", p.stderr)

    def test_empty_file(self):
        path = os.path.join(self.dir, "empty.jsonl")
        open(path, "w").close()
        p = self.submit(path)
        self.assertEqual(p.returncode, 3)
        self.assertIn("no requests", p.stderr)

    def test_model_without_tokenizer_or_chat_specials_is_a_clear_error(self):
        p = self.submit(SAMPLE, PLAIN_MODEL)
        self.assertEqual(p.returncode, 3)
        self.assertIn("chat messages need the model's tokenizer", p.stderr)
        # A tokenizer whose special tokens do not include the chat format's.
        model = os.path.join(self.dir, "no-chat")
        shutil.copytree(TOK_MODEL, model)
        cfg_path = os.path.join(model, "tokenizer_config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        for tok in cfg["added_tokens_decoder"].values():
            if tok["content"] in ("<|open|>", "<|sep|>"):
                tok["content"] = tok["content"].replace("|>", "_x|>")
        cfg.pop("additional_special_tokens", None)
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        p = self.submit(SAMPLE, model)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertIn("no chat special tokens (<|open|>, <|sep|>)", p.stderr)

    def test_usage_errors(self):
        for args in (["submit", "--openai-batch", str(SAMPLE)],
                     ["submit", "spec.yaml", "--openai-batch", str(SAMPLE), "--model", TOK_MODEL],
                     ["submit", "spec.yaml", "--model", TOK_MODEL],
                     ["submit", "--openai-batch", str(SAMPLE), "--model", TOK_MODEL, "--memory", "lots"],
                     ["submit"]):
            with self.subTest(" ".join(args[1:])):
                p = self.nj.run(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
        self.assertFalse(os.path.exists(self.nj.home))


if __name__ == "__main__":
    njtest.main(globals())
