#!/usr/bin/env python3
"""`nightjar submit --openai-batch` and `results --format openai`, end to end on the demo model:
a sample Batch API input file becomes one generate job whose prompts are K3's chat format
(k3-model.md 9.1, rebuilt here by tests/cli/k3chat.py); its results come back as Batch API
output lines, one per custom_id, valid against schemas/openai_batch_output.schema.json, with
the reply split into answer and reasoning, stop strings and log-probabilities as the API has
them; `tokenize` and `generate --chat-file` use the same renderer; bad files are rejected
naming the file and line, and write nothing."""
import json
import math
import os
import shutil
import signal
import struct
import subprocess
import time
import unittest

import jsonschema  # Debian: python3-jsonschema
import numpy as np

import k3chat
import njtest

ARGS = None
WORK = MODEL = VOCAB = None
SAMPLE = njtest.REPO / "tests/cli/data/openai_batch_input.jsonl"
OUTPUT_SCHEMA = json.loads((njtest.REPO / "schemas/openai_batch_output.schema.json").read_text())
RUN = ["--threads", "1", "--log-seconds", "1000"]
_ENCODED = {}


def setUpModule():
    global WORK, MODEL, VOCAB
    WORK = njtest.scratch_dir("openai-")
    # The README demo's model (its preset writes the tokenizer, with K3's control tokens).
    MODEL = njtest.make_model(os.path.join(WORK, "model-demo"), preset="demo")
    VOCAB = k3chat.Vocab(MODEL)


def requests(path=SAMPLE):
    return [json.loads(line) for line in open(path).read().splitlines() if line.strip()]


