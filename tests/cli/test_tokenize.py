#!/usr/bin/env python3
"""`nightjar tokenize` / `nightjar detokenize` end to end on the generated vocabulary:
round trips through the command line (text, files, invalid UTF-8), specials only when
asked, and errors that name the file or the bad value."""
import argparse, json, os, subprocess, sys, tempfile, unittest

BIN = None
MODEL = None


def run(*args, input_bytes=None):
    return subprocess.run([BIN, *args], input=input_bytes, capture_output=True, timeout=120)


def ids_of(*args):
    p = run("tokenize", "--model", MODEL, *args, "--output", "json")
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)["ids"]


def config():
    with open(os.path.join(MODEL, "tokenizer_config.json")) as f:
        return json.load(f)


class Tokenize(unittest.TestCase):
    def test_text_round_trips_through_both_commands(self):
        text = "The nightjar's churr — 夜鹰, Козодой, 🌙 at 07:00!"
        ids = ids_of("--text", text)
        self.assertTrue(all(isinstance(i, int) for i in ids))
        p = run("detokenize", "--model", MODEL, "--ids", ",".join(map(str, ids)), "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), {"text": text})

    def test_text_output_is_space_separated_ids(self):
        p = run("tokenize", "--model", MODEL, "--text", "Hello world")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([int(x) for x in p.stdout.split()], ids_of("--text", "Hello world"))

    def test_file_bytes_round_trip_exactly_even_when_invalid_utf8(self):
        data = "line one\n\tline two  \r\n".encode() + b"\xff\xe4\xb8 broken \xed\xa0\x80 end"
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(data)
        try:
            ids = ids_of("--file", f.name)
        finally:
            os.unlink(f.name)
        p = run("detokenize", "--model", MODEL, "--ids", ",".join(map(str, ids)))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, data)  # raw bytes, no newline added

    def test_standard_input(self):
        p = run("tokenize", "--model", MODEL, "--file", "-", "--output", "json", input_bytes=b"from stdin")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["ids"], ids_of("--text", "from stdin"))

    def test_special_names_are_text_unless_asked(self):
        first_special = min(int(k) for k in config()["added_tokens_decoder"])
        text = "<|open|>user<|sep|>hi<|close|>"
        plain = ids_of("--text", text)
        self.assertTrue(all(i < first_special for i in plain))
        chat = ids_of("--text", text, "--specials")
        self.assertEqual(chat[0], first_special + 3)  # <|open|>
        self.assertEqual(chat[-1], first_special + 4)  # <|close|>

    def test_json_replaces_invalid_utf8(self):
        p = run("detokenize", "--model", MODEL, "--ids", "104,228,184", "--output", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), {"text": "h\ufffd"})


class Errors(unittest.TestCase):
    def test_missing_model_names_the_file(self):
        p = run("tokenize", "--model", "/nonexistent/k3", "--text", "x")
        self.assertEqual(p.returncode, 3)
        self.assertIn(b"/nonexistent/k3/tiktoken.model", p.stderr)

    def test_corrupt_vocabulary_names_the_line(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(MODEL, "tiktoken.model")) as src, open(os.path.join(d, "tiktoken.model"), "w") as dst:
                lines = src.readlines()
                lines[300] = "not-base64! 300\n"
                dst.writelines(lines)
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump(config(), f)
            p = run("tokenize", "--model", d, "--text", "x")
            self.assertEqual(p.returncode, 3)
            self.assertIn(b"tiktoken.model:301: token 'not-base64!' is not valid base64", p.stderr)

    def test_input_must_be_given_once(self):
        self.assertEqual(run("tokenize", "--model", MODEL).returncode, 2)
        self.assertEqual(run("tokenize", "--model", MODEL, "--text", "a", "--file", "b").returncode, 2)

    def test_bad_ids_are_usage_errors_naming_the_value(self):
        p = run("detokenize", "--model", MODEL, "--ids", "1,two,3")
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"'two'", p.stderr)
        p = run("detokenize", "--model", MODEL, "--ids", "5,99999999")
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"99999999", p.stderr)
        self.assertIn(b"outside the vocabulary", p.stderr)

    def test_missing_file_names_it(self):
        p = run("tokenize", "--model", MODEL, "--file", "/nonexistent/input.txt")
        self.assertEqual(p.returncode, 3)
        self.assertIn(b"/nonexistent/input.txt", p.stderr)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    a, rest = ap.parse_known_args()
    BIN, MODEL = a.bin, a.model
    unittest.main(argv=[sys.argv[0]] + rest)