def encode(text):
    """Plain encoding (special names are text) by the program's tokenizer."""
    if text not in _ENCODED:
        p = subprocess.run([ARGS.bin, "tokenize", "--model", MODEL, "--text", text, "--output", "json"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        _ENCODED[text] = json.loads(p.stdout)["ids"]
    return _ENCODED[text]


def thinking_of(body):
    """(thinking, effort) as the request asks (openai_batch.h's rules)."""
    kw = body.get("chat_template_kwargs") or {}
    thinking = bool(body.get("reasoning_effort")) or kw.get("thinking", False)
    return thinking, kw.get("thinking_effort") or body.get("reasoning_effort") or "max"


def expected_prompt(body):
    thinking, effort = thinking_of(body)
    pieces = k3chat.prompt_pieces(body["messages"], thinking, effort)
    return k3chat.prompt_text(pieces), VOCAB.prompt_ids(pieces, encode)


def text_of(b):
    return None if b is None else b.decode("utf-8", errors="replace")


def schema_errors(line):
    return [e.message for e in jsonschema.Draft202012Validator(OUTPUT_SCHEMA).iter_errors(line)]


def log_softmax(logits):
    x = np.asarray(logits, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


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
    ("unknown effort", line("f", reasoning_effort="extreme"), 1, "body.reasoning_effort: expected"),
    ("effort without thinking", line("k", chat_template_kwargs={"thinking_effort": "low"}), 1,
     "needs \"thinking\": true"),
    ("five stop strings", line("s", stop=["a", "b", "c", "d", "e"]), 1, "body.stop"),
    ("top_logprobs alone", line("l", top_logprobs=2), 1, "body.top_logprobs: needs \"logprobs\": true"),
    ("reasoning on a user message", line("u", messages=[{"role": "user", "content": "x", "reasoning_content": "y"}]),
     1, "only assistant messages have reasoning"),
]


class OpenAiBatch(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(WORK, self.id().split(".")[-1])
        os.makedirs(self.dir)
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home"))

    def submit(self, path, model=None, *extra):
        return self.nj.run("submit", "--openai-batch", str(path), "--model", model or MODEL, *extra)

    def write_requests(self, name, reqs):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in reqs))
        return path

    def run_file(self, path, name):
        p = self.submit(path, None, "--name", name)
        self.assertEqual(p.returncode, 0, p.stderr)
        run = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(run.returncode, 0, run.stderr)
        p = self.nj.run("results", name, "--format", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        return {o["custom_id"]: o for o in map(json.loads, p.stdout.splitlines())}

    def prompt_and_output(self, custom_id):
        (prompt_blob, result_blob), = self.nj.query(
            "SELECT i.prompt_ids, r.output_ids FROM items i JOIN results r ON r.item_id = i.id "
            "WHERE i.custom_id = ?", (custom_id,))
        unpack = lambda b: list(struct.unpack(f"<{len(b) // 4}i", b))
        return unpack(prompt_blob), unpack(result_blob)

    def test_round_trip_every_custom_id_once_in_the_documented_shape(self):
        p = self.submit(SAMPLE, None, "--name", "night-batch", "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        sub = json.loads(p.stdout)
        reqs = requests()
        self.assertEqual((sub["name"], sub["kind"], sub["items"]), ("night-batch", "generate", len(reqs)))
        # The prompts are K3's chat format, and the request settings became item settings.
        rows = {cid: (struct.unpack(f"<{len(blob) // 4}i", blob), json.loads(params))
                for cid, blob, params in self.nj.query("SELECT custom_id, prompt_ids, params FROM items")}
        for req in reqs:
            ids, params = rows[req["custom_id"]]
            body = req["body"]
            self.assertEqual(list(ids), expected_prompt(body)[1], req["custom_id"])
            self.assertEqual(params["max_tokens"], body.get("max_tokens") or body.get("max_completion_tokens"))
            # OpenAI's default temperature is 1 (absent or null); without a seed one is derived
            # from the job's name and the custom_id (test_defaults_as_openai_defines_them).
            temperature = body.get("temperature")
            self.assertAlmostEqual(params["temperature"], 1 if temperature is None else temperature, places=6)
            if "seed" in body:
                self.assertEqual(params["seed"], body["seed"])
            else:
                self.assertNotEqual(params["seed"], 0)
            self.assertEqual(params["chat"]["thinking"], thinking_of(body)[0])
            self.assertEqual(params.get("logprobs", False), body.get("logprobs", False))
        # Typed control-token names are text: only the envelope's controls are control ids.
        ids3 = rows["req-3"][0]
        self.assertEqual(ids3.count(VOCAB.close), 5, "system, user, user: 1 each; the assistant's: 2")
        self.assertEqual(ids3.count(VOCAB.eom), 4, "one per message")
        self.assertEqual(rows["req-4"][0].count(VOCAB.eom), 2, "the effort message, then the user's")

        # Run all but the last item; cancel that one: done and error lines side by side.
        run = self.nj.run("run", "--drain", "--max-items", str(len(reqs) - 1), *RUN)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.nj.run("cancel", "night-batch").returncode, 0)

        p = self.nj.run("results", "night-batch", "--format", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(s) for s in p.stdout.splitlines()]
        plain = {r["custom_id"]: r for r in self.nj.results("night-batch")}
        for out in lines:
            self.assertEqual(schema_errors(out), [], out)
        self.assertEqual(sorted(o["custom_id"] for o in lines), sorted(r["custom_id"] for r in reqs),
                         "every custom_id exactly once")
        self.assertEqual(len({o["id"] for o in lines}), len(lines), "line ids are unique")
        done = [o for o in lines if o["response"]]
        self.assertEqual(len(done), len(reqs) - 1)
        bodies = {r["custom_id"]: r["body"] for r in reqs}
        for out in done:
            cid = out["custom_id"]
            ref = plain[cid]
            body = out["response"]["body"]
            choice = body["choices"][0]
            self.assertEqual(choice["finish_reason"], ref["finish_reason"])
            self.assertEqual(body["usage"]["completion_tokens"], ref["output_tokens"])
            self.assertEqual(body["usage"]["prompt_tokens"], ref["prompt_tokens"])
            self.assertEqual(body["usage"]["total_tokens"], ref["prompt_tokens"] + ref["output_tokens"])
            self.assertEqual(body["model"], "model-demo")
            # The reply read into its channels, as k3-model.md 9.1 lays it out.
            thinking = thinking_of(bodies[cid])[0]
            content, reasoning, ended, n = VOCAB.read_reply(ref["output_ids"], thinking)
            self.assertEqual(choice["message"]["content"], text_of(content), cid)
            if thinking:
                self.assertEqual(choice["message"]["reasoning_content"], text_of(reasoning), cid)
            else:
                self.assertNotIn("reasoning_content", choice["message"], cid)
            self.assertEqual(choice["finish_reason"], "stop" if ended else "length", cid)
            if ended:
                self.assertEqual(n, ref["output_tokens"], "generation ends with the reply")
                self.assertEqual(ref["output_ids"][-1], VOCAB.eom)
            else:
                self.assertEqual(ref["output_tokens"],
                                 bodies[cid].get("max_tokens") or bodies[cid].get("max_completion_tokens"))
            if not bodies[cid].get("logprobs"):
                self.assertIsNone(choice["logprobs"])
        (cancelled,) = [o for o in lines if not o["response"]]
        self.assertEqual(cancelled["custom_id"], reqs[-1]["custom_id"])
        self.assertEqual(cancelled["error"]["code"], "item_cancelled")

        # Written to a file, atomically, the same lines.
        out_file = os.path.join(self.dir, "out.jsonl")
        self.assertEqual(self.nj.run("results", "night-batch", "--format", "openai", "--out", out_file).returncode, 0)
        with open(out_file) as f:
            self.assertEqual(f.read(), p.stdout)

    def test_logprobs_are_the_log_softmax_of_the_logits_the_engine_produced(self):
        (req,) = [r for r in requests() if r["body"].get("logprobs")]
        out = self.run_file(self.write_requests("lp.jsonl", [req]), "lp")[req["custom_id"]]
        self.assertEqual(schema_errors(out), [])
        choice = out["response"]["body"]["choices"][0]
        entries = choice["logprobs"]["content"]
        prompt, output = self.prompt_and_output(req["custom_id"])
        self.assertEqual(len(entries), len(output), "one entry per generated token")
        self.assertEqual(len(output), out["response"]["body"]["usage"]["completion_tokens"])
        k = req["body"]["top_logprobs"]
        for pos, (entry, token) in enumerate(zip(entries, output)):
            # The logits before this token, from a teacher-forced pass of the same engine.
            p = subprocess.run([ARGS.bin, "logits", "--model", MODEL, "--prompt-ids",
                                ",".join(map(str, prompt + output[:pos])), "--threads", "1", "--output", "json"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            lsm = log_softmax(json.loads(p.stdout)["last_logits"])
            self.assertAlmostEqual(entry["logprob"], lsm[token], delta=1e-5 * max(1, abs(lsm[token])))
            self.assertEqual(bytes(entry["bytes"]), VOCAB.token_bytes(token))
            order = sorted(range(len(lsm)), key=lambda i: (-lsm[i], i))[:k]
            self.assertEqual(len(entry["top_logprobs"]), k)
            for alt, i in zip(entry["top_logprobs"], order):
                self.assertEqual(bytes(alt["bytes"]), VOCAB.token_bytes(i))
                self.assertAlmostEqual(alt["logprob"], lsm[i], delta=1e-5 * max(1, abs(lsm[i])))
            self.assertTrue(all(math.isfinite(a["logprob"]) and a["logprob"] <= 0 for a in entry["top_logprobs"]))

    def test_stop_strings_end_the_reply_where_the_text_first_shows_them(self):
        req = {"custom_id": "free", "body": {"messages": [{"role": "user", "content": "Tell me about owls."}],
                                             "max_tokens": 24, "temperature": 0}}
        free = self.run_file(self.write_requests("free.jsonl", [req]), "free")["free"]
        content = free["response"]["body"]["choices"][0]["message"]["content"]
        _, output = self.prompt_and_output("free")
        self.assertIsNotNone(content)
        clean = content.split("\ufffd")[0]  # a stop string is text: cut inside valid UTF-8
        self.assertGreaterEqual(len(clean), 8, f"the demo model's answer is too short to cut: {content!r}")
        stop = clean[len(clean) // 2: len(clean) // 2 + 3]
        cut = content.index(stop)
        # The same request with the stop string (and one that never shows) in another home.
        stopped_req = {"custom_id": "stopped", "body": dict(req["body"], stop=[stop, "\x01never"])}
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home2"))
        out = self.run_file(self.write_requests("stop.jsonl", [stopped_req]), "stopped")["stopped"]
        self.assertEqual(schema_errors(out), [])
        choice = out["response"]["body"]["choices"][0]
        self.assertEqual(choice["finish_reason"], "stop")
        self.assertEqual(choice["message"]["content"], content[:cut])
        _, stopped_output = self.prompt_and_output("stopped")
        _, _, ended, n = VOCAB.read_reply(output, False, stop=[stop])
        self.assertTrue(ended)
        self.assertEqual(stopped_output, output[:n], "generation stops at the token that completes the string")
        self.assertEqual(out["response"]["body"]["usage"]["completion_tokens"], n)

    def test_a_reply_stopped_and_killed_midway_equals_an_uninterrupted_one(self):
        # Thinking, sampling, a stop string and logprobs: everything a resumed reply must redo
        # identically (the logprobs of the tokens stored before the stops come from the store).
        req = {"custom_id": "long", "body": {
            "messages": [{"role": "user", "content": "Tell me a long story about a nightjar."}],
            "max_tokens": 100, "temperature": 0.9, "seed": 11, "reasoning_effort": "medium",
            "stop": ["\x02 never"], "logprobs": True, "top_logprobs": 2}}
        path = self.write_requests("long.jsonl", [req])
        reference = self.run_file(path, "long")["long"]["response"]["body"]

        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home2"))
        self.assertEqual(self.submit(path, None, "--name", "long").returncode, 0)
        cadence = ["--commit-tokens", "4", "--checkpoint-tokens", "24"]

        def run_until(tokens, sig):
            proc = self.nj.popen("run", "--drain", *RUN, *cadence)
            deadline = time.time() + 300
            while self.nj.query("SELECT tokens_done FROM items")[0][0] < tokens:
                self.assertIsNone(proc.poll(), "run ended before the signal")
                self.assertLess(time.time(), deadline)
                time.sleep(0.01)
            proc.send_signal(sig)
            proc.wait(timeout=120)

        run_until(20, signal.SIGTERM)  # graceful: checkpoint, back in the queue
        run_until(50, signal.SIGKILL)  # a crash: the next run replays what it lost
        done = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(self.nj.events("resumed"))
        p = self.nj.run("results", "long", "--format", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        body = json.loads(p.stdout)["response"]["body"]
        self.assertEqual(body["usage"], reference["usage"])
        self.assertEqual(body["choices"], reference["choices"], "the same reply, logprobs and all")

    def test_tokenize_and_generate_use_the_same_renderer(self):
        reqs = {r["custom_id"]: r for r in requests()}
        for cid in ("req-3", "req-5"):
            body = reqs[cid]["body"]
            chat = os.path.join(self.dir, cid + ".json")
            with open(chat, "w") as f:
                json.dump({"messages": body["messages"]}, f)
            thinking, effort = thinking_of(body)
            flags = ["--thinking", "--thinking-effort", effort] if thinking else []
            p = subprocess.run([ARGS.bin, "tokenize", "--model", MODEL, "--chat-file", chat, *flags,
                                "--output", "json"], capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            got = json.loads(p.stdout)
            text, ids = expected_prompt(body)
            self.assertEqual(got, {"text": text, "ids": ids}, cid)
        # generate --chat-file gives the tokens `run` gives for the same request (greedy).
        greedy = [dict(reqs[cid], body=dict(reqs[cid]["body"], temperature=0)) for cid in ("req-1", "req-4")]
        out = self.run_file(self.write_requests("two.jsonl", greedy), "two")
        for cid in ("req-1", "req-4"):
            body = reqs[cid]["body"]
            chat = os.path.join(self.dir, cid + ".json")
            with open(chat, "w") as f:
                json.dump({"messages": body["messages"]}, f)
            thinking, effort = thinking_of(body)
            flags = ["--thinking", "--thinking-effort", effort] if thinking else []
            p = subprocess.run([ARGS.bin, "generate", "--model", MODEL, "--chat-file", chat, *flags,
                                "--max-tokens", str(body["max_tokens"]), "--threads", "1", "--output", "json"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            gen = json.loads(p.stdout)
            prompt, output = self.prompt_and_output(cid)
            self.assertEqual(gen["prompt_tokens"], len(prompt))
            self.assertEqual(gen["output_ids"], output, cid)
            message = out[cid]["response"]["body"]["choices"][0]["message"]
            self.assertEqual(gen["content"], message["content"])
            self.assertEqual(gen.get("reasoning_content"), message.get("reasoning_content"))
            self.assertEqual(gen["finish_reason"], out[cid]["response"]["body"]["choices"][0]["finish_reason"])
        # A chat file with a bad message names the file and the message.
        bad = os.path.join(self.dir, "bad-chat.json")
        with open(bad, "w") as f:
            json.dump({"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "y"}]}, f)
        for cmd in (["tokenize"], ["generate", "--max-tokens", "1"]):
            p = subprocess.run([ARGS.bin, *cmd, "--model", MODEL, "--chat-file", bad], capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(p.returncode, 3, p.stderr)
            self.assertIn(f"{bad}: messages[1].role: unsupported role 'robot'", p.stderr)
        p = subprocess.run([ARGS.bin, "tokenize", "--model", MODEL, "--text", "x", "--thinking"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, "--thinking needs --chat-file")

    def params_of(self, custom_id):
        ((params,),) = self.nj.query("SELECT params FROM items WHERE custom_id = ?", (custom_id,))
        return json.loads(params)

    def test_defaults_as_openai_defines_them(self):
        """Issue 34: a request without max_tokens runs up to the model's context (at most the
        job's default, --max-tokens, 4096); without temperature at 1; without a seed at one
        derived from the job's name and the custom_id: the same tokens in any home, run after
        run (no longer cut at 64, no longer greedy)."""
        plain = {"messages": [{"role": "user", "content": "Tell me about owls."}]}
        path = self.write_requests("defaults.jsonl", [{"custom_id": "a", "body": plain},
                                                      {"custom_id": "b", "body": plain}])
        p = self.submit(path, None, "--name", "night")
        self.assertEqual(p.returncode, 0, p.stderr)
        a, b = self.params_of("a"), self.params_of("b")
        config = json.loads(open(os.path.join(MODEL, "config.json")).read())
        limits = [config.get("max_position_embeddings")]
        tok_config = os.path.join(MODEL, "tokenizer_config.json")
        limits.append(json.loads(open(tok_config).read()).get("model_max_length"))
        limit = min(v for v in limits if isinstance(v, int))
        prompt = expected_prompt(plain)[1]
        self.assertEqual(a["max_tokens"], min(4096, limit - len(prompt)))
        self.assertEqual((a["temperature"], b["temperature"]), (1, 1))
        self.assertNotEqual(a["seed"], b["seed"], "one seed per custom_id")
        # The job's default; the same seeds under the same name in another home, others under
        # another name.
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home2"))
        p = self.submit(path, None, "--name", "night", "--max-tokens", "6")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.params_of("a")["max_tokens"], 6)
        self.assertEqual((self.params_of("a")["seed"], self.params_of("b")["seed"]), (a["seed"], b["seed"]))
        run = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(run.returncode, 0, run.stderr)
        first = {r["custom_id"]: r["output_ids"] for r in self.nj.results("night")}
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home3"))
        self.assertEqual(self.submit(path, None, "--name", "night", "--max-tokens", "6").returncode, 0)
        run = self.nj.run("run", "--drain", *RUN, "--batch", "1")
        self.assertEqual(run.returncode, 0, run.stderr)
        again = {r["custom_id"]: r["output_ids"] for r in self.nj.results("night")}
        self.assertEqual(again, first, "sampled, and reproducible from the job and custom_id")
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home4"))
        self.assertEqual(self.submit(path, None, "--name", "other").returncode, 0)
        self.assertNotEqual(self.params_of("a")["seed"], a["seed"])
        self.assertEqual(self.nj.run("submit", "--openai-batch", path, "--model", MODEL, "--max-tokens", "0").returncode, 2)

    def test_fields_that_change_nothing_are_accepted_and_recorded(self):
        """Issue 34: user, metadata, zero penalties, a text response_format, n 1, stream false
        and an empty logit_bias are accepted, recorded with the item, and change no token;
        what would change the output is refused, naming the field."""
        extras = {"user": "u-17", "metadata": {"team": "night"}, "presence_penalty": 0, "frequency_penalty": 0.0,
                  "response_format": {"type": "text"}, "n": 1, "stream": False, "logit_bias": {}}
        body = {"messages": [{"role": "user", "content": "Name a bird."}], "max_tokens": 5, "seed": 3,
                "temperature": 0.9}
        with_extras = self.run_file(self.write_requests("x.jsonl", [{"custom_id": "q", "body": dict(body, **extras)}]),
                                    "x")["q"]
        self.assertEqual(self.params_of("q")["accepted_fields"], extras)
        _, tokens = self.prompt_and_output("q")
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home2"))
        self.run_file(self.write_requests("x.jsonl", [{"custom_id": "q", "body": body}]), "x")
        self.assertNotIn("accepted_fields", self.params_of("q"))
        self.assertEqual(self.prompt_and_output("q")[1], tokens, "the accepted fields change no token")
        self.assertEqual(schema_errors(with_extras), [])
        for field, value, needle in (("presence_penalty", 0.5, "only 0"), ("frequency_penalty", -1, "only 0"),
                                     ("response_format", {"type": "json_object"}, "only {\"type\": \"text\"}"),
                                     ("stream", True, "only false"), ("logit_bias", {"5": 1}, "only {}"),
                                     ("user", 5, "expected text"), ("metadata", {"a": 1}, "expected an object")):
            path = self.write_requests("bad.jsonl", [{"custom_id": "q", "body": dict(body, **{field: value})}])
            p = self.submit(path)
            self.assertEqual(p.returncode, 3, (field, p.stderr))
            self.assertIn(f"bad.jsonl:1: body.{field}: {needle}", p.stderr)

    def test_output_and_error_files_are_written_when_the_job_ends(self):
        """Issue 34: `submit --openai-batch IN --output-file OUT [--error-file ERR]` writes the
        Batch API's output file (and error file) when the job ends, atomically, the same
        lines as `results --format openai`, split as OpenAI splits them."""
        reqs = [{"custom_id": f"r{k}", "body": {"messages": [{"role": "user", "content": f"Count to {k}."}],
                                                "max_tokens": 4, "temperature": 0}} for k in range(3)]
        path = self.write_requests("in.jsonl", reqs)
        out, err = os.path.join(self.dir, "out", "night.jsonl"), os.path.join(self.dir, "night-errors.jsonl")
        p = self.submit(path, None, "--name", "split", "--output-file", out, "--error-file", err)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.nj.run("cancel", "split", "--item", "r1").returncode, 0)
        self.assertFalse(os.path.exists(out), "written when the job ends, not before")
        run = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(run.returncode, 0, run.stderr)
        every = self.nj.run("results", "split", "--format", "openai").stdout.splitlines(keepends=True)
        with open(out) as f:
            self.assertEqual(f.read(), every[0] + every[2])
        with open(err) as f:
            self.assertEqual(f.read(), every[1])
        self.assertEqual(json.loads(every[1])["error"]["code"], "item_cancelled")
        self.assertEqual(sorted(os.listdir(os.path.dirname(out))), ["night.jsonl"], "no temporary file left")
        self.assertEqual(self.nj.status("split")["job"]["outputs"]["state"], "written")
        # Retried and run again: the files follow (the job ends again).
        self.assertEqual(self.nj.run("retry", "split", "r1").returncode, 0)
        run = self.nj.run("run", "--drain", *RUN)
        self.assertEqual(run.returncode, 0, run.stderr)
        every = self.nj.run("results", "split", "--format", "openai").stdout
        with open(out) as f:
            self.assertEqual(f.read(), every)
        with open(err) as f:
            self.assertEqual(f.read(), "")
        # Without --error-file every line goes to the output file; --write writes it again.
        self.nj = njtest.Nightjar(ARGS.bin, os.path.join(self.dir, "home2"))
        one = os.path.join(self.dir, "all.jsonl")
        self.assertEqual(self.submit(path, None, "--name", "one", "--output-file", one).returncode, 0)
        self.assertEqual(self.nj.run("cancel", "one", "--item", "r0").returncode, 0)
        self.assertEqual(self.nj.run("run", "--drain", *RUN).returncode, 0)
        with open(one) as f:
            self.assertEqual(f.read(), self.nj.run("results", "one", "--format", "openai").stdout)
        os.remove(one)
        p = self.nj.run("results", "one", "--write", "--output", "json")  # says what it wrote
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), {"job": {"id": 1, "name": "one"}, "written": [one], "records": 3})
        self.assertTrue(os.path.exists(one))
        # Refused: an error file alone, a file in the home, the input itself, one file twice.
        self.assertEqual(self.submit(path, None, "--error-file", err).returncode, 2)
        for args, needle in ((["--output-file", os.path.join(self.nj.home, "o.jsonl")], "home"),
                             (["--output-file", path], "in.jsonl"),
                             (["--output-file", out, "--error-file", out], "same file")):
            p = self.submit(path, None, *args)
            self.assertEqual(p.returncode, 3, (args, p.stderr))
            self.assertIn(needle, p.stderr)

    def test_unfinished_items_come_back_as_errors(self):
        self.assertEqual(self.submit(SAMPLE).returncode, 0)
        p = self.nj.run("results", "1", "--format", "openai")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = [json.loads(s) for s in p.stdout.splitlines()]
        self.assertEqual(len(lines), len(requests()))
        for out in lines:
            self.assertEqual(schema_errors(out), [])
            self.assertIsNone(out["response"])
            self.assertEqual(out["error"]["code"], "not_finished")
            self.assertIn("queued", out["error"]["message"])

    def test_validate_checks_a_file_without_a_store(self):
        env = dict(os.environ, NIGHTJAR_HOME=self.nj.home)

        def validate(*args):
            return subprocess.run([ARGS.bin, "validate", *args], capture_output=True, text=True, env=env,
                                  timeout=300)

        p = validate("--openai-batch", str(SAMPLE), "--model", MODEL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, f"OK {SAMPLE}: job 'openai_batch_input' (generate), {len(requests())} items\n")
        path = os.path.join(self.dir, "dup.jsonl")
        with open(path, "w") as f:
            f.write(BAD[2][1])
        p = validate("--openai-batch", path, "--model", MODEL)
        self.assertEqual(p.returncode, 3)
        self.assertIn(f"{path}:3: custom_id: duplicate 'a'", p.stderr)
        self.assertEqual(validate("--openai-batch", path).returncode, 2)
        self.assertEqual(validate(str(SAMPLE), "--model", MODEL).returncode, 2)
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

    def test_model_without_tokenizer_or_chat_control_tokens_is_a_clear_error(self):
        plain_model = njtest.make_model(os.path.join(WORK, "model-plain"))  # no tokenizer
        p = self.submit(SAMPLE, plain_model)
        self.assertEqual(p.returncode, 3)
        self.assertIn("chat messages need the model's tokenizer", p.stderr)
        # A tokenizer whose special tokens do not include the chat format's.
        model = os.path.join(self.dir, "no-chat")
        shutil.copytree(MODEL, model)
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
        self.assertIn("no chat control tokens (<|open|>, <|sep|>)", p.stderr)

    def test_usage_errors(self):
        for args in (["submit", "--openai-batch", str(SAMPLE)],
                     ["submit", "spec.yaml", "--openai-batch", str(SAMPLE), "--model", MODEL],
                     ["submit", "spec.yaml", "--model", MODEL],
                     ["submit", "--openai-batch", str(SAMPLE), "--model", MODEL, "--memory", "lots"],
                     ["submit"]):
            with self.subTest(" ".join(args[1:])):
                p = self.nj.run(*args)
                self.assertEqual(p.returncode, 2, p.stderr)
        self.assertFalse(os.path.exists(self.nj.home))


if __name__ == "__main__":
    njtest.main(globals())
